"""The torch function mode of a run on a real GPU (`--device cuda`): it simulates nothing
and changes no result, it watches what mode.py watches on the simulated device, with the
tensors' own devices:

- host reads of a device value (`.item()`, `.tolist()`, `.cpu()`, `float()`, `bool()`,
  `print`, f-strings, `in`) are reported (TL401) with the host's wait: the device is
  drained between two clock readings first (timing.py says why), then the read runs;
  `.numpy()` of a device tensor is reported as the crash it is, and raises;
- copies of a host tensor to the device (`.to`, `.cuda`, `.type`, `.type_as`) are told
  to the observer (TL104, TL106, a DataLoader batch moved: TL303);
- a call that raises with tensors of the device and of the host among its arguments is
  the device mismatch (TL101-TL103): reported at the user's line, and the error goes on
  up (a real GPU run ends there);
- tensors the user's code makes on the host (factories, data) keep where they were made,
  and results computed on the host from a DataLoader batch stay known as batches, so
  that a mismatch is told as precisely as on the simulated device.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from torchlint.runtime.accelerator import BATCH, FRESH, KEY, ORIGIN, set_tag, tag
from torchlint.runtime.mode import _DATA, _FACTORIES, _LIKE, Observer, _fresh, _origin
from torchlint.runtime.timing import Timer

Tensor = torch.Tensor
OnDevice = Callable[[Tensor], bool]
_parse_to = torch._C._nn._parse_to


def on_device_of(device_type: str) -> OnDevice:
    """Whether a tensor is on a device of this type."""
    if device_type == "cuda":
        return lambda t: bool(t.is_cuda)
    return lambda t: bool(t.device.type == device_type)


class Watcher(TorchFunctionMode):
    """The mode (see the module's docstring)."""

    def __init__(self, observer: Observer, timer: Timer, on_device: OnDevice) -> None:
        super().__init__()
        self.observer = observer
        self.timer = timer
        self.on_device = on_device

    def __torch_function__(
        self, func: Any, types: Any, args: Tuple[Any, ...] = (), kwargs: Optional[Dict[str, Any]] = None
    ) -> Any:
        if kwargs is None:
            kwargs = {}
        try:
            special = _SPECIAL.get(func)
        except TypeError:  # an unhashable callable: nothing of ours
            return func(*args, **kwargs)
        if special is not None:
            return special(self, func, args, kwargs)
        inputs = _tensors(args, kwargs)
        if not inputs:
            out = func(*args, **kwargs)
            if isinstance(out, Tensor) and not self.on_device(out):
                if func in _FACTORIES:
                    _fresh(out, _origin(self.observer.files))
                elif func in _DATA:
                    where = _origin(self.observer.files)
                    if where is not None:
                        setattr(out, ORIGIN, where)
            return out
        try:
            out = func(*args, **kwargs)
        except RuntimeError:
            host = self._host_beside_device(inputs)
            if host is not None:
                self.observer.mismatch(func, host)
            raise
        any_bits, all_bits = 0, -1
        for a in inputs:
            bits = getattr(a, KEY, 0)
            any_bits |= bits
            all_bits &= bits
        if any_bits & BATCH:
            self._mark_host(out, BATCH, inputs)
        elif func in _LIKE or all_bits & FRESH:
            if isinstance(out, Tensor) and not any(out is a for a in inputs) and not self.on_device(out):
                where = getattr(inputs[0], ORIGIN, None) if all_bits & FRESH else _origin(self.observer.files)
                _fresh(out, where)
        return out

    def _host_beside_device(self, inputs: List[Tensor]) -> Optional[Tensor]:
        """A host tensor with dimensions among arguments that also hold a device tensor."""
        if not any(self.on_device(a) for a in inputs):
            return None
        return next((a for a in inputs if not self.on_device(a) and a.dim() > 0), None)

    def _mark_host(self, out: Any, bits: int, inputs: List[Tensor]) -> None:
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, Tensor) and not any(o is a for a in inputs) and not self.on_device(o):
                set_tag(o, tag(o) | bits)


def _tensors(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> List[Tensor]:
    found: List[Tensor] = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(x for x in value if isinstance(x, Tensor))
    return found


Handler = Callable[[Watcher, Any, Tuple[Any, ...], Dict[str, Any]], Any]


def _read(kind: str) -> Handler:
    def handle(w: Watcher, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        self = args[0]
        if isinstance(self, Tensor) and w.on_device(self):
            w.observer.host_read(kind, self, waited=w.timer.waited())
        return func(*args, **kwargs)

    return handle


def _numpy(w: Watcher, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    self = args[0]
    if isinstance(self, Tensor) and w.on_device(self):
        w.observer.host_read("numpy", self, crash=True)
    return func(*args, **kwargs)


def _to_host(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """Whether a move call copies its tensor to the host."""
    rest = args[1:]
    if func is Tensor.cpu:
        return True
    if func is Tensor.type_as:
        return bool(rest) and isinstance(rest[0], Tensor) and rest[0].device.type == "cpu"
    if func is Tensor.type:
        target = rest[0] if rest else kwargs.get("dtype")
        return isinstance(target, str) and not target.startswith("torch.cuda.")
    if rest and isinstance(rest[0], Tensor):  # `.to(other)`
        return bool(rest[0].device.type == "cpu")
    try:
        device = _parse_to(*rest, **kwargs)[0]
    except (TypeError, RuntimeError, ValueError):
        return False
    return device is not None and device.type == "cpu"


def _move(w: Watcher, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    self = args[0]
    if not isinstance(self, Tensor):
        return func(*args, **kwargs)
    if w.on_device(self):
        if _to_host(func, args, kwargs):
            w.observer.host_read("cpu", self, waited=w.timer.waited())
        return func(*args, **kwargs)
    out = func(*args, **kwargs)
    if isinstance(out, Tensor) and out is not self and w.on_device(out):
        w.observer.uploaded(self, out)
    return out


def _special() -> Dict[Any, Handler]:
    T = Tensor
    table: Dict[Any, Handler] = {T.to: _move, T.cuda: _move, T.cpu: _move, T.type: _move, T.type_as: _move}
    table[T.numpy] = table[T.__array__] = _numpy
    for kind, method in (
        ("item", T.item),
        ("tolist", T.tolist),
        ("bool", T.__bool__),
        ("float", T.__float__),
        ("int", T.__int__),
        ("index", T.__index__),
        ("complex", T.__complex__),
        ("format", T.__format__),
        ("repr", T.__repr__),
        ("contains", T.__contains__),
    ):
        table[method] = _read(kind)
    return table


_SPECIAL = _special()
