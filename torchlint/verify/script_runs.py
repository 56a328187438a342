"""One run of one fixture script: a fresh ``python script.py`` process (or,
for `--smoke`, forked children of one parent), its environment, its
metrics line parsed into a `Run`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from torchlint.verify.fixture_meta import DERIVED, METRIC_PASS, ROOT, SCRIPTS, Fixture
from torchlint.verify.harness import MARK

DEFAULT_TIMEOUT = 180.0


EXCEPTION_RE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")


@dataclass
class Run:
    rule: str
    script: str  # "bad" | "fixed"
    passes: Tuple[str, ...]
    repeat: int
    rc: int = 0
    metrics: Optional[Dict[str, Any]] = None
    error: str = ""
    seconds: float = 0.0
    fixture: str = ""  # the fixture directory
    cut: bool = False  # killed by --time-budget or by a stop, not by its own doing

    @property
    def ok(self) -> bool:
        """The process succeeded and measured every window it was asked for."""
        return (
            self.rc == 0
            and self.metrics is not None
            and not self.error
            and all(self.window(p) is not None for p in self.passes)
        )

    def window(self, pass_name: str) -> Optional[Dict[str, Any]]:
        """The metrics of one window, None when it was not measured (or failed)."""
        if not self.metrics:
            return None
        w = (self.metrics.get("passes") or {}).get(pass_name)
        if not isinstance(w, dict) or "error" in w:
            return None
        return w

    def window_error(self, pass_name: str) -> str:
        w = ((self.metrics or {}).get("passes") or {}).get(pass_name)
        if isinstance(w, dict) and "error" in w:
            return str(w["error"])
        if pass_name in self.passes and w is None:
            return self.error or "not measured"
        return ""

    def value(self, metric: str) -> Optional[float]:
        if metric in DERIVED:
            return _derived(self, metric)
        w = self.window(METRIC_PASS.get(metric, "timing"))
        if w is None:
            return None
        value = w.get(metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _derived(run: Run, metric: str) -> Optional[float]:
    timing, profile = run.window("timing"), run.window("profile")
    if timing is None or profile is None:
        return None
    if metric == "busy_fraction_timed":
        per_sample, rate = profile.get("gpu_busy_s_per_sample"), timing.get("samples_per_s")
        if per_sample is None or not rate:
            return None
        return min(1.0, float(per_sample) * float(rate))
    if metric == "profiler_slowdown":
        fast, slow = timing.get("samples_per_s"), profile.get("samples_per_s")
        return float(fast) / float(slow) if fast and slow else None
    raise KeyError(metric)


def parse_metrics(stdout: str) -> Optional[Dict[str, Any]]:
    """The last metrics line a script printed (None when there is none)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                value = json.loads(line[len(MARK) :])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def child_env(
    passes: Sequence[str],
    smoke: bool,
    extra: Optional[Dict[str, str]] = None,
    windows: Sequence[Tuple[str, float]] = (),
) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["TORCHLINT_VERIFY_PASSES"] = ",".join(passes)
    env["TORCHLINT_VERIFY_WINDOWS"] = json.dumps(dict(windows))
    env.pop("TORCHLINT_VERIFY_COST", None)
    if smoke:
        env["TORCHLINT_SMOKE"] = "1"
        env.setdefault("OMP_NUM_THREADS", "1")
    else:
        env.pop("TORCHLINT_SMOKE", None)
    env.update(extra or {})
    return env


def run_script(
    fx: Fixture,
    which: str,
    passes: Sequence[str] = ("timing",),
    repeat: int = 0,
    smoke: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    python: str = sys.executable,
    env: Optional[Dict[str, str]] = None,
    launcher: Optional[Sequence[str]] = None,
) -> Run:
    run = Run(fx.rule, which, tuple(passes), repeat, fixture=str(fx.path))
    cmd = list(launcher or [python]) + [str(fx.script(which))] + (["--smoke"] if smoke else [])
    env = dict(env or {}, TORCHLINT_VERIFY_LAUNCHED=repr(time.time()))
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            cwd=str(fx.path),
            env=child_env(passes, smoke, env, fx.windows),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        run.seconds = time.perf_counter() - start
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        run.metrics = parse_metrics(out)  # the windows measured before the kill still count
        run.rc, run.error = -1, f"timed out after {timeout:g} s"
        return run
    run.seconds = time.perf_counter() - start
    return _finish(run, proc.returncode, proc.stdout, proc.stderr)


