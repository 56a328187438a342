"""Run a script, or a notebook's code cells, as a user would: on the CPU, or on
a simulated accelerator, with no network. What the fix audit
(bench/fix_audit.py) and the runnable fix tests (tests/test_fix_causes.py)
use to see whether a fixed file still does what it did.

    python bench/sim_accel.py [--accel] [--out RESULT.json] PATH [ARGS...]

PATH is a `.py` script (run as `__main__`, in its folder, with `ARGS` as
`sys.argv[1:]`) or an `.ipynb` notebook (its code cells run in order through
IPython's `InteractiveShell.run_cell`, stopping at the first error, as "Run
All" does; shell escapes and non-Python cell magics do nothing). The result
(`--out`, else printed as the last line of stdout) is JSON:

    {"path", "kind": "script"|"notebook", "accel", "status": "ok"|"error",
     "error": {"type", "message", "cell", "line": the script's outermost
     line on the way to the failure} or null, "stdout" (scripts: not
     captured, see the process's own), "cells": [{"number", "status",
     "stdout", "display", "error"}] (notebooks: the repr of the value each
     cell displays, as IPython shows it, and what it printed)}

The run is made repeatable: Python's, NumPy's and torch's generators are
seeded (0) before the code runs, torch uses one thread, and sockets refuse
every address but the machine's own (so a run never waits on a download).
With `--fake-data`, torchvision's downloadable image sets (MNIST, CIFAR10,
SVHN...) are small synthetic sets of the same shapes and attributes, the
same in every run, so code that would stop at the download runs on.

**The simulated accelerator** (`--accel`, `install_accelerator()`): the code
sees a CUDA machine (`torch.cuda.is_available()` is True, one device, the
`torch.cuda` and `torch.accelerator` calls a script makes answer), and every
tensor or module sent to `"cuda"` (`.cuda()`, `.to(device)`, `device=`,
`map_location=`) lands on PyTorch's `meta` device instead: shapes and dtypes
without data. An operation that mixes a meta tensor with a CPU one raises as
CUDA would ("Tensor on device cpu is not on the expected device meta!"), and
so do host-only reads of a device tensor (`.numpy()`) and pinning one
(`pin_memory()` raises "cannot pin 'torch.cuda.FloatTensor' ..."). Values read
back to the host (`.item()`, `.tolist()`, `float(t)`, `.cpu()`) are zeros:
the run goes on, so device mismatches further down are found too, but its
numbers mean nothing; compare whether and where runs fail, not what they
print. Pinning a host tensor returns it unchanged. DataParallel runs its
module directly, and GradScaler is disabled (meta tensors have no inf checks).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import runpy
import socket
import sys
import traceback
import types
from pathlib import Path
from typing import Any, Dict, List, Optional

META = "meta"
_FAKE_NAME = "Simulated accelerator (meta tensors)"
_GIB = 1 << 30


# -- a machine without network, and repeatable runs ------------------------------------------


def isolate() -> None:
    """Refuse network connections (loopback and local sockets still work) and
    seed every generator the code may draw from."""
    original_connect = socket.socket.connect

    def connect(self, address):
        if self.family == getattr(socket, "AF_UNIX", None) or _local(address):
            return original_connect(self, address)
        raise OSError(f"network disabled in this run: {address!r}")

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = lambda self, address: 111  # type: ignore[method-assign]
    original_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if host in (None, "localhost", "127.0.0.1", "::1", "") or str(host).startswith("127."):
            return original_getaddrinfo(host, *args, **kwargs)
        raise socket.gaierror(f"network disabled in this run: {host!r}")

    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    import random

    random.seed(0)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(0)
    with contextlib.suppress(ImportError):
        import torch

        torch.manual_seed(0)
        torch.set_num_threads(1)


def _local(address) -> bool:
    host = address[0] if isinstance(address, tuple) and address else address
    return isinstance(host, str) and (host in ("localhost", "::1") or host.startswith("127."))


# -- the simulated accelerator ------------------------------------------------------------------


def _accel(device: Any) -> bool:
    """`device` names the (simulated) CUDA device: "cuda", "cuda:0", a cuda
    torch.device, or a device index."""
    import torch

    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":")[0].strip() == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


def _host(device: Any) -> bool:
    import torch

    if isinstance(device, torch.device):
        return device.type == "cpu"
    return isinstance(device, str) and device.split(":")[0].strip() == "cpu"


def _cuda_type(t) -> str:
    """The CUDA tensor type name a real device would report: torch.cuda.FloatTensor."""
    name = t.type() if not t.is_meta else "torch." + str(t.dtype).split(".")[-1]
    legacy = {
        "torch.float32": "torch.FloatTensor",
        "torch.float64": "torch.DoubleTensor",
        "torch.float16": "torch.HalfTensor",
        "torch.bfloat16": "torch.BFloat16Tensor",
        "torch.int64": "torch.LongTensor",
        "torch.int32": "torch.IntTensor",
        "torch.uint8": "torch.ByteTensor",
        "torch.bool": "torch.BoolTensor",
    }.get(name, name)
    return legacy.replace("torch.", "torch.cuda.", 1)


def _fake_scalar(t):
    """What `.item()` gives for a device tensor in the simulation: zero of its kind."""
    import torch

    if t.dtype == torch.bool:
        return False
    if t.is_floating_point():
        return 0.0
    if t.is_complex():
        return 0j
    return 0


def _host_copy(t, dtype=None):
    """A device tensor copied to the host in the simulation: zeros of its shape."""
    import torch

    return torch.zeros(t.shape, dtype=dtype or t.dtype)


def _map_devices(tree):
    """Tensors anywhere in nested lists, tuples and dicts, moved to the simulated device."""
    import torch

    if isinstance(tree, torch.Tensor):
        return tree.to(META)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map_devices(x) for x in tree)
    if isinstance(tree, dict):
        return {k: _map_devices(v) for k, v in tree.items()}
    return tree


def install_accelerator() -> None:
    """Make this process look like a machine with one CUDA device whose memory
    is PyTorch's meta device (see the module's docstring). Call it once, before
    the code under test runs."""
    import torch
    from torch.overrides import TorchFunctionMode

    T = torch.Tensor
    base = torch._C.TensorBase
    tensor_to, tensor_type, tensor_format = T.to, T.type, T.__format__

    def to(self, *args, **kwargs):
        args = list(args)
        target = kwargs.get("device")
        dtype = kwargs.get("dtype")
        if args and isinstance(args[0], torch.Tensor):
            target, dtype = args[0].device, args[0].dtype  # `.to(other)`: other's device and dtype
        elif args and not isinstance(args[0], torch.dtype):
            target = args[0]
            if _accel(args[0]):
                args[0] = META
        if "device" in kwargs and _accel(kwargs["device"]):
            kwargs["device"] = META
        if self.is_meta and target is not None and _host(target):
            dtype = dtype or next((a for a in args if isinstance(a, torch.dtype)), None)
            return _host_copy(self, dtype)  # read back to the host
        return tensor_to(self, *args, **kwargs)

    def cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        return tensor_to(self, META, non_blocking=non_blocking)

    def cpu(self, memory_format=torch.preserve_format):
        return _host_copy(self) if self.is_meta else base.cpu(self, memory_format=memory_format)

    def pin_memory(self, device=None):
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin '{_cuda_type(self)}' only dense CPU tensors can be pinned")
        return self  # pinned, as far as this machine can tell

    def item(self):
        return _fake_scalar(self) if self.is_meta else base.item(self)

    def tolist(self):
        return _host_copy(self).tolist() if self.is_meta else base.tolist(self)

    def numpy(self, *, force=False):
        if self.is_meta:
            raise TypeError(
                "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
            )
        return base.numpy(self, force=force)

    def type_(self, dtype=None, non_blocking=False, **kwargs):
        if isinstance(dtype, str) and dtype.startswith("torch.cuda."):
            return tensor_type(tensor_to(self, META), dtype.replace("torch.cuda.", "torch.", 1))
        if dtype is None and self.is_meta:
            return _cuda_type(self)
        return tensor_type(self, dtype, non_blocking, **kwargs)

    def fmt(self, spec):
        if self.is_meta and self.dim() == 0:
            return _fake_scalar(self).__format__(spec)
        return tensor_format(self, spec)

    def number(convert, name):
        native = getattr(base, name)

        def method(self):
            return convert(_fake_scalar(self)) if self.is_meta else native(self)

        return method

    T.to = to  # type: ignore[method-assign]
    T.cuda = cuda  # type: ignore[method-assign]
    T.cpu = cpu  # type: ignore[method-assign]
    T.pin_memory = pin_memory  # type: ignore[method-assign]
    T.is_pinned = lambda self, device=None: False  # type: ignore[method-assign]
    T.item = item  # type: ignore[method-assign]
    T.tolist = tolist  # type: ignore[method-assign]
    T.numpy = numpy  # type: ignore[method-assign]
    T.type = type_  # type: ignore[method-assign]
    T.__format__ = fmt  # type: ignore[method-assign]
    T.__float__ = number(float, "__float__")  # type: ignore[method-assign]
    T.__int__ = number(int, "__int__")  # type: ignore[method-assign]
    T.__bool__ = number(bool, "__bool__")  # type: ignore[method-assign]
    T.__index__ = number(int, "__index__")  # type: ignore[method-assign]
    T.is_cuda = property(lambda self: self.device.type in ("cuda", META))  # type: ignore[assignment]

    class SimulatedDevice(TorchFunctionMode):
        """`device="cuda"` anywhere (factories, `torch.tensor`, `*_like`) means meta."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if "device" in kwargs and _accel(kwargs["device"]):
                kwargs = dict(kwargs, device=META)
            return func(*args, **kwargs)

    SimulatedDevice().__enter__()  # for the rest of the process (torch function modes are per thread)

    _patch_cuda_api(torch)
    original_load = torch.load

    def load(*args, **kwargs):
        where = kwargs.get("map_location")
        if where is not None and _accel(where):
            kwargs["map_location"] = META
        return original_load(*args, **kwargs)

    torch.load = load
    grad_scaler_init = torch.amp.GradScaler.__init__

    def scaler_init(self, *args, **kwargs):
        grad_scaler_init(self, *args, **kwargs)
        self._enabled = False  # meta tensors have no values to check for infs

    torch.amp.GradScaler.__init__ = scaler_init  # type: ignore[method-assign]
    if hasattr(torch.cuda, "amp") and hasattr(torch.cuda.amp, "GradScaler"):
        cuda_scaler_init = torch.cuda.amp.GradScaler.__init__

        def cuda_scaler(self, *args, **kwargs):
            cuda_scaler_init(self, *args, **kwargs)
            self._enabled = False

        torch.cuda.amp.GradScaler.__init__ = cuda_scaler  # type: ignore[method-assign]

    def data_parallel_forward(self, *inputs, **kwargs):
        return self.module(*_map_devices(inputs), **_map_devices(kwargs))

    torch.nn.DataParallel.forward = data_parallel_forward  # type: ignore[method-assign]


