"""The torch function mode that carries the device mark through every operation.

Under a `TorchFunctionMode`, torch 2.13 hands this mode every torch function
and every Tensor method, property getter and dunder called outside the mode
itself (checked in tests/test_runtime_mode.py): `item`, `tolist`, `numpy`,
`__bool__`, `__float__`, `__int__`, `__index__`, `__format__`, `__repr__`,
`__array__`, `__contains__`, `.device`, `.grad`, `.data`, factories with no
tensor argument. While a call is being handled, the mode is off, so the
operations a torch function makes inside are not seen again.

For each call:
- a `device=` naming the accelerator is replaced by the CPU and the result is
  marked (`torch.zeros(3, device="cuda")`, `x.new_zeros(..., device=d)`);
- moves (`.to`, `.cuda`, `.cpu`, `.type`, `.type_as`) copy: a tensor sent to
  the device is a marked copy (a clone, which keeps autograd), never the
  tensor itself; one already there is returned as it is, as on a GPU; one
  read back is an unmarked copy (and a host read of a device value);
- any other call's tensor results are marked when one of its tensor
  arguments is, after checking that no other argument is a CPU tensor with
  dimensions (a CPU scalar mixes with device tensors on a GPU; anything
  else raises there: a device mismatch, reported and run on);
- reads of a marked value on the host (`.item()`, `.tolist()`, `float()`,
  `bool()`, `print`, f-strings, `.numpy()`) are reported;
- `.device` of a marked tensor answers `cuda:0`, `.is_cuda` True, and its
  `.grad` (made by the autograd engine, which the mode does not see) is
  marked when read.

Results of a call are marked only when they are new objects: an in-place
call (`x.add_(y)`, `out=`) keeps its tensor's own mark.
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Protocol, Tuple

import torch
from torch.overrides import TorchFunctionMode

from torchlint.runtime.accelerator import (
    ACCEL,
    BATCH,
    CPU,
    CUDA0,
    FRESH,
    KEY,
    ORIGIN,
    USAGE,
    is_accel,
    marked,
    set_tag,
    tag,
)
from torchlint.runtime.sites import Key, UserFiles

Tensor = torch.Tensor


class Observer(Protocol):
    """What the mode reports (observers.Recorder)."""

    files: UserFiles

    def mismatch(self, func: Any, cpu: torch.Tensor) -> None: ...

    def host_read(
        self, kind: str, tensor: torch.Tensor, crash: bool = False, waited: Optional[float] = None
    ) -> None: ...

    def uploaded(self, source: torch.Tensor, copy: torch.Tensor) -> None: ...


# Frames of torch's own dispatch between a Python-level Tensor method and the mode.
_DISPATCH_FILES = frozenset({torch.overrides.__file__, sys.modules["torch._tensor"].__file__})
_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def caller() -> Optional[FrameType]:
    """The frame that made the call the mode is handling: past this package's
    frames and torch's dispatch frames (`Tensor.__repr__` -> handle_torch_function)."""
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename in _DISPATCH_FILES or frame.f_code.co_filename.startswith(_RUNTIME_DIR)
    ):
        frame = frame.f_back
    return frame


def _origin(files: UserFiles) -> Optional[Key]:
    frame = caller()
    if frame is not None and files.place(frame.f_code.co_filename) is not None:
        return (frame.f_code, frame.f_lasti)
    return None


def _allocating_factories() -> FrozenSet[Any]:
    """The torch functions that allocate a fresh tensor (knowledge.py's table)."""
    from torchlint.analysis.knowledge import Effect, doing

    found = set()
    for name in doing(Effect.ALLOCATES):
        obj: Any = torch
        for part in name.split(".")[1:]:
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            found.add(obj)
    return frozenset(found)


def _data_constructors() -> FrozenSet[Any]:
    from torchlint.analysis.knowledge import Effect, doing

    return frozenset(
        getattr(torch, name.split(".", 1)[1]) for name in doing(Effect.FROM_HOST_DATA) if name.count(".") == 1
    )


_FACTORIES = _allocating_factories()
_DATA = _data_constructors() - _FACTORIES
# `*_like` of a CPU tensor is a fresh allocation on the CPU too.
_LIKE = frozenset(
    getattr(torch, n)
    for n in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like")
    if hasattr(torch, n)
)


def _mark_results(out: Any, bits: int, inputs: List[torch.Tensor]) -> None:
    if isinstance(out, Tensor):
        if not any(out is a for a in inputs):
            set_tag(out, tag(out) | bits)
    elif isinstance(out, (tuple, list)):
        for o in out:
            if isinstance(o, Tensor) and not any(o is a for a in inputs):
                set_tag(o, tag(o) | bits)


def _non_scalar(t: torch.Tensor) -> bool:
    return t.dim() > 0


Handler = Callable[[Observer, Any, Tuple[Any, ...], Dict[str, Any]], Any]


