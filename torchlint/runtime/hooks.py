"""The calls a run on a real GPU (`--device cuda`) wraps: each still does what it does,
and is recorded first (undone by `Patches.restore()`):

- `torch.cuda.synchronize()` (and `torch.accelerator.synchronize()`), `empty_cache()` and
  `torch.save` (TL403), timed: the host's seconds in the call;
- `nn.Module.to/.cuda/.to_empty` to the device of a module already there (TL106);
- `torch.compile` (TL404), the legacy `torch.autograd.profiler.profile` (TL501),
  `nn.DataParallel` (TL601).

accelerator.py is the simulated device's counterpart: these patches change no result.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import torch

from torchlint.runtime.accelerator import Events, Patches, record_builds
from torchlint.runtime.timing import Timer

_parse_to = torch._C._nn._parse_to


class TimedEvents(Events, Protocol):
    """What the wrapped calls tell the observers (observers.Recorder), with the host's seconds."""

    def device_call(self, code: str, what: str, waited: Optional[float] = None) -> None: ...


def module_on_device_of(device_type: str) -> Callable[[torch.nn.Module], bool]:
    """Whether all of a module's parameters and buffers (at least one) are on a device of this type."""

    def on_device(module: torch.nn.Module) -> bool:
        with torch._C.DisableTorchFunction():
            tensors = [*module.parameters(), *module.buffers()]
            return bool(tensors) and all(t.device.type == device_type for t in tensors)

    return on_device


def _target_type(args: Any, kwargs: Any) -> Optional[str]:
    """The device type `Module.to(*args, **kwargs)` moves to, if any."""
    if args and isinstance(args[0], torch.Tensor):
        return str(args[0].device.type)
    try:
        device = _parse_to(*args, **kwargs)[0]
    except (TypeError, RuntimeError, ValueError):
        return None
    return None if device is None else str(device.type)


def install(events: TimedEvents, timer: Timer, device_type: str) -> Patches:
    """Wrap the calls (see the module's docstring)."""
    p = Patches()
    try:
        _wrap_device_calls(p, events, timer)
        _wrap_modules(p, events, device_type)
        _wrap_misc(p, events)
    except BaseException:
        p.restore()
        raise
    return p


def _timed_call(events: TimedEvents, timer: Timer, what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        result, seconds = timer.timed(original, *args, **kwargs)
        events.device_call("TL403", what, waited=seconds)
        return result

    return call


def _wrap_device_calls(p: Patches, events: TimedEvents, timer: Timer) -> None:
    cuda = torch.cuda
    for owner, name, what in (
        (cuda, "synchronize", "torch.cuda.synchronize()"),
        (cuda, "empty_cache", "torch.cuda.empty_cache()"),
        (getattr(torch, "accelerator", None), "synchronize", "torch.accelerator.synchronize()"),
        (torch, "save", "torch.save(...)"),
    ):
        original = getattr(owner, name, None) if owner is not None else None
        if original is not None:
            p.set(owner, name, _timed_call(events, timer, what, original))


def _wrap_modules(p: Patches, events: TimedEvents, device_type: str) -> None:
    Module = torch.nn.Module
    module_to, module_cuda, module_to_empty = Module.to, Module.cuda, Module.to_empty
    on_device = module_on_device_of(device_type)

    def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
        if _target_type(args, kwargs) == device_type:
            events.module_moved(self, on_device(self))
        return module_to(self, *args, **kwargs)

    def cuda_(self: torch.nn.Module, device: Any = None) -> torch.nn.Module:
        if device_type == "cuda":
            events.module_moved(self, on_device(self))
        return module_cuda(self, device)

    def to_empty(self: torch.nn.Module, *, device: Any = None, recurse: bool = True) -> torch.nn.Module:
        if device is not None and torch.device(device).type == device_type:
            events.module_moved(self, on_device(self))
        return module_to_empty(self, device=device, recurse=recurse)

    p.set(Module, "to", to)
    p.set(Module, "cuda", cuda_)
    p.set(Module, "to_empty", to_empty)
    record_builds(p, events)


def _wrap_misc(p: Patches, events: TimedEvents) -> None:
    original_compile = torch.compile

    def compile(*args: Any, **kwargs: Any) -> Any:
        events.compiled()
        return original_compile(*args, **kwargs)

    p.set(torch, "compile", compile)

    profile = torch.autograd.profiler.profile
    profile_init = profile.__init__

    def legacy_profile(self: Any, *args: Any, **kwargs: Any) -> None:
        events.legacy_profiler()
        profile_init(self, *args, **kwargs)

    p.set(profile, "__init__", legacy_profile)

    data_parallel = torch.nn.DataParallel
    dp_init = data_parallel.__init__

    def dp_new_init(self: Any, *args: Any, **kwargs: Any) -> None:
        events.data_parallel()
        dp_init(self, *args, **kwargs)

    p.set(data_parallel, "__init__", dp_new_init)
