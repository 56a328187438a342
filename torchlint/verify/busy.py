"""GPU busy fraction and copy counts from a torch.profiler (Kineto) Chrome trace.

Pure Python (no torch): the profile pass exports the trace and calls
:func:`analyze`; tests feed it synthetic traces.

The busy fraction of a measured window is the length of the union of every
kernel, memcpy and memset interval, on all streams and devices, clipped to the
window's own interval (the ``torchlint.window`` CPU annotation the harness
records), divided by the window's wall time. Overlapping work on several
streams therefore counts once: the fraction is "some GPU work was running",
never more than 1.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

Interval = Tuple[float, float]

WINDOW_LABEL = "torchlint.window"
KERNEL_CATS = frozenset({"kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "memset"})
WINDOW_CATS = frozenset({"user_annotation", "cpu_op", "python_function", "cpu_instant_event"})


def union_length(intervals: Iterable[Interval], clip: Optional[Interval] = None) -> float:
    """Total length covered by `intervals` (start, end), each clipped to `clip`."""
    pieces: List[Interval] = []
    for start, end in intervals:
        if clip is not None:
            start, end = max(start, clip[0]), min(end, clip[1])
        if end > start:
            pieces.append((start, end))
    pieces.sort()
    total = 0.0
    cur_start: Optional[float] = None
    cur_end = 0.0
    for start, end in pieces:
        if cur_start is None or start > cur_end:
            if cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_start is not None:
        total += cur_end - cur_start
    return total


def _events(trace: Any) -> Sequence[Mapping[str, Any]]:
    if isinstance(trace, Mapping):
        return trace.get("traceEvents", [])
    return trace


def _span(ev: Mapping[str, Any]) -> Optional[Interval]:
    if ev.get("ph", "X") != "X":
        return None
    try:
        ts = float(ev["ts"])
        dur = float(ev.get("dur", 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    return ts, ts + dur


def find_window(trace: Any, label: str = WINDOW_LABEL) -> Optional[Interval]:
    """The CPU-side interval of the harness window (the first one if several)."""
    found: List[Interval] = []
    for ev in _events(trace):
        if ev.get("name") != label or str(ev.get("cat", "")).lower() not in WINDOW_CATS:
            continue
        span = _span(ev)
        if span is not None:
            found.append(span)
    return min(found) if found else None


def _overlaps(span: Interval, window: Interval) -> bool:
    return span[1] > window[0] and span[0] < window[1] or (span[0] == span[1] and window[0] <= span[0] <= window[1])


def analyze(trace: Any, window: Optional[Interval] = None, label: str = WINDOW_LABEL) -> Dict[str, Any]:
    """Metrics of the GPU activity inside the window.

    Returns busy_fraction (None when no window was found or it has no length),
    gpu_busy_us, window_us, kernels, memcpys, memsets, h2d_copies, d2h_copies,
    h2d_pinned, h2d_pageable, streams. Counts are of activities overlapping the
    window.
    """
    if window is None:
        window = find_window(trace, label)
    busy: List[Interval] = []
    counts = {
        "kernels": 0,
        "memcpys": 0,
        "memsets": 0,
        "h2d_copies": 0,
        "d2h_copies": 0,
        "h2d_pinned": 0,
        "h2d_pageable": 0,
    }
    streams = set()
    for ev in _events(trace):
        cat = str(ev.get("cat", "")).lower()
        if cat in KERNEL_CATS:
            kind = "kernels"
        elif cat in MEMCPY_CATS:
            kind = "memcpys"
        elif cat in MEMSET_CATS:
            kind = "memsets"
        else:
            continue
        span = _span(ev)
        if span is None:
            continue
        if window is not None and not _overlaps(span, window):
            continue
        busy.append(span)
        counts[kind] += 1
        args = ev.get("args") or {}
        streams.add((str(args.get("device", ev.get("pid", ""))), str(args.get("stream", ev.get("tid", "")))))
        if kind == "memcpys":
            name = str(ev.get("name", ""))
            if "HtoD" in name:
                counts["h2d_copies"] += 1
                if "Pinned" in name:
                    counts["h2d_pinned"] += 1
                elif "Pageable" in name:
                    counts["h2d_pageable"] += 1
            elif "DtoH" in name:
                counts["d2h_copies"] += 1
    out: Dict[str, Any] = dict(counts)
    out["streams"] = len(streams)
    if window is None:
        out.update(busy_fraction=None, gpu_busy_us=union_length(busy), window_us=None)
        return out
    width = window[1] - window[0]
    gpu = union_length(busy, clip=window)
    out["gpu_busy_us"] = gpu
    out["window_us"] = width
    out["busy_fraction"] = gpu / width if width > 0 else None
    return out