def _patch_cuda_api(torch) -> None:
    """`torch.cuda` and `torch.accelerator` answer as one CUDA device would."""
    cuda = torch.cuda
    noop = lambda *a, **k: None  # noqa: E731
    props = types.SimpleNamespace(
        name=_FAKE_NAME, total_memory=80 * _GIB, major=8, minor=0, multi_processor_count=108, is_integrated=False
    )
    answers = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "is_initialized": lambda: True,
        "init": noop,
        "get_device_name": lambda *a, **k: _FAKE_NAME,
        "get_device_capability": lambda *a, **k: (8, 0),
        "get_device_properties": lambda *a, **k: props,
        "get_arch_list": lambda: ["sm_80"],
        "is_bf16_supported": lambda *a, **k: True,
        "synchronize": noop,
        "empty_cache": noop,
        "ipc_collect": noop,
        "set_device": noop,
        "manual_seed": noop,
        "manual_seed_all": noop,
        "seed": noop,
        "seed_all": noop,
        "set_per_process_memory_fraction": noop,
        "reset_peak_memory_stats": noop,
        "reset_max_memory_allocated": noop,
        "reset_max_memory_cached": noop,
        "reset_accumulated_memory_stats": noop,
        "memory_allocated": lambda *a, **k: 0,
        "max_memory_allocated": lambda *a, **k: 0,
        "memory_reserved": lambda *a, **k: 0,
        "max_memory_reserved": lambda *a, **k: 0,
        "memory_cached": lambda *a, **k: 0,
        "max_memory_cached": lambda *a, **k: 0,
        "mem_get_info": lambda *a, **k: (80 * _GIB, 80 * _GIB),
        "memory_summary": lambda *a, **k: "",
        "memory_stats": lambda *a, **k: {},
        "get_rng_state": lambda *a, **k: torch.get_rng_state(),
        "get_rng_state_all": lambda *a, **k: [torch.get_rng_state()],
        "set_rng_state": noop,
        "set_rng_state_all": noop,
        "utilization": lambda *a, **k: 0,
        "is_current_stream_capturing": lambda *a, **k: False,
    }
    for name, value in answers.items():
        setattr(cuda, name, _distinct(value))

    class Event:
        def __init__(self, *args, **kwargs):
            pass

        def record(self, *args, **kwargs):
            return None

        def synchronize(self):
            return None

        def wait(self, *args, **kwargs):
            return None

        def query(self):
            return True

        def elapsed_time(self, other):
            return 0.0

    class Stream:
        def __init__(self, *args, **kwargs):
            pass

        def synchronize(self):
            return None

        def wait_stream(self, *args, **kwargs):
            return None

        def wait_event(self, *args, **kwargs):
            return None

        def record_event(self, event=None):
            return event or Event()

        def query(self):
            return True

        def is_capturing(self):
            return False

    cuda.Event = Event
    cuda.Stream = Stream
    cuda.current_stream = lambda *a, **k: Stream()
    cuda.default_stream = lambda *a, **k: Stream()
    cuda.stream = lambda *a, **k: contextlib.nullcontext()
    cuda.device = lambda *a, **k: contextlib.nullcontext()
    for legacy, dtype in (
        ("FloatTensor", torch.float32),
        ("DoubleTensor", torch.float64),
        ("HalfTensor", torch.float16),
        ("LongTensor", torch.int64),
        ("IntTensor", torch.int32),
        ("ByteTensor", torch.uint8),
        ("BoolTensor", torch.bool),
    ):
        setattr(cuda, legacy, _legacy_constructor(torch, dtype))
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        for name, value in (
            ("is_available", lambda *a, **k: True),
            ("current_accelerator", lambda *a, **k: torch.device("cuda")),
            ("device_count", lambda *a, **k: 1),
            ("current_device_index", lambda *a, **k: 0),
            ("current_device_idx", lambda *a, **k: 0),
            ("set_device_index", noop),
            ("set_device_idx", noop),
            ("synchronize", noop),
            ("current_stream", lambda *a, **k: Stream()),
        ):
            setattr(accelerator, name, _distinct(value))


