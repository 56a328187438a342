"""parallel_map: input order, fallbacks, exceptions, spawn-safety."""

from __future__ import annotations

import os

import pytest

from torchlint.files import parallel
from torchlint.files.parallel import chunk_size, effective_jobs, parallel_map, use_pool

from helpers import lint_source


def _square(x):
    return x * x


def _pid(_):
    return os.getpid()


def _boom(x):
    if x == 3:
        raise ValueError("three")
    return x


def _lint(item):
    path, text = item
    return lint_source(text, path)


@pytest.fixture
def always_pool(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_POOL_WEIGHT", 0)
    monkeypatch.setattr(parallel, "MIN_POOL_WEIGHT_SPAWN", 0)
    monkeypatch.setattr(parallel, "MIN_POOL_ITEMS", 2)


def test_results_keep_input_order_in_a_pool(always_pool):
    items = list(range(200, 0, -1))
    assert parallel_map(_square, items, jobs=2) == [x * x for x in items]


def test_pool_really_uses_other_processes(always_pool):
    pids = parallel_map(_pid, list(range(40)), jobs=2)
    assert any(p != os.getpid() for p in pids)


@pytest.mark.parametrize("jobs,items", [(1, list(range(50))), (2, [7]), (4, [])])
def test_falls_back_to_this_process(always_pool, jobs, items):
    assert parallel_map(_pid, items, jobs=jobs) == [os.getpid()] * len(items)


def test_small_inputs_stay_in_this_process():
    # default thresholds: a few small files are not worth a pool
    assert parallel_map(_pid, [1, 2, 3], jobs=2, weights=[100, 100, 100]) == [os.getpid()] * 3
    assert not use_pool(3, 2, [100, 100, 100])
    assert use_pool(3, 2, [parallel.MIN_POOL_WEIGHT, 1, 1])
    assert not use_pool(100, 2, [10] * 100, method="spawn")


def test_exceptions_propagate(always_pool):
    with pytest.raises(ValueError, match="three"):
        parallel_map(_boom, list(range(10)), jobs=2)
    with pytest.raises(ValueError, match="three"):
        parallel_map(_boom, list(range(10)), jobs=1)


def test_jobs_zero_means_cpu_count():
    assert effective_jobs(0) == max(1, os.cpu_count() or 1)
    assert effective_jobs(None) == effective_jobs(0)
    assert effective_jobs(3) == 3


def test_chunk_size_is_bounded():
    assert chunk_size(1, 2) == 1
    assert 1 <= chunk_size(10_000, 2) <= 32


@pytest.mark.slow
def test_findings_cross_the_process_boundary_under_spawn(always_pool, monkeypatch):
    monkeypatch.setenv("TORCHLINT_MP_START", "spawn")
    src = "import torch\nx = torch.randn(3).to('cuda')\n"
    items = [(f"f{i}.py", src if i % 2 else "x = 1\n") for i in range(6)]
    assert parallel_map(_lint, items, jobs=2) == [_lint(i) for i in items]
    assert parallel_map(_lint, items, jobs=2)[1][0].code == "TL104"


def test_unusable_pool_falls_back(always_pool, monkeypatch):
    class Broken:
        def __init__(self, *a, **k):
            raise OSError("no processes here")

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", Broken)
    assert parallel_map(_square, [1, 2, 3], jobs=2) == [1, 4, 9]


def _sleep_long(_: int) -> int:
    import time

    time.sleep(60)
    return 0


def test_stop_leaves_no_pool_thread_to_race_the_exit_hook():
    """Issue 27's Ctrl-C path: the pool's manager thread closes its wake-up
    pipe when the workers die, and the interpreter's exit hook writes to that
    pipe unlocked; a thread still closing it at exit printed "OSError: Bad file
    descriptor" after "interrupted". `_stop` ends the workers and that thread."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork"))
    for i in range(4):
        pool.submit(_sleep_long, i)
    manager = pool._executor_manager_thread
    workers = list(pool._processes.values())
    assert manager is not None and manager.is_alive() and workers
    parallel._stop(pool)
    assert not any(w.is_alive() for w in workers)
    assert not manager.is_alive()
