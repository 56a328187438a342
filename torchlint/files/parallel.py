"""Run a function over many items in a process pool, results in input order.

`parallel_map(fn, items, jobs)` is `[fn(x) for x in items]`, spread over
`jobs` processes (0: one per CPU). `fn` must be a module-level function and the
items and results plain picklable data (paths, bytes, `FileResult`s), so it
works under the "spawn" and "forkserver" start methods as well as "fork".

A pool has a fixed cost, so it is used only when it can win: more than one
job, more than one item, and enough work. Work is measured by `weights` (the
runner passes file sizes in bytes) when given, else by item count. Measured on
this project's 2-core machine (docs/performance.md): linting runs at about
400 KB of source per CPU-second; a forked pool of 2 workers costs about 0.08 s
to start, a spawned one (each worker imports LibCST and torchlint) 0.6-2 s.
So below MIN_POOL_WEIGHT bytes (about 0.3 s of work) with "fork", or
MIN_POOL_WEIGHT_SPAWN bytes otherwise, one process is as fast or faster.

Ctrl-C: the terminal sends SIGINT to every process of the group, workers
included. Workers ignore it (from the moment they exist: the pool is started
with SIGINT deferred in this process, and each worker's initializer ignores
it), so no worker ever raises KeyboardInterrupt or prints a traceback; this
process gets it, stops the workers and raises KeyboardInterrupt once, which
the command line reports in one line.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, List, Optional, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Total weight (bytes of source) below which a pool is not worth starting.
MIN_POOL_WEIGHT = 128 * 1024
MIN_POOL_WEIGHT_SPAWN = 1024 * 1024
# Without weights: fewer items than this run in one process.
MIN_POOL_ITEMS = 8


def effective_jobs(jobs: Optional[int]) -> int:
    """`jobs` as a worker count: None or 0 means one per CPU (at least 1)."""
    if not jobs or jobs < 0:
        return max(1, os.cpu_count() or 1)
    return jobs


def use_pool(n_items: int, jobs: int, weights: Optional[Sequence[int]] = None, method: str = "fork") -> bool:
    """Whether a pool of `jobs` workers is worth it for this input."""
    if jobs <= 1 or n_items <= 1:
        return False
    if weights is not None:
        return sum(weights) >= (MIN_POOL_WEIGHT if method == "fork" else MIN_POOL_WEIGHT_SPAWN)
    return n_items >= MIN_POOL_ITEMS


def chunk_size(n_items: int, jobs: int) -> int:
    """Items per task sent to a worker: small enough that uneven file sizes
    balance out (about 8 chunks per worker), large enough to amortise the IPC."""
    return max(1, min(32, n_items // (jobs * 8)))


def _context():
    # "fork" is by far the cheapest where it is safe (Linux); elsewhere use
    # the platform default. TORCHLINT_MP_START overrides (tests use "spawn").
    method = os.environ.get("TORCHLINT_MP_START")
    if method:
        return multiprocessing.get_context(method)
    if "fork" in multiprocessing.get_all_start_methods() and os.name == "posix" and not _is_macos():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _is_macos() -> bool:
    import sys

    return sys.platform == "darwin"


def _ignore_interrupts() -> None:
    """Worker initializer: SIGINT is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _init_worker(initializer: Optional[Callable[..., None]], initargs: tuple) -> None:
    """Worker initializer: ignore SIGINT, then the caller's own (once per worker)."""
    _ignore_interrupts()
    if initializer is not None:
        initializer(*initargs)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Drop the queued work and end the workers now, without waiting for the
    items they are on.

    Before Python 3.14 there is no public way to end the workers: their list
    (`_processes`) is read before `shutdown()`, which sets it to None; read
    after, no worker would be terminated and the process would wait at exit
    for the items they are on (issue 27: 16-17 s after "interrupted").
    Its manager thread, read before `shutdown()` too, is joined."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        try:
            proc.terminate()
        except (OSError, AttributeError):
            pass
    for proc in processes:
        proc.join(timeout=5)
    # The pool's manager thread closes its wake-up pipe when it sees the
    # workers gone; the interpreter's exit hook writes to that pipe without a
    # lock. Left running, the two race and the exit prints "OSError: Bad file
    # descriptor" after "interrupted". Joined here, the pipe is closed (and
    # the hook's write skipped) before the exit hook runs.
    if manager is not None:
        manager.join(timeout=5)


def parallel_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    jobs: Optional[int] = 0,
    weights: Optional[Sequence[int]] = None,
    initializer: Optional[Callable[..., None]] = None,
    initargs: tuple = (),
) -> List[R]:
    """`[fn(x) for x in items]`, in a process pool when that pays (see module docs).

    `initializer(*initargs)` runs once in each worker before its first item
    (state shared by every item, sent once per worker, not once per item); it
    does not run in this process, which holds that state already.

    The result order is the input order whatever the scheduling. An exception
    raised by `fn` propagates. If the pool itself cannot be used (no
    /dev/shm, a sandbox forbidding processes, a worker killed), the remaining
    work runs in this process instead. A KeyboardInterrupt stops the workers
    and propagates.
    """
    items = list(items)
    n_jobs = min(effective_jobs(jobs), len(items)) if items else 1
    ctx = _context()
    if not use_pool(len(items), n_jobs, weights, ctx.get_start_method()):
        return [fn(x) for x in items]
    main = threading.current_thread() is threading.main_thread()
    interrupted: List[int] = []
    previous = signal.getsignal(signal.SIGINT) if main else None
    if main:
        signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    pool: Optional[ProcessPoolExecutor] = None
    try:
        pool = ProcessPoolExecutor(
            max_workers=n_jobs, mp_context=ctx, initializer=_init_worker, initargs=(initializer, initargs)
        )
        # Workers are started while submitting: with SIGINT deferred here, a
        # forked worker never holds Python's KeyboardInterrupt handler.
        results = pool.map(fn, items, chunksize=chunk_size(len(items), n_jobs))
    except (BrokenProcessPool, OSError, PermissionError, NotImplementedError):
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        return [fn(x) for x in items]
    finally:
        if main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
    try:
        if interrupted:
            raise KeyboardInterrupt
        out = list(results)
    except KeyboardInterrupt:
        _stop(pool)
        raise
    except (BrokenProcessPool, OSError, PermissionError, NotImplementedError):
        pool.shutdown(wait=True, cancel_futures=True)
        return [fn(x) for x in items]
    pool.shutdown(wait=True)
    return out