class Simulator(TorchFunctionMode):
    """The mode (see the module's docstring)."""

    def __init__(self, observer: Observer) -> None:
        super().__init__()
        self.observer = observer

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
            return special(self.observer, func, args, kwargs)
        device = kwargs.get("device")
        to_device = device is not None and is_accel(device)
        if to_device:
            kwargs = dict(kwargs, device=CPU)
            USAGE.used = True
        inputs: List[torch.Tensor] = []
        for a in args:
            if isinstance(a, Tensor):
                inputs.append(a)
            elif isinstance(a, (list, tuple)):
                inputs.extend(x for x in a if isinstance(x, Tensor))
        if kwargs:
            for v in kwargs.values():
                if isinstance(v, Tensor):
                    inputs.append(v)
                elif isinstance(v, (list, tuple)):
                    inputs.extend(x for x in v if isinstance(x, Tensor))
        if not inputs:
            out = func(*args, **kwargs)
            if to_device:
                _mark_results(out, ACCEL, inputs)
            elif func in _FACTORIES:
                _fresh(out, _origin(self.observer.files))
            elif func in _DATA:
                where = _origin(self.observer.files)
                if where is not None and isinstance(out, Tensor):
                    setattr(out, ORIGIN, where)
            return out
        any_bits, all_bits = 0, -1
        for a in inputs:
            bits = getattr(a, KEY, 0)
            any_bits |= bits
            all_bits &= bits
        if any_bits & ACCEL and not all_bits & ACCEL and func not in _CROSS_DEVICE:
            for a in inputs:
                if not getattr(a, KEY, 0) & ACCEL and _non_scalar(a):
                    self.observer.mismatch(func, a)
                    break
        out = func(*args, **kwargs)
        if to_device or any_bits & ACCEL:
            _mark_results(out, ACCEL, inputs)
        elif any_bits & BATCH:
            _mark_results(out, BATCH, inputs)
        elif func in _LIKE or all_bits & FRESH:
            where = getattr(inputs[0], ORIGIN, None) if all_bits & FRESH else _origin(self.observer.files)
            if isinstance(out, Tensor) and not any(out is a for a in inputs):
                _fresh(out, where)
        return out


def _fresh(out: Any, where: Optional[Key]) -> None:
    if isinstance(out, Tensor):
        set_tag(out, tag(out) | FRESH)
        if where is not None:
            try:
                setattr(out, ORIGIN, where)
            except (AttributeError, TypeError):
                pass


# -- the calls handled on their own --------------------------------------------------------------------

_parse_to = torch._C._nn._parse_to


def _move(observer: Observer, self: torch.Tensor, to_device: bool, call: Callable[[], Any]) -> Any:
    """A copy of `self` on the device (or back on the host); `call` makes it on the CPU."""
    if to_device:
        out = call()
        if marked(self):  # already there: as on a GPU, `.to` returns the tensor itself
            if out is not self:
                set_tag(out, tag(out) | ACCEL)
            return out
        if out is self:
            out = self.clone()
        set_tag(out, ACCEL)
        USAGE.used = True
        observer.uploaded(self, out)
        return out
    if not marked(self):
        return call()
    observer.host_read("cpu", self)
    out = call()
    if out is self:
        out = self.clone()
    set_tag(out, 0)
    return out


