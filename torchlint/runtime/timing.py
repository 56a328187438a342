"""What a run on a real GPU (`torchlint run --device cuda`) measures, and its summary line.

The device is an object with a clock (the `Device` protocol): `torchlint/runtime/cuda.py`
is the one for `torch.cuda`, and tests hand in one with a clock of their own. This module
imports no torch.

- **The host's wait at a sync.** Before each host read of a device value that the user's
  code makes (`.item()`, `.cpu()`, `print(t)`...) the run drains the device
  (`torch.cuda.synchronize()`) between two `perf_counter` readings, then lets the read
  run. The read would have waited for the same queued work, so the drain takes the
  read's own wait and adds no sync that was not there; what it measures is host time,
  which is what a stall is. CUDA events would time the device's side of the read (its
  copy), not how long the host sat idle, and reading them needs a sync anyway.
  `torch.cuda.synchronize()` calls of the user's code are timed around the call.
- **Step time**: the host's time between consecutive steps of the run's clock (optimizer
  steps, else batches, else forward calls), and the device's, from a CUDA event recorded
  at each step (read once, at the end of the run).
- **Loader wait**: the host's time inside each DataLoader `__next__` (observers.py).
- **Utilization**: NVML's GPU utilization, sampled every 0.1 s from a thread, when
  `pynvml` (nvidia-ml-py) can be imported; otherwise it is left out, with a note.
"""

from __future__ import annotations

import statistics
import threading
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from torchlint.runtime.observations import Clock, Observation, RunTimings

MAX_MARKS = 10_000  # step marks kept per clock (a CUDA event each)
SYNC_CODES = frozenset({"TL401", "TL403"})


class DeviceEvent(Protocol):
    """A marker in the device's stream (`torch.cuda.Event(enable_timing=True)`)."""

    def record(self) -> None: ...

    def elapsed_time(self, end_event: Any) -> float: ...  # milliseconds, as torch.cuda.Event


class Device(Protocol):
    """The real device a run watches, and its clocks."""

    type: str  # the torch device type of its tensors: "cuda"
    name: str  # what the report calls it: "NVIDIA H200"

    def now(self) -> float:
        """Host seconds (`time.perf_counter`)."""
        ...

    def drain(self) -> None:
        """Wait until the device has done all its queued work (`torch.cuda.synchronize`)."""
        ...

    def event(self) -> DeviceEvent: ...

    def used(self) -> bool:
        """Whether the run allocated anything on the device."""
        ...

    def utilization(self) -> Tuple[Optional[Callable[[], float]], str]:
        """A reader of the GPU's utilization in percent, or None and why not."""
        ...


class Timer:
    """The host's waits and the steps' marks of one run."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.marks: Dict[Clock, List[Tuple[float, Optional[DeviceEvent]]]] = {}

    def waited(self) -> float:
        """Drain the device; the seconds the host waited for it."""
        start = self.device.now()
        self.device.drain()
        return self.device.now() - start

    def timed(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Tuple[Any, float]:
        """`fn(*args, **kwargs)` and the host seconds it took."""
        start = self.device.now()
        result = fn(*args, **kwargs)
        return result, self.device.now() - start

    def tick(self, clock: Clock) -> None:
        """A step of `clock` ended."""
        marks = self.marks.setdefault(clock, [])
        if len(marks) >= MAX_MARKS:
            return
        event = self.device.event()
        event.record()
        marks.append((self.device.now(), event))

    def step_times(self, clock: Clock) -> Tuple[List[float], List[float]]:
        """Seconds per step of `clock`: the host's, and the device's (between the steps' events)."""
        marks = self.marks.get(clock, [])
        host = [b[0] - a[0] for a, b in zip(marks, marks[1:])]
        if len(marks) < 2:
            return host, []
        try:
            self.device.drain()
        except Exception:  # noqa: BLE001 - a device in error (the script's crash): the host's times only
            return host, []
        device = []
        for (_, a), (_, b) in zip(marks, marks[1:]):
            if a is not None and b is not None:
                device.append(a.elapsed_time(b) / 1000.0)
        return host, device


class Sampler:
    """The GPU's utilization, read every `interval` seconds from a thread of its own
    (`sample()` reads once; `stop()` takes a last reading when none was taken)."""

    def __init__(self, read: Callable[[], float], interval: float = 0.1) -> None:
        self.read = read
        self.interval = interval
        self.values: List[float] = []
        self.failed = ""
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def sample(self) -> None:
        try:
            self.values.append(float(self.read()))
        except Exception as exc:  # noqa: BLE001 - NVML errors end the sampling, with a note
            self.failed = f"{type(exc).__name__}: {exc}"
            self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="torchlint-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if not self.values and not self.failed:
            self.sample()


def summarize(
    device: Device,
    timer: Timer,
    clock: Clock,
    observations: Sequence[Observation],
    loaders: Tuple[float, int],
    sampler: Optional[Sampler],
    note: str = "",
) -> RunTimings:
    """The run's timings: steps, the syncs of the user's code (every observed site, reported
    or not), the loaders (`loaders`: seconds waited, batches), utilization."""
    host, on_device = timer.step_times(clock)
    syncs = [o for o in observations if o.code in SYNC_CODES and "wait_s" in dict(o.timings)]
    utilization = None
    samples = 0
    if sampler is not None:
        samples = len(sampler.values)
        utilization = statistics.fmean(sampler.values) if sampler.values else None
        if sampler.failed:
            note = f"GPU utilization sampling stopped: {sampler.failed}"
    return RunTimings(
        device=device.name,
        clock=clock,
        steps=len(host),
        step_s=statistics.median(host) if host else None,
        device_step_s=statistics.median(on_device) if on_device else None,
        sync_wait_s=sum(dict(o.timings)["wait_s"] for o in syncs),
        syncs=sum(o.count for o in syncs),
        sync_sites=len(syncs),
        loader_wait_s=loaders[0],
        batches=loaders[1],
        utilization=utilization,
        utilization_samples=samples,
        note=note,
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


_STEP = {Clock.OPTIMIZER: "optimizer step", Clock.BATCHES: "batch", Clock.FORWARDS: "forward call"}


def timings_line(t: RunTimings) -> str:
    """One line: "GPU timings (NVIDIA H200): step 12.3 ms (median of 19 optimizer steps; device 12.1 ms);
    the host waited 45.1 ms at 2 sync sites (40 syncs); loader wait 3.2 ms per batch (40 batches);
    GPU utilization 87% (52 NVML samples)"."""
    parts = []
    step = _STEP.get(t.clock, str(t.clock))
    if t.step_s is not None:
        device = f"; device {_ms(t.device_step_s)}" if t.device_step_s is not None else ""
        parts.append(f"step {_ms(t.step_s)} (median of {t.steps} {step} intervals{device})")
    else:
        parts.append(f"step time not measured (fewer than two {step}s)")
    if t.syncs:
        sites = "1 sync site" if t.sync_sites == 1 else f"{t.sync_sites} sync sites"
        parts.append(f"the host waited {_ms(t.sync_wait_s)} at {sites} ({t.syncs} syncs)")
    else:
        parts.append("no sync of your code was timed")
    if t.batches:
        parts.append(f"loader wait {_ms(t.loader_wait_s / t.batches)} per batch ({t.batches} batches)")
    if t.utilization is not None:
        parts.append(f"GPU utilization {t.utilization:.0f}% ({t.utilization_samples} NVML samples)")
    elif t.note:
        parts.append(t.note)
    return f"GPU timings ({t.device}): " + "; ".join(parts)