def _distinct(fn):
    """A function object of its own for each patched name: torch._dynamo's
    tables refuse one object under two names."""

    def patched(*args, **kwargs):
        return fn(*args, **kwargs)

    return patched


def _legacy_constructor(torch, dtype):
    """`torch.cuda.FloatTensor(...)`: a tensor of that type on the simulated device."""

    def make(*args, **kwargs):
        if len(args) == 1 and not isinstance(args[0], int):
            return torch.tensor(args[0], dtype=dtype, device=META)
        return torch.empty(*args, dtype=dtype, device=META)

    return make


# -- data that is not here -----------------------------------------------------------------------


def install_fake_data() -> bool:
    """Replace torchvision's downloadable image sets (MNIST, CIFAR10, ...) by
    small synthetic ones of the same shapes, classes and attributes (`data`,
    `targets`, `classes`, MNIST's `train_data`/`train_labels`...), the same in
    every run: code that would stop at the download runs on. False when
    torchvision is not installed. The sets are `torchlint run --fake-data`'s
    (torchlint/runtime/sandbox.py), installed for the rest of the process."""
    from torchlint.runtime.sandbox import Sandbox

    return Sandbox().fake_data()  # never restored: this process runs one file


# -- running code ---------------------------------------------------------------------------------

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_AUTOGRAD = re.compile(r",\s*(grad_fn=<\w+>|requires_grad=True)")