def _to(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    self, rest = args[0], args[1:]
    if rest and isinstance(rest[0], Tensor):  # `.to(other)`: other's device and dtype
        other = rest[0]
        return _move(observer, self, marked(other), lambda: func(self, other.dtype, *rest[1:], **kwargs))
    device, dtype, non_blocking, memory_format = _parse_to(*rest, **kwargs)
    if device is None or not (is_accel(device) or device.type == "cpu"):
        return _plain(observer, func, args, kwargs)
    plain: Dict[str, Any] = {"non_blocking": non_blocking, "copy": bool(kwargs.get("copy", False))}
    if memory_format is not None:
        plain["memory_format"] = memory_format
    if dtype is not None:
        return _move(observer, self, is_accel(device), lambda: func(self, dtype=dtype, **plain))
    return _move(observer, self, is_accel(device), lambda: func(self, CPU, **plain))


def _plain(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """A call that stays where its tensor is: the result marked as the tensor is."""
    out = func(*args, **kwargs)
    self = args[0]
    if marked(self):
        _mark_results(out, ACCEL, [self])
    return out


def _cuda(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    self = args[0]
    return _move(observer, self, True, lambda: self)


def _cpu(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    self = args[0]
    return _move(observer, self, False, lambda: self)


_LEGACY_NAMES = {
    torch.float32: "FloatTensor",
    torch.float64: "DoubleTensor",
    torch.float16: "HalfTensor",
    torch.bfloat16: "BFloat16Tensor",
    torch.int64: "LongTensor",
    torch.int32: "IntTensor",
    torch.int16: "ShortTensor",
    torch.int8: "CharTensor",
    torch.uint8: "ByteTensor",
    torch.bool: "BoolTensor",
}


def _type(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    self = args[0]
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    if dtype is None:
        if marked(self):
            return "torch.cuda." + _LEGACY_NAMES.get(self.dtype, "FloatTensor")
        return func(*args, **kwargs)
    legacy = getattr(dtype, "legacy_dtype", None)  # `t.type(torch.cuda.FloatTensor)` (accelerator._LegacyType)
    if isinstance(legacy, torch.dtype):
        return _move(observer, self, True, lambda: func(self, legacy))
    if isinstance(dtype, str):
        on_device = dtype.startswith("torch.cuda.")
        host_name = dtype.replace("torch.cuda.", "torch.", 1)
        if on_device != marked(self):
            return _move(observer, self, on_device, lambda: func(self, host_name))
        out = func(self, host_name)
        if marked(self) and out is not self:
            set_tag(out, tag(out) | ACCEL)
        return out
    return _plain(observer, func, args, kwargs)


def _type_as(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    self, other = args[0], args[1]
    if marked(self) != marked(other):
        return _move(observer, self, marked(other), lambda: func(self, other))
    return _plain(observer, func, args, kwargs)


def _host_read(kind: str, crash: bool = False) -> Handler:
    def handle(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        self = args[0]
        if isinstance(self, Tensor) and marked(self):
            observer.host_read(kind, self, crash)
        return func(*args, **kwargs)

    return handle


def _device(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    return CUDA0 if marked(args[0]) else func(*args, **kwargs)


def _is_cuda(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    return True if marked(args[0]) else func(*args, **kwargs)


def _is_cpu(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    return False if marked(args[0]) else func(*args, **kwargs)


def _get_device(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    return 0 if marked(args[0]) else func(*args, **kwargs)


def _grad(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    out = func(*args, **kwargs)
    if out is not None and marked(args[0]) and not marked(out):
        set_tag(out, tag(out) | ACCEL)
    return out


def _iter(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    self = args[0]
    if not marked(self):
        return func(*args, **kwargs)
    parts = self.unbind(0)
    for t in parts:
        set_tag(t, ACCEL)
    return iter(parts)


def _getitem(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """`x[i]`: a device tensor may be indexed with CPU indices; a CPU tensor
    with device indices raises on a GPU."""
    self = args[0]
    if not marked(self) and self.dim() > 0:
        index = args[1] if len(args) > 1 else None
        parts = index if isinstance(index, tuple) else (index,)
        device_index = next((p for p in parts if isinstance(p, Tensor) and marked(p) and p.dim() > 0), None)
        if device_index is not None:
            observer.mismatch(func, self)
    return _plain(observer, func, args, kwargs)


def _no_check(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """Calls that may mix devices on a GPU (copies, in-place stores, shape-only
    arguments): no mismatch; the result is where its tensor is."""
    return _plain(observer, func, args, kwargs)


def _keep(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    return func(*args, **kwargs)


def _descriptor(name: str) -> Any:
    return next(vars(k)[name] for k in Tensor.__mro__ if name in vars(k))


def _getter(name: str) -> Any:
    """What the mode is handed when a tensor property is read: its descriptor's `__get__`."""
    return _descriptor(name).__get__


def _set_data(observer: Observer, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """`p.data = t`: `p` is now where `t` is (a manual move, allowed on a GPU)."""
    out = func(*args, **kwargs)
    self, value = args[0], args[1]
    if isinstance(value, Tensor):
        bits = tag(self)
        set_tag(self, bits | ACCEL if marked(value) else bits & ~ACCEL)
    return out


def _special() -> Dict[Any, Handler]:
    T = Tensor
    table: Dict[Any, Handler] = {
        T.to: _to,
        T.cuda: _cuda,
        T.cpu: _cpu,
        T.type: _type,
        T.type_as: _type_as,
        T.item: _host_read("item"),
        T.tolist: _host_read("tolist"),
        T.numpy: _host_read("numpy", crash=True),
        T.__array__: _host_read("numpy", crash=True),
        T.__bool__: _host_read("bool"),
        T.__float__: _host_read("float"),
        T.__int__: _host_read("int"),
        T.__index__: _host_read("index"),
        T.__complex__: _host_read("complex"),
        T.__format__: _host_read("format"),
        T.__repr__: _host_read("repr"),
        T.__contains__: _host_read("contains"),
        _getter("device"): _device,
        _getter("is_cuda"): _is_cuda,
        _getter("is_cpu"): _is_cpu,
        T.get_device: _get_device,
        _getter("grad"): _grad,
        _descriptor("data").__set__: _set_data,
        T.__iter__: _iter,
        T.__getitem__: _getitem,
        T.__setitem__: _keep,
        T.copy_: _keep,
        T.set_: _keep,
        T.__reduce_ex__: _keep,
        T.__setstate__: _keep,
    }
    for name in ("new_tensor", "new_zeros", "new_ones", "new_empty", "new_full", "expand_as", "view_as", "reshape_as"):
        table[getattr(T, name)] = _no_check
    return table


_SPECIAL = _special()
# Torch functions that accept CPU tensors beside device ones on a GPU
# (lengths of packed sequences and of the CTC loss).
_CROSS_DEVICE = frozenset(
    f
    for f in (
        getattr(torch._C._VariableFunctions, "_pack_padded_sequence", None),
        getattr(torch.nn.functional, "ctc_loss", None),
        getattr(torch, "ctc_loss", None),
    )
    if f is not None
)
