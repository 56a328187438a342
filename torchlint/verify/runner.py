"""Run fixture pairs in fresh subprocesses and collect their metrics.

Every run of every script is its own ``python script.py`` process (the sync
debug mode, the caching allocator and cudnn's autotuner are process-global),
bad and fixed alternate (bad first on even repeats, fixed first on odd ones,
so drift does not favour either), and each repeat runs:

- the ``timing`` pass (no instrumentation: wall time, samples/s, peak memory;
  NVML utilization is sampled from *this* process, never the child's);
- the pass that yields the rule's declared metric when it is not timing
  (``profile`` for busy_fraction / h2d_copies, ``sync`` for sync_count);
- on the first repeat only, the remaining passes, for context in the report.

No torch import here: the children import it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from torchlint.verify import verdict as V
from torchlint.verify.harness import MARK
from torchlint.verify.passes import PASSES

try:  # Python 3.11+
    import tomllib
except ImportError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ("bad", "fixed")
METRIC_PASS = {
    "wall_s": "timing", "samples_per_s": "timing", "peak_mem_bytes": "timing", "samples": "timing",
    "busy_fraction": "profile", "kernels": "profile", "memcpys": "profile", "memsets": "profile",
    "h2d_copies": "profile", "d2h_copies": "profile", "h2d_pinned": "profile", "h2d_pageable": "profile",
    "streams": "profile", "sync_count": "sync", "nvml_util_percent": "timing",
}
REQUIRED_META = ("rule", "name", "summary", "metric", "direction", "threshold")


class FixtureError(Exception):
    pass


@dataclass(frozen=True)
class Fixture:
    rule: str
    name: str
    summary: str
    metric: str
    direction: str
    threshold: float
    unsafe_fix: bool
    path: Path
    skip_passes: Tuple[str, ...] = ()

    @property
    def metric_pass(self) -> str:
        return METRIC_PASS[self.metric]

    def script(self, which: str) -> Path:
        return self.path / f"{which}.py"


def default_fixtures_dir() -> Path:
    here = ROOT / "fixtures"
    return here if here.is_dir() else Path.cwd() / "fixtures"


def load_fixture(path: Path) -> Fixture:
    meta_path = path / "meta.toml"
    try:
        meta = tomllib.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FixtureError(f"{meta_path}: {exc}") from None
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise FixtureError(f"{meta_path}: missing {', '.join(missing)}")
    if meta["metric"] not in V.METRICS:
        raise FixtureError(f"{meta_path}: metric {meta['metric']!r} is not one of {', '.join(V.METRICS)}")
    if meta["direction"] not in ("up", "down"):
        raise FixtureError(f"{meta_path}: direction must be 'up' or 'down'")
    threshold = meta["threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold < 0:
        raise FixtureError(f"{meta_path}: threshold must be a non-negative number")
    skip = tuple(meta.get("skip_passes", ()))
    for name in skip:
        if name not in PASSES or name == "timing" or name == METRIC_PASS[meta["metric"]]:
            raise FixtureError(f"{meta_path}: cannot skip pass {name!r}")
    for which in SCRIPTS:
        if not (path / f"{which}.py").is_file():
            raise FixtureError(f"{path}: missing {which}.py")
    return Fixture(str(meta["rule"]), str(meta["name"]), str(meta["summary"]), str(meta["metric"]),
                   str(meta["direction"]), float(threshold), bool(meta.get("unsafe_fix", False)), path, skip)


def discover(fixtures_dir: Path, rules: Sequence[str] = ()) -> List[Fixture]:
    """Every `<dir>/*/meta.toml` fixture, sorted by rule code; filtered by `rules`."""
    if not fixtures_dir.is_dir():
        raise FixtureError(f"no fixtures directory at {fixtures_dir}")
    found = [load_fixture(p) for p in sorted(fixtures_dir.iterdir()) if (p / "meta.toml").is_file()]
    if rules:
        wanted = {r.upper() for r in rules}
        unknown = sorted(wanted - {f.rule.upper() for f in found})
        if unknown:
            raise FixtureError(f"no fixture for {', '.join(unknown)} in {fixtures_dir}")
        found = [f for f in found if f.rule.upper() in wanted]
    return sorted(found, key=lambda f: (f.rule, f.name))


@dataclass
class Run:
    rule: str
    script: str          # "bad" | "fixed"
    pass_name: str
    repeat: int
    rc: int = 0
    metrics: Optional[Dict[str, Any]] = None
    error: str = ""
    seconds: float = 0.0
    fixture: str = ""    # the fixture directory

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.metrics is not None and not self.error

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def parse_metrics(stdout: str) -> Optional[Dict[str, Any]]:
    """The last metrics line a script printed (None when there is none)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                value = json.loads(line[len(MARK):])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def child_env(pass_name: str, smoke: bool, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["TORCHLINT_VERIFY_PASS"] = pass_name
    if smoke:
        env["TORCHLINT_SMOKE"] = "1"
        env.setdefault("OMP_NUM_THREADS", "1")
    else:
        env.pop("TORCHLINT_SMOKE", None)
    env.update(extra or {})
    return env


def run_script(fx: Fixture, which: str, pass_name: str = "timing", repeat: int = 0, smoke: bool = False,
               timeout: float = 600.0, python: str = sys.executable, env: Optional[Dict[str, str]] = None) -> Run:
    run = Run(fx.rule, which, pass_name, repeat, fixture=str(fx.path))
    cmd = [python, str(fx.script(which))] + (["--smoke"] if smoke else [])
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=str(fx.path), env=child_env(pass_name, smoke, env), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        run.rc, run.error = -1, f"timed out after {timeout:g} s"
        run.seconds = time.perf_counter() - start
        return run
    run.seconds = time.perf_counter() - start
    return _finish(run, proc.returncode, proc.stdout, proc.stderr)


def _finish(run: Run, rc: int, stdout: str, stderr: str) -> Run:
    run.rc = rc
    run.metrics = parse_metrics(stdout)
    if rc != 0:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        run.error = f"exit {rc}: " + " | ".join(tail)
    elif run.metrics is None:
        run.error = "no metrics line (the script must call h.emit())"
    return run


def plan(fixtures: Sequence[Fixture], repeats: int) -> List[Tuple[Fixture, int, str, str]]:
    """(fixture, repeat, pass, script) in execution order."""
    steps: List[Tuple[Fixture, int, str, str]] = []
    for fx in fixtures:
        for r in range(repeats):
            order = SCRIPTS if r % 2 == 0 else SCRIPTS[::-1]
            passes = ["timing"]
            if fx.metric_pass != "timing":
                passes.append(fx.metric_pass)
            if r == 0:
                passes += [p for p in PASSES if p not in passes and p not in fx.skip_passes]
            for p in passes:
                for which in order:
                    steps.append((fx, r, p, which))
    return steps


class NvmlSampler:
    """Samples GPU utilization from this (the parent) process. Optional: a
    cross-check only, never a verdict. Every failure leaves it inert."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.samples: List[Tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._nvml: Any = None
        self._handle: Any = None

    def start(self) -> bool:
        try:
            import pynvml

            pynvml.nvmlInit()
            index = 0
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
            if visible.isdigit():
                index = int(visible)
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
        except Exception:
            return False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu
                self.samples.append((time.time(), float(util)))
            except Exception:
                return
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    def mean(self, start: Optional[float], end: Optional[float]) -> Optional[float]:
        if start is None or end is None:
            return None
        xs = [u for t, u in list(self.samples) if start <= t <= end]
        return sum(xs) / len(xs) if xs else None


def measure(fixtures: Sequence[Fixture], repeats: int = 5, progress: Optional[Callable[[Run], None]] = None,
            nvml: Optional[NvmlSampler] = None, timeout: float = 600.0,
            traces: Optional[Path] = None) -> Dict[str, List[Run]]:
    """Every planned run, sequentially (one GPU, one process at a time); keyed by fixture directory.
    With `traces`, each profile pass keeps its Chrome trace there."""
    runs: Dict[str, List[Run]] = {str(fx.path): [] for fx in fixtures}
    if traces is not None:
        traces.mkdir(parents=True, exist_ok=True)
    for fx, r, p, which in plan(fixtures, repeats):
        extra = None
        if traces is not None and p == "profile":
            name = f"{fx.path.name}-{which}-r{r}.json"
            extra = {"TORCHLINT_VERIFY_TRACE": str((traces / name).resolve())}
        run = run_script(fx, which, p, r, smoke=False, timeout=timeout, env=extra)
        if nvml is not None and run.metrics is not None and p == "timing":
            util = nvml.mean(run.metrics.get("window_start_unix"), run.metrics.get("window_end_unix"))
            if util is not None:
                run.metrics["nvml_util_percent"] = util
        runs[str(fx.path)].append(run)
        if progress:
            progress(run)
    return runs


def smoke(fixtures: Sequence[Fixture], jobs: int = 0, progress: Optional[Callable[[Run], None]] = None,
          timeout: float = 300.0, fork: Optional[bool] = None) -> List[Run]:
    """Each script once, on the CPU, in parallel subprocesses; results in fixture order.

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
        futures = {pool.submit(run_script, fx, which, "timing", 0, True, timeout): (fx, which) for fx, which in tasks}
        for fut in as_completed(futures):
            fx, which = futures[fut]
            run = fut.result()
            results[(str(fx.path), which)] = run
            if progress:
                progress(run)
    return [results[(str(fx.path), which)] for fx, which in tasks]


def _smoke_forked(tasks: Sequence[Tuple[Fixture, str]], jobs: int, progress: Optional[Callable[[Run], None]],
                  timeout: float) -> List[Run]:
    import tempfile

    env = child_env("timing", True)
    runs = [Run(fx.rule, which, "timing", 0, fixture=str(fx.path)) for fx, which in tasks]
    with tempfile.TemporaryDirectory(prefix="torchlint-smoke-") as tmp:
        lines = []
        for i, (fx, which) in enumerate(tasks):
            lines.append(json.dumps({"id": i, "script": str(fx.script(which)), "cwd": str(fx.path), "env": env,
                                     "out": os.path.join(tmp, f"{i}.out"), "err": os.path.join(tmp, f"{i}.err")}))
        server_err = os.path.join(tmp, "server.err")
        with open(server_err, "w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "torchlint.verify.forkrun", str(jobs), str(timeout)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                    cwd=str(ROOT), env=env)
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


# ---------------------------------------------------------------------------
# Aggregation and verdicts


def metric_values(runs: Sequence[Run], script: str, metric: str) -> List[Optional[float]]:
    source = METRIC_PASS.get(metric, "timing")
    out: List[Optional[float]] = []
    for run in runs:
        if run.script == script and run.pass_name == source and run.ok:
            value = run.metrics.get(metric) if run.metrics else None
            out.append(None if value is None else float(value))
    return out


def mechanism(fx: Fixture, runs: Sequence[Run], expected_device: str) -> Tuple[bool, str]:
    """The conditions under which the declared metric means what the rule says."""
    mine = [r for r in runs if r.pass_name in ("timing", fx.metric_pass)]
    failed = [r for r in mine if not r.ok]
    if failed:
        r = failed[0]
        return False, f"{r.script}.py {r.pass_name} pass (repeat {r.repeat}) failed: {r.error}"
    if not mine:
        return False, "no runs"
    devices = sorted({str((r.metrics or {}).get("device", "?")) for r in mine})
    if any(not d.startswith(expected_device) for d in devices):
        return False, f"ran on {', '.join(devices)}, expected {expected_device}"
    for which in SCRIPTS:
        if not any(v for v in metric_values(runs, which, "samples")):
            return False, f"{which}.py counted no samples (h.count)"
    bad = [v for v in metric_values(runs, "bad", fx.metric) if v is not None]
    fixed = [v for v in metric_values(runs, "fixed", fx.metric) if v is not None]
    if fx.metric == "busy_fraction":
        for which in SCRIPTS:
            pruns = [r for r in runs if r.script == which and r.pass_name == "profile" and r.ok]
            if not all((r.metrics or {}).get("window_found") for r in pruns):
                return False, f"{which}.py: the profiler trace has no torchlint.window annotation"
            if expected_device == "cuda" and not any((r.metrics or {}).get("kernels") for r in pruns):
                return False, f"{which}.py: no GPU kernel in the window"
    elif fx.metric == "h2d_copies" and not any(bad):
        return False, "bad.py makes no host-to-device copy in the window: nothing for the fix to remove"
    elif fx.metric == "sync_count" and not any(bad):
        return False, "bad.py makes no synchronizing call in the window: nothing for the fix to remove"
    elif fx.metric == "peak_mem_bytes" and not (any(bad) and any(fixed)):
        return False, "peak memory was not recorded"
    return True, ""


CONTEXT_METRICS = ("wall_s", "samples_per_s", "peak_mem_bytes", "busy_fraction", "kernels", "memcpys",
                   "memsets", "h2d_copies", "h2d_pinned", "h2d_pageable", "d2h_copies", "sync_count",
                   "nvml_util_percent")


def rule_result(fx: Fixture, runs: Sequence[Run], expected_device: str = "cuda",
                root: Optional[Path] = None) -> Dict[str, Any]:
    bad = V.summarize(metric_values(runs, "bad", fx.metric))
    fixed = V.summarize(metric_values(runs, "fixed", fx.metric))
    ok, why = mechanism(fx, runs, expected_device)
    v = V.decide(fx.metric, fx.direction, fx.threshold, bad, fixed, ok, why)
    result = fixture_header(fx, root)
    result.update(
        bad=bad.to_dict() if bad else None,
        fixed=fixed.to_dict() if fixed else None,
        change=v.change, effect=v.effect, noise=v.noise,
        mechanism={"ok": ok, "reason": why},
        verdict=v.verdict, reason=v.reason,
        metrics=context(runs),
        errors=[f"{r.script}.py {r.pass_name} pass (repeat {r.repeat}): {r.error}" for r in runs if not r.ok],
    )
    return result


def context(runs: Sequence[Run]) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for metric in CONTEXT_METRICS:
        row = {}
        for which in SCRIPTS:
            s = V.summarize(metric_values(runs, which, metric))
            if s is not None:
                row[which] = {"median": s.median, "spread": s.spread, "n": s.n}
        if row:
            out[metric] = row
    return out


def fixture_header(fx: Fixture, root: Optional[Path] = None) -> Dict[str, Any]:
    where = str(fx.path)
    for base in (ROOT, root or Path.cwd()):  # repository-relative when the fixture is in this checkout
        try:
            where = fx.path.resolve().relative_to(base.resolve()).as_posix()
            break
        except ValueError:
            continue
    return {
        "rule": fx.rule, "name": fx.name, "fixture": where, "summary": fx.summary, "metric": fx.metric,
        "direction": fx.direction, "threshold": fx.threshold,
        "threshold_unit": "points" if V.is_points(fx.metric) else "relative",
    }


def skipped_result(fx: Fixture, reason: str, root: Optional[Path] = None) -> Dict[str, Any]:
    result = fixture_header(fx, root)
    result.update(bad=None, fixed=None, change=None, effect=None, noise=None,
                  mechanism=None, verdict=V.SKIPPED, reason=reason, metrics={}, errors=[])
    return result


def smoke_result(fx: Fixture, runs: Sequence[Run], root: Optional[Path] = None) -> Dict[str, Any]:
    result = fixture_header(fx, root)
    mine = [r for r in runs if r.fixture == str(fx.path)]
    failed = [r for r in mine if not r.ok]
    result.update(
        verdict="smoke-ok" if not failed else "smoke-failed",
        reason="; ".join(f"{r.script}.py: {r.error}" for r in failed),
        runs=[{"script": r.script, "ok": r.ok, "seconds": round(r.seconds, 3), "error": r.error,
               "metrics": r.metrics} for r in mine],
    )
    return result