def normalize(text: str, root: Optional[str] = None) -> str:
    """Output with what differs between two runs of the same code, or between
    a computation and the same one under `no_grad`, blanked: object addresses,
    the folder the code ran in, and a tensor's autograd bookkeeping
    (`grad_fn=<AddBackward0>`, `requires_grad=True`) in its repr."""
    if root:
        text = text.replace(root, "<root>")
    return _AUTOGRAD.sub("", _ADDRESS.sub("0x?", text))


def _error(exc: BaseException, cell: Optional[int] = None) -> Dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "cell": cell}


def run_script(path: Path, argv: List[str]) -> Dict[str, Any]:
    result: Dict[str, Any] = {"path": str(path), "kind": "script", "status": "ok", "error": None}
    sys.argv = [str(path), *argv]
    sys.path.insert(0, str(path.parent))
    os.chdir(path.parent)
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            result["status"] = "error"
            result["error"] = {"type": "SystemExit", "message": str(exc.code)[:2000], "cell": None}
    except BaseException as exc:  # the code's own failure is the result
        traceback.print_exc()
        result["status"] = "error"
        result["error"] = _error(exc)
        # Where the script failed: its outermost statement on the way (a module-level line).
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        if frames:
            result["error"]["line"] = frames[0].lineno
    return result


