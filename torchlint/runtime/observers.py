"""What the run watches for, and where it happened in the user's code.

The `Recorder` is told by the mode (mode.py) and the patched calls
(accelerator.py) what happened, and watches module calls, the optimizer's
steps and the DataLoader's iterators itself. Each occurrence is attributed
to a site in the user's files (sites.py) and counted on the clocks
(steps.py):

| code | what is observed | where |
|---|---|---|
| TL101 | an operation mixes a device tensor with a CPU parameter or buffer (the model was not moved, or is used before it is moved) | the call of the model, from the user's code |
| TL102 | ... with a CPU tensor the user made (or a module's plain tensor attribute, which `.to()` does not move) | the call of the model (the attribute: the line of the forward that uses it) |
| TL103 | ... with a batch from a DataLoader (or a tensor computed from one) | the call of the model, or the operation |
| TL104 | a tensor freshly allocated on the CPU (`torch.ones(...)`) copied to the device | the move |
| TL106 | a module moved again though on the device already; the same unchanged CPU tensor copied again | the move |
| TL201 | a model call with grad whose graph never reaches `backward()` | the call |
| TL202 | a local accumulator (`total += loss`) or list (`losses.append(loss)`) that keeps the graphs of earlier steps alive | the accumulation |
| TL301 | a model trained on batches of one (model_calls.py) | the call of the model |
| TL301-304 | a DataLoader with batch size 1, no workers, no pinning for batches moved to the device, workers restarted each epoch | the `DataLoader(...)` call |
| TL401 | a device value read on the host (`.item()`, `.tolist()`, `.cpu()`, `float()`, `bool()`, a condition, `print`, f-strings; `.numpy()` raises on a GPU) | the read |
| TL403 | `torch.cuda.synchronize()`, `torch.cuda.empty_cache()`, `torch.save` | the call |
| TL404 | `torch.compile` called again at the same place | the call |
| TL501, TL601 | the legacy autograd profiler (the user's own, not torch.profiler's), `nn.DataParallel` | the call |
| TL100 | a model trained or run, and nothing ever sent to the device | the model's construction |
| TL101 | ... while a variable of the user's names the GPU (model_calls.py) | the model's construction |

The mismatches (TL101-TL103) are what a GPU run would raise on; the run goes
on, computing on the CPU. A host read, a per-step device call, a repeated move,
a forward without no_grad and a retained graph are reported only when they
recur per step (steps.py); the others whenever they occur.
"""

from __future__ import annotations

import dis
import linecache
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from torchlint.runtime.accelerator import (
    ACCEL,
    BATCH,
    FRESH,
    KEY,
    MODEL_NAME,
    MODEL_OUT,
    MOVED,
    ORIGIN,
    YIELDED,
    Patches,
    marked,
    module_on_device,
    set_tag,
    tag,
    tensors_in,
)
from torchlint.runtime.loaders import INFO, LoaderInfo, loader_observations
from torchlint.runtime.mode import caller
from torchlint.runtime.model_calls import batch_of_one, device_at_hand
from torchlint.runtime.observations import Clock, Observation, Site
from torchlint.runtime.sites import Key, UserFiles, accumulation_line, site_at
from torchlint.runtime.steps import Reading, Steps, Tally

SiteKey = Union[Key, Site]
BUILT = "_torchlint_site_"  # a module's construction site (a Key)

# Reported only when they recur per step.
PER_STEP_CODES = frozenset({"TL106", "TL201", "TL202", "TL301", "TL401", "TL403"})
CRASH = "a GPU run raises here"

# grad_fn kinds an accumulation makes (`total += loss`, `total = total * d + loss`, `torch.stack`).
_ACCUMULATING = frozenset(
    {"AddBackward0", "AddBackward1", "SubBackward0", "SubBackward1", "MulBackward0", "DivBackward0"}
    | {"CatBackward0", "StackBackward0", "SumBackward0", "MeanBackward0"}
)


