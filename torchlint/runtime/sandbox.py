"""A repeatable run with no network, as bench/sim_accel.py makes it: sockets
refuse every address but the machine's own (a run never waits on a
download), Python's, NumPy's and torch's generators are seeded (0), and
matplotlib draws off screen. With `fake_data`, torchvision's downloadable
image sets (MNIST, CIFAR10, SVHN...) are small synthetic sets of the same
shapes and attributes, the same in every run (bench/sim_accel.py's, which
imports them from here). Everything is undone by `Sandbox.restore()`.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import sys
from typing import Any, Callable, List, Optional, Tuple

_MISSING = object()


def _local(address: Any) -> bool:
    host = address[0] if isinstance(address, tuple) and address else address
    return isinstance(host, str) and (host in ("localhost", "::1") or host.startswith("127."))


class Sandbox:
    def __init__(self) -> None:
        self._undo: List[Callable[[], None]] = []

    def _set(self, owner: Any, name: str, value: Any) -> None:
        old = getattr(owner, name, _MISSING)
        setattr(owner, name, value)

        def undo() -> None:
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)

        self._undo.append(undo)

    def network_off(self) -> None:
        original_connect = socket.socket.connect
        original_connect_ex = socket.socket.connect_ex
        original_getaddrinfo = socket.getaddrinfo

        def connect(sock: socket.socket, address: Any) -> None:
            if sock.family == getattr(socket, "AF_UNIX", None) or _local(address):
                return original_connect(sock, address)
            raise OSError(f"network disabled in this run: {address!r}")

        def connect_ex(sock: socket.socket, address: Any) -> int:
            if sock.family == getattr(socket, "AF_UNIX", None) or _local(address):
                return original_connect_ex(sock, address)
            return 111  # ECONNREFUSED

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            if host in (None, "localhost", "127.0.0.1", "::1", "") or str(host).startswith("127."):
                return original_getaddrinfo(host, *args, **kwargs)
            raise socket.gaierror(f"network disabled in this run: {host!r}")

        self._set(socket.socket, "connect", connect)
        self._set(socket.socket, "connect_ex", connect_ex)
        self._set(socket, "getaddrinfo", getaddrinfo)

    def seed(self) -> None:
        state = random.getstate()
        self._undo.append(lambda: random.setstate(state))
        random.seed(0)
        with contextlib.suppress(ImportError):
            import numpy

            np_state = numpy.random.get_state()
            self._undo.append(lambda: numpy.random.set_state(np_state))
            numpy.random.seed(0)
        import torch

        torch_state = torch.get_rng_state()
        self._undo.append(lambda: torch.set_rng_state(torch_state))
        torch.manual_seed(0)

    def environment(self, name: str, value: str) -> None:
        old = os.environ.get(name)
        os.environ.setdefault(name, value)

        def undo() -> None:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old

        self._undo.append(undo)

    def fake_data(self) -> bool:
        tvd = _import_torchvision_datasets()
        if tvd is None:
            return False
        for name, spec in IMAGE_SETS.items():
            if hasattr(tvd, name):
                self._set(tvd, name, fake_image_set(name, *spec))
        return True

    def restore(self) -> None:
        while self._undo:
            self._undo.pop()()


# -- data that is not here -----------------------------------------------------------------------

# torchvision datasets that download a fixed image set: (height, width, channels, classes, layout).
# "tensor": `data`/`targets` tensors (MNIST and friends); "array": a NumPy `data` (N, H, W, C) and a
# `targets` list (CIFAR); "svhn": a NumPy `data` (N, C, H, W) and `labels`.
IMAGE_SETS = {
    "MNIST": (28, 28, 1, 10, "tensor"),
    "FashionMNIST": (28, 28, 1, 10, "tensor"),
    "KMNIST": (28, 28, 1, 10, "tensor"),
    "QMNIST": (28, 28, 1, 10, "tensor"),
    "EMNIST": (28, 28, 1, 47, "tensor"),
    "CIFAR10": (32, 32, 3, 10, "array"),
    "CIFAR100": (32, 32, 3, 100, "array"),
    "SVHN": (32, 32, 3, 10, "svhn"),
    "STL10": (96, 96, 3, 10, "svhn"),
}
FAKE_TRAIN, FAKE_TEST = 64, 32  # samples: enough for a few batches, quick to run


def _import_torchvision_datasets() -> Optional[Any]:
    """torchvision.datasets, or None when torchvision is not installed. A
    torchvision whose compiled operators do not match the installed torch (a
    CUDA wheel beside a CPU build of torch) fails at import while registering
    them; it is then imported with those registrations skipped: datasets,
    transforms and models work, its compiled operators (nms, roi_align) do not."""
    try:
        import torchvision.datasets as tvd

        return tvd
    except ImportError:
        return None
    except RuntimeError:
        pass
    import torch.library

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    register_fake = torch.library.register_fake

    def tolerant(
        op: Any, fn: Any = None, /, *, lib: Any = None, _stacklevel: int = 1, allow_override: bool = False
    ) -> Any:
        def register(f: Any) -> Any:
            try:
                return register_fake(op, f, lib=lib, _stacklevel=_stacklevel + 1, allow_override=allow_override)
            except RuntimeError:  # the operator's library did not load
                return f

        return register(fn) if fn is not None else register

    torch.library.register_fake = tolerant
    try:
        import torchvision.datasets as tvd

        return tvd
    except Exception:
        return None
    finally:
        torch.library.register_fake = register_fake


def fake_image_set(name: str, height: int, width: int, channels: int, classes: int, layout: str) -> type:
    """A torchvision image set's stand-in: synthetic images of its shape and classes."""
    import numpy as np
    import torch
    from PIL import Image

    class FakeImageSet(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __init__(
            self,
            root: Any = None,
            train: bool = True,
            transform: Any = None,
            target_transform: Any = None,
            download: bool = False,
            **kwargs: Any,
        ) -> None:
            split = kwargs.get("split", "train" if train else "test")
            self.train = bool(train) and split in ("train", "byclass", "balanced", "letters", "digits", "mnist")
            count = FAKE_TRAIN if self.train else FAKE_TEST
            rng = np.random.RandomState(0 if self.train else 1)
            pixels = rng.randint(0, 256, (count, height, width, channels), dtype=np.uint8)
            labels = rng.randint(0, classes, count)
            self.transform, self.target_transform, self.root = transform, target_transform, root
            self.classes = [str(i) for i in range(classes)]
            self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
            self.data: Any
            if layout == "tensor":
                self.data = torch.from_numpy(pixels[..., 0] if channels == 1 else pixels)
                self.targets: Any = torch.from_numpy(labels).long()
            elif layout == "array":
                self.data, self.targets = pixels, [int(x) for x in labels]
            else:
                self.data, self.labels = pixels.transpose(0, 3, 1, 2).copy(), labels.astype(np.int64)
            self._pixels, self._labels = pixels, labels

        # MNIST's legacy names
        train_data = test_data = property(lambda self: self.data)
        train_labels = test_labels = property(lambda self: self.targets)

        def __len__(self) -> int:
            return len(self._labels)

        def __getitem__(self, index: int) -> Tuple[Any, Any]:
            array = self._pixels[index]
            img = Image.fromarray(array[..., 0], mode="L") if channels == 1 else Image.fromarray(array, mode="RGB")
            target: Any = int(self._labels[index])
            if self.transform is not None:
                img = self.transform(img)
            if self.target_transform is not None:
                target = self.target_transform(target)
            return img, target

    FakeImageSet.__name__ = FakeImageSet.__qualname__ = name
    return FakeImageSet
