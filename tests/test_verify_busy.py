"""GPU busy fraction from synthetic Kineto traces (no torch, no GPU)."""

import pytest

from torchlint.verify import busy


def ev(cat, ts, dur, name="k", stream=7, device=0):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "ts": ts,
        "dur": dur,
        "pid": device,
        "tid": stream,
        "args": {"device": device, "stream": stream},
    }


def window(ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": busy.WINDOW_LABEL, "ts": ts, "dur": dur}


def test_union_merges_overlaps_and_touching_intervals():
    assert busy.union_length([(0, 10), (5, 15), (15, 20), (30, 31)]) == 21


def test_union_of_nested_and_unsorted_intervals():
    assert busy.union_length([(50, 60), (0, 100), (10, 20)]) == 100


def test_union_clips_to_window():
    assert busy.union_length([(-10, 5), (8, 12), (95, 200)], clip=(0, 100)) == 5 + 4 + 5


def test_union_of_nothing_is_zero():
    assert busy.union_length([]) == 0
    assert busy.union_length([(5, 5), (9, 3)]) == 0
    assert busy.union_length([(200, 300)], clip=(0, 100)) == 0


def test_busy_fraction_counts_overlap_across_streams_once():
    trace = {
        "traceEvents": [
            window(1000, 100),
            ev("kernel", 1000, 40, stream=7),
            ev("kernel", 1020, 40, stream=13),  # overlaps the first on another stream
            ev("gpu_memcpy", 1070, 10, name="Memcpy HtoD (Pageable -> Device)", stream=7),
            ev("gpu_memset", 1090, 5, name="Memset (Device)", stream=7),
        ]
    }
    out = busy.analyze(trace)
    assert out["busy_fraction"] == pytest.approx((60 + 10 + 5) / 100)
    assert out["kernels"] == 2 and out["memcpys"] == 1 and out["memsets"] == 1
    assert out["streams"] == 2
    assert out["window_us"] == 100 and out["gpu_busy_us"] == pytest.approx(75)


def test_busy_fraction_clips_activity_to_the_window():
    trace = [
        window(1000, 100),
        ev("kernel", 900, 150),  # 50 us inside
        ev("kernel", 1090, 50),  # 10 us inside
        ev("kernel", 2000, 50),  # outside: not counted at all
        ev("kernel", 500, 10),  # outside
    ]
    out = busy.analyze(trace)
    assert out["busy_fraction"] == pytest.approx(0.6)
    assert out["kernels"] == 2


def test_multiple_devices_and_streams_union():
    trace = [window(0, 100), ev("kernel", 0, 50, device=0, stream=7), ev("kernel", 50, 50, device=1, stream=7)]
    out = busy.analyze(trace)
    assert out["busy_fraction"] == pytest.approx(1.0)
    assert out["streams"] == 2


def test_fraction_never_exceeds_one():
    trace = [window(0, 10)] + [ev("kernel", 0, 10, stream=s) for s in range(5)]
    assert busy.analyze(trace)["busy_fraction"] == pytest.approx(1.0)


def test_empty_window_has_zero_busy_fraction():
    cpu_op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10, "dur": 5}
    out = busy.analyze({"traceEvents": [window(0, 100), cpu_op]})
    assert out["busy_fraction"] == 0.0
    assert out["kernels"] == 0 and out["streams"] == 0


def test_no_window_gives_no_fraction():
    out = busy.analyze([ev("kernel", 0, 10)])
    assert out["busy_fraction"] is None and out["window_us"] is None
    assert out["kernels"] == 1


def test_zero_length_window_gives_no_fraction():
    assert busy.analyze([window(10, 0), ev("kernel", 0, 20)])["busy_fraction"] is None


def test_gpu_side_annotation_is_not_the_window():
    trace = [
        {"ph": "X", "cat": "gpu_user_annotation", "name": busy.WINDOW_LABEL, "ts": 0, "dur": 1000},
        window(100, 100),
        ev("kernel", 100, 50),
    ]
    assert busy.find_window(trace) == (100, 200)
    assert busy.analyze(trace)["busy_fraction"] == pytest.approx(0.5)


def test_copy_kinds_pinned_and_pageable():
    trace = [
        window(0, 1000),
        ev("gpu_memcpy", 10, 5, name="Memcpy HtoD (Pinned -> Device)"),
        ev("gpu_memcpy", 20, 5, name="Memcpy HtoD (Pageable -> Device)"),
        ev("gpu_memcpy", 30, 5, name="Memcpy HtoD (Pageable -> Device)"),
        ev("gpu_memcpy", 40, 5, name="Memcpy DtoH (Device -> Pageable)"),
        ev("gpu_memcpy", 50, 5, name="Memcpy DtoD (Device -> Device)"),
        ev("gpu_memcpy", 5000, 5, name="Memcpy HtoD (Pinned -> Device)"),  # outside the window
    ]
    out = busy.analyze(trace)
    assert out["memcpys"] == 5
    assert out["h2d_copies"] == 3 and out["h2d_pinned"] == 1 and out["h2d_pageable"] == 2
    assert out["d2h_copies"] == 1


def test_events_that_are_not_complete_spans_are_ignored():
    trace = [
        window(0, 100),
        {"ph": "i", "cat": "kernel", "name": "k", "ts": 10},
        {"ph": "X", "cat": "kernel", "name": "bad", "ts": "x"},
    ]
    out = busy.analyze(trace)
    assert out["kernels"] == 0 and out["busy_fraction"] == 0.0


def test_harness_marks_the_window_busy_looks_for():
    from torchlint.verify import harness

    assert harness.WINDOW_LABEL == busy.WINDOW_LABEL