@dataclass
class Entry:
    code: str
    site: SiteKey
    message: str
    tally: Tally = field(default_factory=Tally)
    crash: bool = False
    related: Tuple[SiteKey, ...] = ()
    stack: Tuple[SiteKey, ...] = ()
    last_call: int = -1  # the top-level model call it was last counted in
    waits: int = 0  # occurrences timed (a real GPU: the host's wait at a sync)
    wait: float = 0.0  # seconds, all of them
    wait_max: float = 0.0

    def timings(self) -> Tuple[Tuple[str, float], ...]:
        if not self.waits:
            return ()
        return (("wait_s", self.wait), ("wait_mean_s", self.wait / self.waits), ("wait_max_s", self.wait_max))


@dataclass
class ForwardRecord:
    site: Key
    reading: Reading
    reached: bool = False


def _user_key(files: UserFiles, frame: Optional[FrameType]) -> Optional[Key]:
    user = files.innermost(frame)
    return (user.f_code, user.f_lasti) if user is not None else None


def _simulated_use() -> bool:
    from torchlint.runtime.accelerator import USAGE

    return USAGE.used


class Recorder:
    """Counts what happens, where (see the module's docstring).

    On the simulated GPU the defaults apply. On a real one (real.py) the run hands in
    whether a model is on the device, the host clock the loaders are timed with, what is
    told of each step (the timer's marks) and whether the device was used at all."""

    def __init__(
        self,
        files: UserFiles,
        steps: Steps,
        model_on_device: Callable[[torch.nn.Module], bool] = module_on_device,
        now: Callable[[], float] = time.perf_counter,
        on_step: Optional[Callable[[Clock], None]] = None,
        used: Callable[[], bool] = _simulated_use,
    ) -> None:
        self.files = files
        self.steps = steps
        self.model_on_device = model_on_device
        self.now = now
        self.on_step = on_step
        self.used = used
        self.entries: Dict[Tuple[str, SiteKey, str], Entry] = {}
        self.pid = os.getpid()
        self.thread = threading.get_ident()
        self.on = True
        self.device_used = False
        self.modules: List[torch.nn.Module] = []  # the forward stack
        self.top_site: Optional[Key] = None  # where the user's code called the outermost model
        self.calls = 0  # top-level model calls so far
        self.forwards: List[ForwardRecord] = []
        self.loaders: List[LoaderInfo] = []
        self.first_model: Optional[torch.nn.Module] = None
        self.device_variable: Optional[str] = None  # a variable of the user's naming the GPU (model_calls.py)
        self._tensors: Dict[Tuple[CodeType, str], Any] = {}  # accumulator candidates: grad_fn at the last boundary
        self._lists: Dict[Tuple[CodeType, str], int] = {}  # list candidates: length at the last boundary
        self._boundary_seen: Dict[Tuple[CodeType, str], Tuple[int, int]] = {}
        self._patches: Optional[Patches] = None
        self._hooks: List[Any] = []

    def live(self) -> bool:
        return self.on and threading.get_ident() == self.thread and os.getpid() == self.pid

    # -- recording --------------------------------------------------------------------------------

    def record(
        self,
        code: str,
        site: SiteKey,
        message: str,
        variant: str = "",
        related: Tuple[SiteKey, ...] = (),
        crash: bool = False,
        reading: Optional[Reading] = None,
        per_call: bool = False,
        stack: Optional[Tuple[SiteKey, ...]] = None,
        waited: Optional[float] = None,
    ) -> None:
        key = (code, site, variant)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = Entry(code, site, message, crash=crash, related=related, stack=stack or ())
        elif per_call:
            if entry.last_call == self.calls:
                return  # one occurrence per model call (every layer of an unmoved model mismatches)
        entry.last_call = self.calls
        entry.tally.add(reading or self.steps.reading())
        if waited is not None:
            entry.waits += 1
            entry.wait += waited
            entry.wait_max = max(entry.wait_max, waited)

    def _stack(self, frame: Optional[FrameType], limit: int = 8) -> Tuple[Key, ...]:
        keys = [(f.f_code, f.f_lasti) for f in self.files.frames(frame)]
        return tuple(reversed(keys[:limit]))

    # -- told by the mode -------------------------------------------------------------------------

    def mismatch(self, func: Any, cpu: torch.Tensor) -> None:
        if not self.live():
            return
        with torch._C.DisableTorchFunction():
            self._mismatch(func, cpu)

    def _mismatch(self, func: Any, cpu: torch.Tensor) -> None:
        frame = sys._getframe(2)
        inner = _user_key(self.files, frame)
        site = self.top_site if self.modules and self.top_site is not None else inner
        if site is None:
            return
        name = getattr(func, "__name__", str(func))
        related: List[SiteKey] = []
        owner = self._owner(cpu)
        origin = getattr(cpu, ORIGIN, None)
        if origin is not None:
            related.append(origin)
        if owner is not None:
            module, attr, kind = owner
            for m in (self.modules[0] if self.modules else None, module):
                built = m.__dict__.get(BUILT) if m is not None else None
                if built is not None and built not in related:
                    related.append(built)
            cls = type(module).__name__
            if kind == "attribute":
                code = "TL102"
                site = inner or site
                message = (
                    f"{CRASH}: `{cls}.{attr}` is a plain tensor attribute on the CPU (not a parameter or a buffer, "
                    f"so moving the model did not move it) and meets a tensor on the GPU in `{name}`; "
                    "register it with `self.register_buffer(...)`"
                )
            else:
                code = "TL101"
                message = (
                    f"{CRASH}: `{cls}` has its {kind} `{attr}` on the CPU and gets a tensor on the GPU in "
                    f"`{name}`: the model is not on the device here (never moved, or used before its move)"
                )
        elif tag(cpu) & MODEL_OUT:
            code = "TL101"
            model = getattr(cpu, MODEL_NAME, "a model")
            message = (
                f"{CRASH}: the output of `{model}`, a model on the CPU, meets a tensor on the GPU in `{name}`: "
                "that model is not on the device"
            )
        elif tag(cpu) & BATCH:
            code = "TL103"
            what = (
                "a batch from a DataLoader, still on the CPU,"
                if tag(cpu) & YIELDED
                else "a tensor computed on the CPU from a DataLoader batch"
            )
            message = f"{CRASH}: {what} meets a tensor on the GPU in `{name}`; move the batch to the device first"
        elif isinstance(cpu, torch.nn.Parameter):
            code = "TL101"
            message = (
                f"{CRASH}: a parameter on the CPU meets a tensor on the GPU in `{name}`: its model is not on the device"
            )
        else:
            code = "TL102"
            made = " made by the script" if origin is not None else ""
            message = (
                f"{CRASH}: a tensor on the CPU{made} (shape {tuple(cpu.shape)}) meets a tensor on the GPU "
                f"in `{name}`; create it with `device=` or move it"
            )
        self.device_used = True
        self.record(
            code,
            site,
            message,
            related=tuple(related),
            crash=True,
            per_call=bool(self.modules),
            stack=None if (code, site, "") in self.entries else self._stack(frame),
        )

    def _owner(self, t: torch.Tensor) -> Optional[Tuple[torch.nn.Module, str, str]]:
        """The module on the forward stack that holds `t`: as a parameter, a buffer, or a plain attribute."""
        for top in reversed(self.modules):
            for module in top.modules():
                for name, p in module._parameters.items():
                    if p is t:
                        return module, name, "parameter"
                for name, b in module._buffers.items():
                    if b is t:
                        return module, name, "buffer"
                for name, v in module.__dict__.items():
                    if v is t:
                        return module, name, "attribute"
        return None

    def host_read(self, kind: str, tensor: torch.Tensor, crash: bool = False, waited: Optional[float] = None) -> None:
        if not self.live():
            return
        frame = caller()
        if frame is None or self.files.place(frame.f_code.co_filename) is None:
            return  # a read inside a library (torch's own syncs, a logger): not the user's line
        self.device_used = True
        what = _READS.get(kind, f"`{kind}`")
        if kind == "bool" and _is_condition(frame):
            what = "a tensor used as a condition (`if`/`while`/`assert`)"
        if crash:
            message = (
                f"{CRASH}: {what} of a tensor on the GPU raises (TypeError: can't convert cuda:0 device type "
                "tensor to numpy); copy it with `.cpu()` first, and only where the value is needed"
            )
        else:
            message = f"{what} copies a value from the GPU to the host: the CPU waits for the GPU (a sync)"
        self.record("TL401", (frame.f_code, frame.f_lasti), message, variant=kind, crash=crash, waited=waited)

    def uploaded(self, source: torch.Tensor, copy: torch.Tensor) -> None:
        self.device_used = True
        if not self.live():
            return
        bits = tag(source)
        frame = caller()
        site = _user_key(self.files, frame)
        if bits & BATCH:
            loader = self.steps.active_loader()
            if loader is not None and loader < len(self.loaders):
                info = self.loaders[loader]
                if info.last_moved != info.batches:  # one per batch, however many tensors it holds
                    info.last_moved = info.batches
                    info.moved += 1
            return
        if site is None:
            return
        origin = getattr(source, ORIGIN, None)
        if bits & FRESH and getattr(source, MOVED, None) is None and _same_statement(origin, site):
            self.record(
                "TL104",
                site,
                "a tensor freshly allocated on the CPU is copied to the GPU: allocate it there "
                "(`device=` in the factory call) and skip the copy",
                related=(origin,) if origin is not None else (),
            )
        version = source._version
        before = getattr(source, MOVED, None)
        if before is not None and before == version and not bits & BATCH:
            self.record(
                "TL106",
                site,
                "the same unchanged CPU tensor is copied to the GPU again: move it once, before the loop",
                variant="tensor",
            )
        else:
            try:
                setattr(source, MOVED, version)
            except (AttributeError, TypeError):
                pass

    # -- told by the patched calls (accelerator.Events) ---------------------------------------------

    def module_moved(self, module: torch.nn.Module, already: bool) -> None:
        self.device_used = True
        if not already or not self.live():
            return
        site = _user_key(self.files, sys._getframe(1))
        if site is not None:
            self.record(
                "TL106",
                site,
                f"`{type(module).__name__}` is moved to the GPU again though it is there already "
                "(a no-op call that walks every parameter); move it once, before the loop",
                variant="module",
            )

    def device_call(self, code: str, what: str, waited: Optional[float] = None) -> None:
        if not self.live():
            return
        site = _user_key(self.files, sys._getframe(1))
        if site is not None:
            self.record(
                code, site, f"`{what}` on every step: a full device sync (or a write to disk) each time", waited=waited
            )

    def compiled(self) -> None:
        self._once("TL404", "`torch.compile` is called again here: each call compiles anew")

    def data_parallel(self) -> None:
        self._once(
            "TL601",
            "`nn.DataParallel` replicates the model in one process at every step; "
            "use `DistributedDataParallel` (one process per GPU)",
        )

    def legacy_profiler(self) -> None:
        # Only the user's own `profile(...)`: `torch.profiler.profile` makes one of its own inside.
        self._once(
            "TL501",
            "the legacy `torch.autograd.profiler.profile` is used; `torch.profiler.profile` "
            "(with `ProfilerActivity.CUDA`) records the GPU's kernels",
            direct=True,
        )

    def _once(self, code: str, message: str, direct: bool = False) -> None:
        """Record `code` at the user's line that called the patched function
        (`direct`: only when the user's code called it itself, not a library)."""
        if not self.live():
            return
        patched = sys._getframe(2)
        if direct and (patched.f_back is None or self.files.place(patched.f_back.f_code.co_filename) is None):
            return
        site = _user_key(self.files, patched)
        if site is not None:
            self.record(code, site, message)

    def module_built(self, module: torch.nn.Module) -> None:
        if not self.live():
            return
        frame: Optional[FrameType] = sys._getframe(1)
        while frame is not None:
            if self.files.place(frame.f_code.co_filename) is not None:
                if not (frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is module):
                    module.__dict__[BUILT] = (frame.f_code, frame.f_lasti)
                    return
            frame = frame.f_back

    # -- module calls, steps, loaders -----------------------------------------------------------------

    def install(self) -> None:
        p = self._patches = Patches()
        module_call = torch.nn.Module.__call__
        recorder = self

        def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if recorder.modules or not recorder.live():
                recorder.modules.append(module)
                try:
                    return module_call(module, *args, **kwargs)
                finally:
                    recorder.modules.pop()
            return recorder._top_call(module_call, module, args, kwargs)

        p.set(torch.nn.Module, "__call__", call)
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._hooks.append(register_optimizer_step_post_hook(self._stepped))
        self._patch_loaders(p)

    def uninstall(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        if self._patches is not None:
            self._patches.restore()
            self._patches = None

    def _top_call(self, module_call: Any, module: torch.nn.Module, args: Any, kwargs: Any) -> Any:
        site = _user_key(self.files, sys._getframe(2))
        self.top_site = site
        self.calls += 1
        with torch._C.DisableTorchFunction():
            has_params = next(module.parameters(), None) is not None
        if has_params and site is not None:
            if self.first_model is None:
                self.first_model = module
            before = self.steps.forwards
            self.steps.forward_called(site)
            if self.on_step is not None and self.steps.forwards != before:
                self.on_step(Clock.FORWARDS)
            self._look_at_call(module, site, args, kwargs)
        self.modules.append(module)
        try:
            out = module_call(module, *args, **kwargs)
        finally:
            self.modules.pop()
        if has_params and site is not None:
            with torch._C.DisableTorchFunction():
                if torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
                    self._watch_graph(site, out)
                if not self.model_on_device(module):
                    self._cpu_model_output(module, out)
        return out

    def _look_at_call(self, module: torch.nn.Module, site: Key, args: Any, kwargs: Any) -> None:
        """A training call on a batch of one (TL301); a GPU device at hand while nothing has gone there (TL101)."""
        with torch._C.DisableTorchFunction():
            shape = batch_of_one(module, args, kwargs)
            if shape is not None:
                self.record(
                    "TL301",
                    site,
                    f"`{type(module).__name__}` is trained on batches of one (input shape {shape}): "
                    "each step does a sample's work; batch the samples together",
                    variant="model",
                )
            if not self.device_used and self.device_variable is None:
                self.device_variable = device_at_hand(self.files.frames(sys._getframe(3)))

    def _cpu_model_output(self, module: torch.nn.Module, out: Any) -> None:
        built = module.__dict__.get(BUILT)
        for t in tensors_in(out, depth=2):
            if not marked(t):
                set_tag(t, tag(t) | MODEL_OUT)
                try:
                    if built is not None:
                        setattr(t, ORIGIN, built)
                    setattr(t, MODEL_NAME, type(module).__name__)
                except (AttributeError, TypeError):
                    pass

    def _watch_graph(self, site: Key, out: Any) -> None:
        """TL201: note the forward's graph, and whether backward ever reaches it."""
        nodes: List[Any] = []
        for t in tensors_in(out, depth=2):
            fn = t.grad_fn
            if fn is not None and all(fn is not n for n in nodes):
                nodes.append(fn)
            if len(nodes) >= 8:
                break
        if not nodes:
            return
        record = ForwardRecord(site, self.steps.reading())
        self.forwards.append(record)

        def reached(*_: Any) -> None:
            record.reached = True

        for fn in nodes:
            try:
                fn.register_prehook(reached)
            except (AttributeError, RuntimeError):
                record.reached = True  # cannot tell: assume it is used

    def _stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.live():
            return
        self.boundary()
        before = self.steps.optimizer
        try:
            self.steps.optimizer_stepped(optimizer)
        finally:
            if self.on_step is not None and self.steps.optimizer != before:
                self.on_step(Clock.OPTIMIZER)

    def boundary(self) -> None:
        """At a step boundary: do the user's locals keep graphs of earlier steps alive (TL202)?"""
        with torch._C.DisableTorchFunction():
            for frame in self.files.frames(sys._getframe(1)):
                self._retained(frame)

    def _retained(self, frame: FrameType) -> None:
        code = frame.f_code
        for name, value in list(frame.f_locals.items()):
            key = (code, name)
            if isinstance(value, torch.Tensor):
                fn = value.grad_fn
                if fn is None or type(fn).__name__ not in _ACCUMULATING:
                    self._tensors.pop(key, None)
                    continue
                before = self._tensors.get(key)
                self._tensors[key] = fn
                if before is not None and before is not fn and _reaches(fn, before, 4):
                    self._graph_kept(code, name, "accumulator")
            elif isinstance(value, list) and value:
                n = len(value)
                before_n = self._lists.get(key)
                self._lists[key] = n
                last = value[-1]
                if not (isinstance(last, torch.Tensor) and last.grad_fn is not None):
                    continue
                if before_n is not None and 0 < before_n < n:
                    earlier = value[before_n - 1]
                    if isinstance(earlier, torch.Tensor) and earlier.grad_fn is not None:
                        self._graph_kept(code, name, "list")

    def _graph_kept(self, code: CodeType, name: str, kind: str) -> None:
        reading = self.steps.reading()
        stamp = (reading.optimizer, reading.batch)
        if self._boundary_seen.get((code, name)) == stamp:
            return
        self._boundary_seen[(code, name)] = stamp
        line = accumulation_line(code, name)
        place = self.files.place(code.co_filename)
        if place is None:
            return
        row = line or code.co_firstlineno
        text = linecache.getline(code.co_filename, row)
        column = len(text) - len(text.lstrip()) + 1 if text.strip() else 1
        site: SiteKey = Site(place.path, row, column, cell=place.cell, function=code.co_name)
        what = (
            f"`{name}` accumulates tensors that carry grad"
            if kind == "accumulator"
            else f"`{name}` keeps tensors that carry grad"
        )
        self.record(
            "TL202",
            site,
            f"{what} across steps: every step's autograd graph stays alive and memory grows; "
            "accumulate `.detach()` (or `.item()` where the number is needed)",
        )

    def _patch_loaders(self, p: Patches) -> None:
        from torch.utils.data import DataLoader, Subset, TensorDataset
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        recorder = self
        loader_init = DataLoader.__init__
        loader_iter = DataLoader.__iter__
        iter_init = _BaseDataLoaderIter.__init__
        iter_next = _BaseDataLoaderIter.__next__

        def init(loader: Any, *args: Any, **kwargs: Any) -> None:
            loader_init(loader, *args, **kwargs)
            if not recorder.live():
                return
            dataset = loader.dataset
            while isinstance(dataset, Subset):
                dataset = dataset.dataset
            info = LoaderInfo(
                serial=len(recorder.loaders),
                site=_user_key(recorder.files, sys._getframe(1)),
                batch_size=loader.batch_size,
                workers=loader.num_workers,
                pin_memory=bool(loader.pin_memory),
                persistent=bool(loader.persistent_workers),
                in_memory=isinstance(dataset, TensorDataset),
            )
            recorder.loaders.append(info)
            loader.__dict__[INFO] = info

        def iterate(loader: Any) -> Any:
            info = loader.__dict__.get(INFO)
            if info is not None:
                info.iterations += 1
                if info.iterations > 1 and info.workers > 0 and not info.persistent:
                    info.restarts += 1
            return loader_iter(loader)

        def new_iterator(it: Any, loader: Any) -> None:
            iter_init(it, loader)
            it.__dict__[INFO] = loader.__dict__.get(INFO)

        def next_batch(it: Any) -> Any:
            info = it.__dict__.get(INFO)
            if info is None or not recorder.live():
                return iter_next(it)
            recorder.steps.batch_wanted()
            if info.batches:
                recorder.boundary()
            start = recorder.now()
            if info.last_yield is not None:
                info.busy += start - info.last_yield
            try:
                batch = iter_next(it)
            except StopIteration:
                recorder.steps.loader_exhausted(it)
                info.last_yield = None
                raise
            now = recorder.now()
            info.wait += now - start
            info.last_yield = now
            info.batches += 1
            with torch._C.DisableTorchFunction():
                for t in tensors_in(batch):
                    set_tag(t, tag(t) | BATCH | YIELDED)
            recorder.steps.batch_yielded(info.serial, it)
            if recorder.on_step is not None:
                recorder.on_step(Clock.BATCHES)
            return batch

        p.set(DataLoader, "__init__", init)
        p.set(DataLoader, "__iter__", iterate)
        p.set(_BaseDataLoaderIter, "__init__", new_iterator)
        p.set(_BaseDataLoaderIter, "__next__", next_batch)

    # -- the end ---------------------------------------------------------------------------------------

    def finish(self, complete: bool) -> None:
        """Resolve what can only be judged at the end: forwards whose graph never
        reached backward (TL201; the current step's only when the run completed),
        the loaders (TL301-TL304), a run that never used the device (TL100)."""
        self.on = False
        self.device_used = self.device_used or self.used()
        now = self.steps.reading()
        for record in self.forwards:
            if record.reached:
                continue
            if not complete and (record.reading.optimizer, record.reading.forwards) == (now.optimizer, now.forwards):
                continue
            self.record(
                "TL201",
                record.site,
                "this model call records an autograd graph that never reaches `backward()`: "
                "run it under `torch.inference_mode()` (or `torch.no_grad()`)",
                reading=record.reading,
            )
        self.forwards.clear()

    def loader_observations(self) -> List[Observation]:
        """TL301-TL304, one per `DataLoader(...)` call site."""
        return loader_observations(self.loaders, self.files, self.device_used)

    def loader_totals(self) -> Tuple[float, int]:
        """Seconds waited for batches, and batches, over every DataLoader."""
        return sum(i.wait for i in self.loaders), sum(i.batches for i in self.loaders)

    def no_device_observation(self) -> Optional[Observation]:
        if self.device_used or self.first_model is None or not (self.steps.optimizer or self.steps.batches):
            return None
        built = self.first_model.__dict__.get(BUILT)
        if built is None:
            return None
        name = type(self.first_model).__name__
        if self.device_variable is not None:  # a device was chosen, and the model never went there
            code = "TL101"
            message = (
                f"`{name}` is trained or run on the CPU while `{self.device_variable}` names the GPU: "
                f"nothing is ever sent there; move the model with `.to({self.device_variable})`"
            )
        else:
            code = "TL100"
            message = f"`{name}` is trained or run, but nothing is ever sent to the GPU: the whole run stays on the CPU"
        return Observation(
            code,
            site_at(built, self.files),
            message,
            1,
            1,
            self.steps.total,
            self.steps.clock,
            per_step=False,
        )

    def observations(self) -> List[Observation]:
        result: List[Observation] = []
        for entry in self.entries.values():
            judged = self.steps.judge(entry.tally)
            reported = entry.crash or entry.code not in PER_STEP_CODES or judged.per_step
            if entry.code == "TL404":
                reported = entry.tally.count >= 2
            result.append(
                Observation(
                    entry.code,
                    self._site(entry.site),
                    entry.message,
                    entry.tally.count,
                    judged.steps_seen,
                    judged.steps,
                    judged.clock,
                    judged.per_step,
                    reported=reported,
                    crash=entry.crash,
                    related=tuple(self._site(k) for k in entry.related),
                    stack=tuple(self._site(k) for k in entry.stack),
                    timings=entry.timings(),
                )
            )
        result.extend(self.loader_observations())
        missing = self.no_device_observation()
        if missing is not None:
            result.append(missing)
        result.sort(key=lambda o: (o.site.path, o.site.cell or 0, o.site.line, o.site.column, o.code, o.message))
        return result

    def _site(self, key: SiteKey) -> Site:
        return key if isinstance(key, Site) else site_at(key, self.files)


_READS = {
    "item": "`.item()`",
    "tolist": "`.tolist()`",
    "float": "`float(tensor)`",
    "int": "`int(tensor)`",
    "index": "a tensor used as an index (`__index__`)",
    "complex": "`complex(tensor)`",
    "bool": "`bool(tensor)`",
    "format": "formatting a tensor (an f-string or `format`)",
    "repr": "printing a tensor (`print`, `repr`, `str`)",
    "contains": "`in` on a tensor",
    "cpu": "`.cpu()` (or `.to('cpu')`)",
    "numpy": "`.numpy()` (or `numpy.asarray`)",
}


def _is_condition(frame: FrameType) -> bool:
    """Whether the frame's current instruction is a conditional jump (`if t:`)."""
    code = frame.f_code.co_code
    index = frame.f_lasti
    if 0 <= index < len(code):
        name = dis.opname[code[index]]
        return "JUMP" in name or name == "UNARY_NOT"
    return False


def _same_statement(origin: Optional[Key], site: Key) -> bool:
    """Whether a tensor made at `origin` is moved at `site` in the same line of
    the same code (`torch.ones(3).to(d)`: create-then-move)."""
    if origin is None or origin[0] is not site[0]:
        return False
    return _line_at(origin) == _line_at(site)


def _line_at(key: Key) -> Optional[int]:
    code, lasti = key
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None


def _reaches(start: Any, target: Any, depth: int) -> bool:
    """Whether autograd node `target` is among `start`'s inputs, `depth` levels down."""
    frontier = [start]
    for _ in range(depth):
        following = []
        for node in frontier:
            for nxt, _index in getattr(node, "next_functions", ()):
                if nxt is None:
                    continue
                if nxt is target:
                    return True
                following.append(nxt)
        frontier = following[:64]
    return False


__all__ = ["Recorder", "PER_STEP_CODES", "ACCEL", "KEY", "marked"]