# Cell magics whose body is not Python: such a cell does nothing here (torchlint.source.notebook's list).
def _skipped_cell(source: str) -> bool:
    from torchlint.source.notebook import PYTHON_CELL_MAGICS, cell_magic

    first = next((line for line in source.splitlines() if line.strip()), "")
    magic = cell_magic(first)
    return magic is not None and magic not in PYTHON_CELL_MAGICS


def run_notebook(path: Path) -> Dict[str, Any]:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    nb = json.loads(path.read_text(encoding="utf-8-sig"))
    os.chdir(path.parent)
    sys.path.insert(0, str(path.parent))
    sys.argv = [str(path)]
    shell = InteractiveShell.instance(colors="nocolor")
    shell.system = lambda *a, **k: None  # `!pip install ...`, `%pip`: nothing runs
    shell.getoutput = lambda *a, **k: []
    shell.enable_gui = lambda *a, **k: None  # `%matplotlib inline` outside a kernel
    cells: List[Dict[str, Any]] = []
    result: Dict[str, Any] = {"path": str(path), "kind": "notebook", "status": "ok", "error": None, "cells": cells}
    for number, cell in enumerate(nb.get("cells", []), 1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        entry: Dict[str, Any] = {"number": number, "status": "ok", "stdout": "", "display": None, "error": None}
        cells.append(entry)
        if _skipped_cell(source):
            entry["status"] = "skipped"
            continue
        with capture_output() as captured:
            outcome = shell.run_cell(source, store_history=True)
        entry["stdout"] = captured.stdout
        if outcome.result is not None:
            entry["display"] = repr(outcome.result)
        failure = outcome.error_before_exec or outcome.error_in_exec
        if failure is not None:
            entry["status"] = "error"
            entry["error"] = _error(failure, number)
            result["status"] = "error"
            result["error"] = entry["error"]
            break
    return result


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--accel", action="store_true", help="run on the simulated accelerator")
    ap.add_argument("--out", type=Path, help="write the result JSON here (else: the last line of stdout)")
    ap.add_argument(
        "--fake-data", action="store_true", help="torchvision's downloadable image sets give synthetic images"
    )
    ap.add_argument("path", type=Path)
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    args = ap.parse_args(argv)
    path = args.path.resolve()
    out = args.out.resolve() if args.out else None
    os.environ.setdefault("MPLBACKEND", "Agg")
    isolate()
    if args.fake_data:
        install_fake_data()
    if args.accel:
        install_accelerator()
    if path.suffix == ".ipynb":
        result = run_notebook(path)
    else:
        result = run_script(path, args.args)
    result["accel"] = args.accel
    text = json.dumps(result)
    if out is not None:
        out.write_text(text)
    else:
        sys.stdout.flush()
        print("\n" + text)
    return 0


if __name__ == "__main__":
    # Run as a file: the project's modules (torchlint, for notebook cell magics) instead of
    # bench/'s, which could shadow the modules of the code under test.
    sys.path[0] = str(Path(__file__).resolve().parents[1])
    sys.exit(main())
