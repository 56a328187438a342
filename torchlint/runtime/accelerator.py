"""The simulated accelerator: one CUDA device whose memory is the CPU's.

A tensor "on the device" is a real CPU tensor carrying a mark (`ACCEL` in its
tag, an int kept in the tensor's `__dict__`, left out of pickles), so every
value the script computes is real. The torch function mode (mode.py) carries
the mark through every operation; this module holds the marks and patches
what the mode does not see:

- `torch.cuda` and `torch.accelerator` answer as one CUDA device would
  (available, one device, its name and properties, memory figures of 0,
  seeds, streams and events that do nothing);
- `nn.Module.to/.cuda/.cpu/.to_empty` move a module in place: its
  parameters, buffers and gradients are marked (or unmarked), and the module
  remembers it is on the device; `nn.Parameter(marked)` is marked;
- `torch.load(map_location=...)` to the device marks what it loads, and
  tensors saved from a CUDA device load marked when no `map_location` is given;
- `Tensor.pin_memory`/`is_pinned` (also in the DataLoader's pinning thread,
  where the mode is not active) pin nothing and remember;
- `torch.compile` returns what it is given (recorded: TL404),
  `nn.DataParallel` runs its module on the device (TL601), `GradScaler`
  is disabled, the legacy autograd profiler is recorded (TL501),
  `torch.cuda.synchronize/empty_cache` and `torch.save` are recorded (TL403);
- the legacy `torch.cuda.FloatTensor(...)` constructors make marked tensors;
- `torch.distributed` makes Gloo process groups where NCCL is asked for (distributed.py).

Everything is undone by `Patches.restore()`.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Dict, Iterable, Iterator, List, Protocol, Set, Tuple

import torch

from torchlint.runtime.distributed import patch as patch_distributed

# -- marks -------------------------------------------------------------------------------------------

KEY = "_torchlint_"  # the tag bits
ORIGIN = "_torchlint_origin_"  # where a tensor was made by the user's code: (code, offset)
MOVED = "_torchlint_moved_"  # a host tensor copied to the device: its version then
MODEL_NAME = "_torchlint_model_"  # the output of a model on the CPU: the model's class
# ACCEL: on the device; BATCH: a DataLoader batch or computed from one on the CPU (YIELDED: as the
# loader yielded it); FRESH: freshly allocated on the CPU; PINNED: pinned; MODEL_OUT: the output of a
# model on the CPU (its construction site in ORIGIN).
ACCEL, BATCH, FRESH, PINNED, YIELDED, MODEL_OUT = 1, 2, 4, 8, 16, 32
_OWN_KEYS = (KEY, ORIGIN, MOVED, MODEL_NAME)

CUDA0 = torch.device("cuda", 0)
CPU = torch.device("cpu")
FAKE_NAME = "Simulated GPU (torchlint run)"
_GIB = 1 << 30


def tag(t: object) -> int:
    bits: int = getattr(t, KEY, 0)
    return bits


def set_tag(t: object, bits: int) -> None:
    try:
        setattr(t, KEY, bits)
    except (AttributeError, TypeError):  # a tensor type without a __dict__
        pass


class Usage:
    """Whether anything was sent to the simulated device (reset per run)."""

    used = False


USAGE = Usage()


def mark(t: torch.Tensor) -> torch.Tensor:
    set_tag(t, tag(t) | ACCEL)
    USAGE.used = True
    return t


def unmark(t: torch.Tensor) -> torch.Tensor:
    bits = tag(t)
    if bits & ACCEL:
        set_tag(t, bits & ~ACCEL)
    return t


def marked(t: object) -> bool:
    return bool(tag(t) & ACCEL)


def is_accel(device: object) -> bool:
    """`device` names the (simulated) CUDA device: "cuda", "cuda:0", a cuda
    torch.device, or a device index."""
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":")[0].strip() == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


def is_host(device: object) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cpu"
    return isinstance(device, str) and device.split(":")[0].strip() == "cpu"


def tensors_in(tree: object, depth: int = 3) -> Iterator[torch.Tensor]:
    """Tensors in nested lists, tuples, dicts (a batch, a model's output)."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif depth <= 0:
        return
    elif isinstance(tree, (list, tuple)):
        for item in tree:
            yield from tensors_in(item, depth - 1)
    elif isinstance(tree, dict) or (hasattr(tree, "items") and hasattr(tree, "keys")):
        try:
            values = list(tree.values())  # type: ignore[attr-defined]
        except Exception:
            return
        for item in values:
            yield from tensors_in(item, depth - 1)


# -- what the patches report -----------------------------------------------------------------------


class Events(Protocol):
    """What the patched calls tell the observers (observers.Recorder)."""

    def module_moved(self, module: torch.nn.Module, already: bool) -> None: ...

    def device_call(self, code: str, what: str) -> None: ...

    def compiled(self) -> None: ...

    def data_parallel(self) -> None: ...

    def legacy_profiler(self) -> None: ...

    def module_built(self, module: torch.nn.Module) -> None: ...


# -- patching, undone at the end -----------------------------------------------------------------

_MISSING = object()


class Patches:
    """setattr with an undo list."""

    def __init__(self) -> None:
        self._undo: List[Tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        if isinstance(owner, type):
            old = owner.__dict__.get(name, _MISSING)
        else:
            old = getattr(owner, name, _MISSING)
        setattr(owner, name, value)
        self._undo.append((owner, name, old))

    def original(self, owner: Any, name: str) -> Any:
        """What `owner.name` was before this run patched it."""
        for o, n, old in self._undo:
            if o is owner and n == name:
                return old
        return getattr(owner, name)

    def restore(self) -> None:
        while self._undo:
            owner, name, old = self._undo.pop()
            if old is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, old)


def _distinct(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A function object of its own for each patched name: torch._dynamo's
    tables refuse one object under two names."""

    def patched(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return patched


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


# -- torch.cuda, torch.accelerator -----------------------------------------------------------------


class _Event:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, *args: Any, **kwargs: Any) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def wait(self, *args: Any, **kwargs: Any) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, other: Any) -> float:
        return 0.0


class _Stream:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.device = CUDA0

    def synchronize(self) -> None:
        return None

    def wait_stream(self, *args: Any, **kwargs: Any) -> None:
        return None

    def wait_event(self, *args: Any, **kwargs: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> Any:
        return event or _Event()

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        return False

    def __enter__(self) -> "_Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _patch_device_api(p: Patches, events: Events) -> None:
    cuda = torch.cuda
    props = types.SimpleNamespace(
        name=FAKE_NAME,
        total_memory=80 * _GIB,
        major=8,
        minor=0,
        multi_processor_count=108,
        is_integrated=False,
        is_multi_gpu_board=False,
        uuid="GPU-00000000-0000-0000-0000-000000000000",
    )

    def synchronize(*args: Any, **kwargs: Any) -> None:
        events.device_call("TL403", "torch.cuda.synchronize()")

    def empty_cache(*args: Any, **kwargs: Any) -> None:
        events.device_call("TL403", "torch.cuda.empty_cache()")

    answers: Dict[str, Callable[..., Any]] = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "is_initialized": lambda: True,
        "init": _noop,
        "get_device_name": lambda *a, **k: FAKE_NAME,
        "get_device_capability": lambda *a, **k: (8, 0),
        "get_device_properties": lambda *a, **k: props,
        "get_arch_list": lambda: ["sm_80"],
        "is_bf16_supported": lambda *a, **k: True,
        "synchronize": synchronize,
        "empty_cache": empty_cache,
        "ipc_collect": _noop,
        "set_device": _noop,
        "manual_seed": _noop,
        "manual_seed_all": _noop,
        "seed": _noop,
        "seed_all": _noop,
        "initial_seed": lambda: 0,
        "set_per_process_memory_fraction": _noop,
        "reset_peak_memory_stats": _noop,
        "reset_max_memory_allocated": _noop,
        "reset_max_memory_cached": _noop,
        "reset_accumulated_memory_stats": _noop,
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
        "set_rng_state": _noop,
        "set_rng_state_all": _noop,
        "utilization": lambda *a, **k: 0,
        "is_current_stream_capturing": lambda *a, **k: False,
        "current_stream": lambda *a, **k: _Stream(),
        "default_stream": lambda *a, **k: _Stream(),
        "stream": lambda *a, **k: contextlib.nullcontext(),
        "device": lambda *a, **k: contextlib.nullcontext(),
    }
    for name, value in answers.items():
        p.set(cuda, name, _distinct(value))
    p.set(cuda, "Event", _Event)
    p.set(cuda, "Stream", _Stream)
    for legacy, dtype in (
        ("FloatTensor", torch.float32),
        ("DoubleTensor", torch.float64),
        ("HalfTensor", torch.float16),
        ("BFloat16Tensor", torch.bfloat16),
        ("LongTensor", torch.int64),
        ("IntTensor", torch.int32),
        ("ByteTensor", torch.uint8),
        ("BoolTensor", torch.bool),
    ):
        p.set(cuda, legacy, _legacy_constructor(legacy, dtype))
    nvtx = getattr(cuda, "nvtx", None)
    if nvtx is not None:
        for name in ("range_push", "range_pop", "mark", "range_start", "range_end"):
            if hasattr(nvtx, name):
                p.set(nvtx, name, _distinct(_noop))
        p.set(nvtx, "range", lambda *a, **k: contextlib.nullcontext())
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        for name, value in (
            ("is_available", lambda *a, **k: True),
            ("current_accelerator", lambda *a, **k: torch.device("cuda")),
            ("device_count", lambda *a, **k: 1),
            ("current_device_index", lambda *a, **k: 0),
            ("current_device_idx", lambda *a, **k: 0),
            ("set_device_index", _noop),
            ("set_device_idx", _noop),
            ("synchronize", synchronize),
            ("current_stream", lambda *a, **k: _Stream()),
            ("empty_cache", empty_cache),
        ):
            if hasattr(accelerator, name):
                p.set(accelerator, name, _distinct(value))


class _LegacyType(type):
    """The metaclass of `torch.cuda.FloatTensor` and friends: calling one makes
    a marked tensor of its dtype; `isinstance(t, torch.cuda.FloatTensor)` asks
    whether `t` is marked and of that dtype; `t.type(torch.cuda.FloatTensor)`
    converts (mode.py reads `legacy_dtype`)."""

    legacy_dtype: torch.dtype

    def __call__(cls, *args: Any, **kwargs: Any) -> torch.Tensor:
        if len(args) == 1 and not isinstance(args[0], int):
            return mark(torch.tensor(args[0], dtype=cls.legacy_dtype))
        return mark(torch.empty(*args, dtype=cls.legacy_dtype))

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, torch.Tensor) and marked(obj) and obj.dtype == cls.legacy_dtype


def _legacy_constructor(name: str, dtype: torch.dtype) -> Any:
    """`torch.cuda.FloatTensor`: a tensor type of the simulated device."""
    return _LegacyType(name, (), {"legacy_dtype": dtype, "__module__": "torch.cuda"})


# -- modules ---------------------------------------------------------------------------------------


def module_tensors(module: torch.nn.Module) -> Iterator[torch.Tensor]:
    for p in module.parameters():
        yield p
        if p.grad is not None:
            yield p.grad
    yield from module.buffers()


def place_module(module: torch.nn.Module, on_device: bool) -> None:
    """Mark (or unmark) a module's tensors in place, and the module itself."""
    for t in module_tensors(module):
        if on_device:
            mark(t)
        else:
            unmark(t)
    for m in module.modules():
        m.__dict__[KEY] = ACCEL if on_device else 0


def module_on_device(module: torch.nn.Module) -> bool:
    return bool(module.__dict__.get(KEY, 0) & ACCEL)


def record_builds(p: Patches, events: Events) -> None:
    """Tell `events` of each module built (once, however deep its `__init__` chain)."""
    module_init = torch.nn.Module.__init__

    def init(self: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        module_init(self, *args, **kwargs)
        if "_torchlint_built_" not in self.__dict__:
            self.__dict__["_torchlint_built_"] = True
            events.module_built(self)

    p.set(torch.nn.Module, "__init__", init)


def _patch_modules(p: Patches, events: Events) -> None:
    Module = torch.nn.Module
    module_to = Module.to
    parse_to = torch._C._nn._parse_to

    def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
        if args and isinstance(args[0], torch.Tensor):  # `.to(tensor)`: its device and dtype
            other = args[0]
            target: Any = CUDA0 if marked(other) else CPU
            dtype = other.dtype
            rest: Dict[str, Any] = {}
        else:
            target, dtype, non_blocking, memory_format = parse_to(*args, **kwargs)
            rest = {"non_blocking": non_blocking}
            if memory_format is not None:
                rest["memory_format"] = memory_format
        if target is None or not (is_accel(target) or is_host(target)):
            return module_to(self, *args, **kwargs)
        if dtype is not None or "memory_format" in rest:
            module_to(self, dtype=dtype, **rest) if dtype is not None else module_to(self, **rest)
        if is_accel(target):
            events.module_moved(self, module_on_device(self))
            place_module(self, True)
        else:
            place_module(self, False)
        return self

    def cuda(self: torch.nn.Module, device: Any = None) -> torch.nn.Module:
        return to(self, CUDA0)

    def cpu(self: torch.nn.Module) -> torch.nn.Module:
        return to(self, CPU)

    module_to_empty = Module.to_empty

    def to_empty(self: torch.nn.Module, *, device: Any = None, recurse: bool = True) -> torch.nn.Module:
        if device is not None and is_accel(device):
            module_to_empty(self, device=CPU, recurse=recurse)
            events.module_moved(self, module_on_device(self))
            place_module(self, True)
            return self
        return module_to_empty(self, device=device, recurse=recurse)

    p.set(Module, "to", to)
    p.set(Module, "cuda", cuda)
    p.set(Module, "cpu", cpu)
    p.set(Module, "to_empty", to_empty)
    record_builds(p, events)

    Parameter = torch.nn.Parameter
    parameter_new = Parameter.__new__

    def new_parameter(cls: Any, data: Any = None, requires_grad: bool = True) -> Any:
        made = parameter_new(cls, data, requires_grad)
        if data is not None and marked(data):
            mark(made)
        return made

    p.set(Parameter, "__new__", staticmethod(new_parameter))

    data_parallel = torch.nn.DataParallel
    dp_init = data_parallel.__init__

    def dp_new_init(self: Any, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        events.data_parallel()
        dp_init(self, module, *args, **kwargs)

    def dp_forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        # One device: DataParallel copies the inputs to it and runs the module there.
        return self.module(*upload_tree(inputs), **upload_tree(kwargs))

    p.set(data_parallel, "__init__", dp_new_init)
    p.set(data_parallel, "forward", dp_forward)


def upload_tree(tree: Any) -> Any:
    """Tensors anywhere in nested lists, tuples and dicts, as copies on the device."""
    if isinstance(tree, torch.Tensor):
        return tree if marked(tree) else mark(tree.clone())
    if isinstance(tree, (list, tuple)):
        return type(tree)(upload_tree(x) for x in tree)
    if isinstance(tree, dict):
        return {k: upload_tree(v) for k, v in tree.items()}
    return tree


# -- loading, saving, pickling -----------------------------------------------------------------------


def _patch_serialization(p: Patches, events: Events) -> None:
    original_load = torch.load
    original_save = torch.save
    get_state: Callable[[Any], Any] = torch._utils._get_obj_state

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        to_device = map_location is not None and _maps_to_device(map_location)
        if map_location is None:
            from_cuda: Set[int] = set()

            def remap(storage: Any, location: str) -> Any:
                if str(location).startswith("cuda"):
                    from_cuda.add(storage.data_ptr())
                return storage

            result = original_load(f, remap, *args, **kwargs)
            for t in _loaded_tensors(result):
                with contextlib.suppress(Exception):
                    if t.untyped_storage().data_ptr() in from_cuda:
                        mark(t)
            return result
        if to_device:
            result = original_load(f, "cpu", *args, **kwargs)
            for t in _loaded_tensors(result):
                mark(t)
            if isinstance(result, torch.nn.Module):
                place_module(result, True)
            return result
        return original_load(f, map_location, *args, **kwargs)

    def save(obj: Any, *args: Any, **kwargs: Any) -> None:
        events.device_call("TL403", "torch.save(...)")
        original_save(obj, *args, **kwargs)

    def obj_state(obj: Any) -> Any:
        state = get_state(obj)
        if isinstance(state, dict) and any(k in state for k in _OWN_KEYS):
            state = {k: v for k, v in state.items() if k not in _OWN_KEYS}
        elif isinstance(state, tuple) and state and isinstance(state[0], dict):
            state = ({k: v for k, v in state[0].items() if k not in _OWN_KEYS}, *state[1:])
        return state

    p.set(torch, "load", load)
    p.set(torch, "save", save)
    p.set(torch._utils, "_get_obj_state", obj_state)


def _maps_to_device(where: Any) -> bool:
    if isinstance(where, dict):
        return any(is_accel(v) for v in where.values())
    if callable(where):
        return False
    return is_accel(where)


def _loaded_tensors(result: Any) -> Iterable[torch.Tensor]:
    if isinstance(result, torch.nn.Module):
        return list(module_tensors(result))
    return list(tensors_in(result, depth=6))


# -- amp, compile, profiler, pinning -------------------------------------------------------------------


def _patch_misc(p: Patches, events: Events) -> None:
    for scaler in _grad_scalers():
        scaler_init = scaler.__init__

        def disabled(self: Any, *args: Any, _init: Any = scaler_init, **kwargs: Any) -> None:
            _init(self, *args, **kwargs)
            self._enabled = False  # the simulated device has no inf checks of its own: scale by 1

        p.set(scaler, "__init__", disabled)

    def compile(model: Any = None, **kwargs: Any) -> Any:
        events.compiled()
        if model is None:  # `@torch.compile(mode=...)`
            return lambda fn: fn
        return model

    p.set(torch, "compile", compile)

    profile = torch.autograd.profiler.profile
    profile_init = profile.__init__

    def legacy_profile(self: Any, *args: Any, **kwargs: Any) -> None:
        events.legacy_profiler()
        kwargs.pop("use_cuda", None)
        if kwargs.get("use_device") == "cuda":
            kwargs.pop("use_device")
        profile_init(self, *args, **kwargs)

    p.set(profile, "__init__", legacy_profile)

    p.set(torch, "Generator", _generator_class())
    _patch_default_device(p)

    Tensor = torch.Tensor

    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        if marked(self):
            raise RuntimeError("cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned")
        set_tag(self, tag(self) | PINNED)
        return self

    def is_pinned(self: torch.Tensor, device: Any = None) -> bool:
        return bool(tag(self) & PINNED)

    p.set(Tensor, "pin_memory", pin_memory)
    p.set(Tensor, "is_pinned", is_pinned)
    p.set(Tensor, "record_stream", lambda self, stream=None: None)


def _patch_default_device(p: Patches) -> None:
    """`torch.set_default_device("cuda")` and `with torch.device("cuda"):` (a
    DeviceContext mode, which torch keeps at the bottom of the mode stack):
    factories called without `device=` make marked CPU tensors."""
    from torch.utils import _device

    context = _device.DeviceContext
    context_init: Callable[..., None] = context.__init__
    context_function: Callable[..., Any] = context.__torch_function__
    constructors: Callable[[], Any] = _device._device_constructors

    def init(self: Any, device: Any) -> None:
        context_init(self, device)
        self.__dict__["_torchlint_accel_"] = is_accel(self.device)

    def function(self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.__dict__.get("_torchlint_accel_") and func in constructors() and kwargs.get("device") is None:
            out = func(*args, **dict(kwargs, device=CPU))
            for t in tensors_in(out, depth=1):
                mark(t)
            return out
        return context_function(self, func, types, args, kwargs)

    p.set(context, "__init__", init)
    p.set(context, "__torch_function__", function)


def _generator_class() -> Any:
    """`torch.Generator(device="cuda")`: a CPU generator (the simulated device's
    random numbers come from the CPU), still an instance of torch.Generator
    for every check, as is every generator torch made itself."""
    base: Any = torch._C.Generator

    class Meta(type(base)):  # type: ignore[misc]
        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, base)

        def __subclasscheck__(cls, sub: Any) -> bool:
            return issubclass(sub, base)

    class Generator(base, metaclass=Meta):  # type: ignore[misc]
        def __new__(cls, device: Any = "cpu") -> Any:
            return base.__new__(cls, CPU if is_accel(device) else device)

    Generator.__module__ = "torch"
    return Generator


def _grad_scalers() -> List[Any]:
    found = []
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        found.append(amp.GradScaler)
    cuda_amp = getattr(torch.cuda, "amp", None)
    if cuda_amp is not None and hasattr(cuda_amp, "GradScaler") and cuda_amp.GradScaler not in found:
        found.append(cuda_amp.GradScaler)
    return found


def install(events: Events) -> Patches:
    """Make this process look like a machine with one CUDA device (see the
    module's docstring). `Patches.restore()` undoes it."""
    p = Patches()
    USAGE.used = False
    try:
        _patch_device_api(p, events)
        _patch_modules(p, events)
        _patch_serialization(p, events)
        _patch_misc(p, events)
        patch_distributed(p)
    except BaseException:
        p.restore()
        raise
    return p
