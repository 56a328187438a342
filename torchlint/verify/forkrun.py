"""Smoke runs without paying ``import torch`` once per script.

``python -m torchlint.verify.forkrun JOBS TIMEOUT`` imports torch and the
harness once, then reads one JSON task per line on stdin
(``{"id", "script", "cwd", "env", "out", "err"}``) and forks a child per
task, at most JOBS at a time. Each child starts from the same pristine,
already-imported parent (no torch op has run there, so no thread pool
exists), takes the task's environment, working directory and ``--smoke``
argv, sends its stdout/stderr to the given files and runs the script as
``__main__``. Each finished child is reported as a JSON line
``{"id", "rc", "seconds"}``.

Only ``--smoke`` uses this (on Linux; ``TORCHLINT_SMOKE_FORK=0`` turns it
off): measurements always start a fresh interpreter per run.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import time
import traceback
from typing import Any, Dict, Tuple


def _child(task: Dict[str, Any]) -> None:
    rc = 1
    try:
        os.chdir(task["cwd"])
        os.environ.clear()
        os.environ.update(task["env"])
        for fd, path in ((1, task["out"]), (2, task["err"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.stdin = open(os.devnull)
        script = task["script"]
        sys.argv = [script, "--smoke"]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)
        runpy.run_path(script, run_name="__main__")
        rc = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            rc = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            rc = 1
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def serve(jobs: int, timeout: float) -> None:
    try:
        import torch  # noqa: F401  (the point: import once, before forking)
    except ImportError:
        pass
    try:
        import torchlint.verify.harness  # noqa: F401
        import torchlint.verify.passes  # noqa: F401
    except ImportError:
        pass
    tasks = [json.loads(line) for line in sys.stdin if line.strip()]
    out = sys.stdout
    running: Dict[int, Tuple[Any, float]] = {}

    def report(pid: int, status: int) -> None:
        task_id, start = running.pop(pid)
        rc = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
        out.write(json.dumps({"id": task_id, "rc": rc, "seconds": time.perf_counter() - start}) + "\n")
        out.flush()

    def reap(block: bool) -> None:
        while running:
            now = time.perf_counter()
            for pid, (_, start) in list(running.items()):
                if now - start > timeout:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid:
                report(pid, status)
                continue
            if not block:
                return
            time.sleep(0.02)

    for task in tasks:
        while len(running) >= jobs:
            reap(block=False)
            if len(running) >= jobs:
                time.sleep(0.02)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(task)
        running[pid] = (task["id"], time.perf_counter())
    reap(block=True)


if __name__ == "__main__":
    serve(int(sys.argv[1]), float(sys.argv[2]))
