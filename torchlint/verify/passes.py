"""What a measured window records, by pass (the harness runs the windows a
run asks for through TORCHLINT_VERIFY_PASSES, timing first):

- ``timing``: nothing extra (the harness's own wall time, samples/s and peak
  memory are the only measurements, so nothing perturbs them);
- ``profile``: a torch.profiler trace (CPU + CUDA activities). The profiler
  starts after the timing window and runs ``profile_settle`` steps before the
  window opens, so CUPTI's set-up and first-use costs stay outside; the trace
  is reduced by :mod:`torchlint.verify.busy` to the busy fraction inside the
  ``torchlint.window`` annotation, kernel/memcpy/memset counts, H2D copies and
  pinned vs pageable copies (kept at TORCHLINT_VERIFY_TRACE when that names a
  file). The window is short (``profile_s``, at most ``profile_max`` steps):
  a launch-bound script makes tens of thousands of events per step;
- ``sync``: ``torch.cuda.set_sync_debug_mode("warn")`` around the script's own
  body (not the harness's synchronize calls) with every warning recorded
  (``warnings.simplefilter("always")``): the number of synchronizing calls.

Runs in the fixture's process; torch comes from the harness.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Tuple

# The profiler's settling steps run only when a step is shorter than this: a
# longer step dwarfs CUPTI's first-use cost (and a CPU-bound step has no kernels).
SETTLE_BELOW_S = 0.25

PASSES = ("timing", "profile", "sync")
SYNC_MESSAGE = "synchronizing cuda operation"
# Per-step values derived from a window's counts (the window's step count varies with its time).
PER_STEP = {
    "kernels": "kernels_per_step",
    "h2d_copies": "h2d_per_step",
    "d2h_copies": "d2h_per_step",
    "sync_count": "syncs_per_step",
}


def _check(name: str) -> None:
    if name not in PASSES:
        raise ValueError(f"unknown pass {name!r}: expected one of {', '.join(PASSES)}")


@contextmanager
def around(h: Any, name: str) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """Around the whole window, synchronize calls included; yields the number
    of settling steps to run before the window opens and the dict the pass
    fills in when it ends."""
    _check(name)
    found: Dict[str, Any] = {}
    if name == "profile":
        settle = 1 if h.smoke else int(h.windows.get("profile_settle", 1))
        if h.step_s is not None and h.step_s >= SETTLE_BELOW_S:
            settle = 0
        with _profile(h, found):
            yield settle, found
    else:
        yield 0, found


@contextmanager
def inner(h: Any, name: str, found: Dict[str, Any]) -> Iterator[None]:
    """Around the script's own body only."""
    if name == "sync":
        with _sync(h, found):
            yield
    else:
        yield


def per_step(m: Dict[str, Any]) -> None:
    steps = m.get("steps") or 0
    for count, key in PER_STEP.items():
        if steps and m.get(count) is not None:
            m[key] = m[count] / steps
    if m.get("gpu_busy_us") is not None and m.get("samples"):
        m["gpu_busy_s_per_sample"] = m["gpu_busy_us"] / 1e6 / m["samples"]


@contextmanager
def _profile(h: Any, found: Dict[str, Any]) -> Iterator[None]:
    from torchlint.verify import busy

    torch = h.torch
    activities = [torch.profiler.ProfilerActivity.CPU]
    if h.cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        yield
    keep = os.environ.get("TORCHLINT_VERIFY_TRACE")
    if keep:
        prof.export_chrome_trace(keep)
        with open(keep, encoding="utf-8") as fh:
            trace = json.load(fh)
    else:
        fd, path = tempfile.mkstemp(prefix="torchlint-trace-", suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as fh:
                trace = json.load(fh)
        finally:
            os.unlink(path)
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    result = busy.analyze(trace)
    found.update(result)
    found["window_found"] = result.get("window_us") is not None
    found["trace_events"] = len(events)


def is_sync_warning(w: Any) -> bool:
    return SYNC_MESSAGE in str(getattr(w, "message", w)).lower()


@contextmanager
def _sync(h: Any, found: Dict[str, Any]) -> Iterator[None]:
    if not h.cuda:
        # No CUDA device: no CUDA call can synchronize (and the debug mode
        # needs a CUDA build).
        yield
        found["sync_count"] = 0
        return
    torch = h.torch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    found["sync_count"] = sum(1 for w in caught if is_sync_warning(w))