def _finish(run: Run, rc: int, stdout: str, stderr: str) -> Run:
    run.rc = rc
    run.metrics = parse_metrics(stdout)
    if rc != 0:
        lines = (stderr or stdout).strip().splitlines()
        tail = lines[-3:]
        # The exception that ended the script, even when messages at exit (workers, threads) follow it.
        raised = next((line for line in reversed(lines) if EXCEPTION_RE.match(line)), None)
        if raised is not None and raised not in tail:
            tail = [raised] + tail
        run.error = f"exit {rc}: " + " | ".join(tail)
    elif run.metrics is None:
        run.error = "no metrics line (the script must call h.run() or h.emit())"
    else:
        broken = [f"{p} window: {run.window_error(p)}" for p in run.passes if run.window(p) is None]
        if broken:
            run.error = "; ".join(broken)
    return run


def smoke_passes(fx: Fixture) -> Tuple[str, ...]:
    return tuple(fx.context_passes())


def smoke(
    fixtures: Sequence[Fixture],
    jobs: int = 0,
    progress: Optional[Callable[[Run], None]] = None,
    timeout: float = 300.0,
    fork: Optional[bool] = None,
) -> List[Run]:
    """Each script once, on the CPU, every window it can take, in parallel
    subprocesses; results in fixture order.

    On Linux the subprocesses are forked from one process that imported torch
    once (:mod:`torchlint.verify.forkrun`); TORCHLINT_SMOKE_FORK=0 (or
    fork=False) starts a fresh interpreter per script instead."""
    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    tasks = [(fx, which) for fx in fixtures for which in SCRIPTS]
    if fork is None:
        # Linux only: forking after `import torch` is not safe on macOS.
        fork = sys.platform.startswith("linux") and os.environ.get("TORCHLINT_SMOKE_FORK", "1") != "0"
    if fork:
        return _smoke_forked(tasks, jobs, progress, timeout)
    results: Dict[Tuple[str, str], Run] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(run_script, fx, which, smoke_passes(fx), 0, True, timeout): (fx, which) for fx, which in tasks
        }
        for fut in as_completed(futures):
            fx, which = futures[fut]
            run = fut.result()
            results[(str(fx.path), which)] = run
            if progress:
                progress(run)
    return [results[(str(fx.path), which)] for fx, which in tasks]


def _smoke_forked(
    tasks: Sequence[Tuple[Fixture, str]], jobs: int, progress: Optional[Callable[[Run], None]], timeout: float
) -> List[Run]:
    import tempfile

    runs = [Run(fx.rule, which, smoke_passes(fx), 0, fixture=str(fx.path)) for fx, which in tasks]
    with tempfile.TemporaryDirectory(prefix="torchlint-smoke-") as tmp:
        lines = []
        for i, (fx, which) in enumerate(tasks):
            env = child_env(smoke_passes(fx), True, None, fx.windows)
            lines.append(
                json.dumps(
                    {
                        "id": i,
                        "script": str(fx.script(which)),
                        "cwd": str(fx.path),
                        "env": env,
                        "out": os.path.join(tmp, f"{i}.out"),
                        "err": os.path.join(tmp, f"{i}.err"),
                    }
                )
            )
        server_err = os.path.join(tmp, "server.err")
        with open(server_err, "w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "torchlint.verify.forkrun", str(jobs), str(timeout)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                cwd=str(ROOT),
                env=child_env(("timing",), True),
            )
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("\n".join(lines) + "\n")
            proc.stdin.close()
            done = set()
            for line in proc.stdout:
                try:
                    msg = json.loads(line)
                    i = int(msg["id"])
                except (ValueError, KeyError, TypeError):
                    continue
                run = runs[i]
                run.seconds = float(msg.get("seconds", 0.0))
                _finish(run, int(msg["rc"]), _read(os.path.join(tmp, f"{i}.out")), _read(os.path.join(tmp, f"{i}.err")))
                if run.rc == -9:
                    run.error = f"timed out after {timeout:g} s (killed)"
                done.add(i)
                if progress:
                    progress(run)
            proc.wait()
        missing = [i for i in range(len(runs)) if i not in done]
        if missing:
            why = " | ".join(_read(server_err).strip().splitlines()[-3:]) or f"exit {proc.returncode}"
            for i in missing:
                runs[i].rc, runs[i].error = -1, f"smoke runner died before this script finished: {why}"
                if progress:
                    progress(runs[i])
    return runs


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""
