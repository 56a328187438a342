"""What the measured window records, by pass (TORCHLINT_VERIFY_PASS):

- ``timing``: nothing extra (the harness's own wall time, samples/s and peak
  memory are the only measurements, so nothing perturbs them);
- ``profile``: a torch.profiler trace (CPU + CUDA activities) around the whole
  window, exported as a Chrome trace and reduced by :mod:`torchlint.verify.busy`
  to the busy fraction, kernel/memcpy/memset counts, H2D copies and pinned vs
  pageable copies (kept at TORCHLINT_VERIFY_TRACE when that names a file);
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
from typing import Any, Iterator

PASSES = ("timing", "profile", "sync")
SYNC_MESSAGE = "synchronizing cuda operation"


def _check(name: str) -> None:
    if name not in PASSES:
        raise ValueError(f"TORCHLINT_VERIFY_PASS={name!r}: expected one of {', '.join(PASSES)}")


@contextmanager
def instrument(h: Any) -> Iterator[None]:
    """Around the whole window, synchronize calls included."""
    _check(h.pass_name)
    if h.pass_name == "profile":
        with _profile(h):
            yield
    else:
        yield


@contextmanager
def inner(h: Any) -> Iterator[None]:
    """Around the script's own body only."""
    if h.pass_name == "sync":
        with _sync(h):
            yield
    else:
        yield


@contextmanager
def _profile(h: Any) -> Iterator[None]:
    from torchlint.verify import busy

    torch = h.torch
    activities = [torch.profiler.ProfilerActivity.CPU]
    if h.cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        yield
    keep = os.environ.get("TORCHLINT_VERIFY_TRACE")
    if keep:
        path = keep
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as fh:
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
    found = busy.analyze(trace)
    h.metrics.update(found)
    h.metrics["window_found"] = found.get("window_us") is not None


def is_sync_warning(w: Any) -> bool:
    return SYNC_MESSAGE in str(getattr(w, "message", w)).lower()


@contextmanager
def _sync(h: Any) -> Iterator[None]:
    if not h.cuda:
        # No CUDA device: no CUDA call can synchronize (and the debug mode
        # needs a CUDA build).
        yield
        h.metrics["sync_count"] = 0
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
    h.metrics["sync_count"] = sum(1 for w in caught if is_sync_warning(w))
