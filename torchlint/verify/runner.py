"""Run fixture pairs in fresh subprocesses and collect their metrics.

Every run is its own ``python script.py`` process (the sync debug mode, the
caching allocator and cudnn's autotuner are process-global) that measures one
script at one repeat: after its warm-up it runs the windows the run asks for,
timing first (so no instrumentation precedes a timing), then profile, then
sync (see :mod:`torchlint.verify.harness`). Bad and fixed alternate (bad
first on even repeats, fixed first on odd ones, so drift does not favour
either). Each repeat asks for:

- the ``timing`` window (no instrumentation: wall time, samples/s, peak
  memory; NVML utilization is sampled from *this* process, never the child's);
- the window that yields the rule's declared metric when it is not timing
  (``profile`` for busy_fraction / h2d_copies, ``sync`` for sync_count);
- on the first repeat only, the remaining windows, for context and for the
  fixture's mechanism checks.

No torch import here: the children import it.
"""

from __future__ import annotations

import json
import operator
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from torchlint.verify import verdict as V
from torchlint.verify.harness import DEFAULT_WINDOWS, MARK, PASSES

try:  # Python 3.11+
    import tomllib
except ImportError:  # pragma: no cover
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ImportError:  # a bare Python 3.10 (as a GPU machine's image may be): pip's own copy
        from pip._vendor import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
PACKAGED_FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCRIPTS = ("bad", "fixed")
METRIC_PASS = {
    "wall_s": "timing",
    "samples_per_s": "timing",
    "peak_mem_bytes": "timing",
    "samples": "timing",
    "steps": "timing",
    "nvml_util_percent": "timing",
    "sm_clock_mhz_start": "timing",
    "sm_clock_mhz_end": "timing",
    "busy_fraction": "profile",
    "kernels": "profile",
    "memcpys": "profile",
    "memsets": "profile",
    "h2d_copies": "profile",
    "d2h_copies": "profile",
    "h2d_pinned": "profile",
    "h2d_pageable": "profile",
    "streams": "profile",
    "kernels_per_step": "profile",
    "h2d_per_step": "profile",
    "d2h_per_step": "profile",
    "gpu_busy_s_per_sample": "profile",
    "trace_events": "profile",
    "sync_count": "sync",
    "syncs_per_step": "sync",
}
# Derived from two windows of the same run: (needs these passes).
DERIVED = {
    # GPU busy time per sample from the trace x samples/s of the uninstrumented timing window: the busy
    # fraction the loop would show without the profiler's host overhead (capped at 1).
    "busy_fraction_timed": ("timing", "profile"),
    # How much the profiler slowed the loop down (timing samples/s / profile samples/s).
    "profiler_slowdown": ("timing", "profile"),
}
REQUIRED_META = ("rule", "name", "summary", "metric", "direction", "threshold")
DEFAULT_TIMEOUT = 180.0
CHECK_RE = re.compile(r"^\s*(bad|fixed)\.(\w+)\s*(>=|<=|==|!=|>|<)\s*(?:(bad|fixed)\.(\w+)|(-?[0-9.eE+-]+))\s*$")
EXCEPTION_RE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")
OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne}


class FixtureError(Exception):
    pass


class Certainty(Enum):
    """How sure we are, before measuring, that a fixture shows its rule's effect
    (meta.toml ``certainty``). Runs go least certain first, so a time limit cuts
    the rules we are surest of."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return list(Certainty).index(self)


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
    why: str = ""
    checks: Tuple[str, ...] = ()
    windows: Tuple[Tuple[str, float], ...] = ()
    certainty: Certainty = Certainty.MEDIUM
    # The error bad.py stops with on a GPU (meta.toml `bad_error`): the verdict is
    # then "bad crashes, fixed runs" instead of a comparison of the metric.
    bad_error: str = ""
    # GPUs the effect needs (meta.toml `min_gpus`): on a machine with fewer, verify reports
    # the rule as skipped with that reason instead of running it (see `too_few_gpus`).
    min_gpus: int = 1
    # Why the fixture is measured in a GPU session of its own, outside the one-call session
    # (meta.toml `own_session`): a cost the CPU-measured plan cannot estimate, such as
    # compiling on the GPU machine. Empty: it is in the session.
    own_session: str = ""

    @property
    def metric_pass(self) -> str:
        return METRIC_PASS[self.metric]

    def script(self, which: str) -> Path:
        return self.path / f"{which}.py"

    def context_passes(self) -> List[str]:
        return [p for p in PASSES if p not in self.skip_passes]


def default_fixtures_dir() -> Path:
    """This checkout's fixtures/ when running from the repository, else the
    copy shipped in the installed package (torchlint/verify/fixtures)."""
    for candidate in (ROOT / "fixtures", PACKAGED_FIXTURES):
        if candidate.is_dir() and any((p / "meta.toml").is_file() for p in candidate.iterdir()):
            return candidate
    raise FixtureError(
        f"no fixtures found: neither {ROOT / 'fixtures'} (a checkout) nor {PACKAGED_FIXTURES} "
        "(the installed package) holds fixtures; point --fixtures at a directory of fixture pairs"
    )


def parse_check(text: str) -> Tuple[str, str, str, Any]:
    """'bad.h2d_pageable > 0' -> ('bad', 'h2d_pageable', '>', 0.0); the right side
    may name a metric of a script: ('fixed', 'samples_per_s', '>', ('bad', 'samples_per_s'))."""
    m = CHECK_RE.match(text)
    if not m:
        raise ValueError(f"check {text!r}: expected '<bad|fixed>.<metric> <op> <number|bad.metric|fixed.metric>'")
    script, metric, op, rscript, rmetric, number = m.groups()
    for name in (metric, rmetric):
        if name is not None and name not in METRIC_PASS and name not in DERIVED:
            raise ValueError(f"check {text!r}: unknown metric {name!r}")
    rhs: Any = (rscript, rmetric) if rscript else float(number)
    return script, metric, op, rhs


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
    checks = tuple(meta.get("checks", ()))
    for check in checks:
        try:
            _, metric, _, rhs = parse_check(check)
        except ValueError as exc:
            raise FixtureError(f"{meta_path}: {exc}") from None
        for name in (metric, rhs[1] if isinstance(rhs, tuple) else None):
            if name is not None and _passes_of(name) & set(skip):
                raise FixtureError(f"{meta_path}: check {check!r} needs a skipped pass")
    windows = meta.get("windows", {})
    if not isinstance(windows, dict) or any(
        k not in DEFAULT_WINDOWS or isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0
        for k, v in windows.items()
    ):
        raise FixtureError(f"{meta_path}: [windows] keys must be among {', '.join(DEFAULT_WINDOWS)} with numbers")
    for which in SCRIPTS:
        if not (path / f"{which}.py").is_file():
            raise FixtureError(f"{path}: missing {which}.py")
    bad_error = meta.get("bad_error", "")
    if not isinstance(bad_error, str):
        raise FixtureError(f"{meta_path}: bad_error must be the text of the error bad.py stops with")
    if bad_error and checks:
        raise FixtureError(f"{meta_path}: a fixture whose bad.py crashes (bad_error) cannot have checks")
    try:
        certainty = Certainty(meta.get("certainty", Certainty.MEDIUM.value))
    except ValueError:
        raise FixtureError(f"{meta_path}: certainty must be one of {', '.join(c.value for c in Certainty)}") from None
    min_gpus = meta.get("min_gpus", 1)
    if isinstance(min_gpus, bool) or not isinstance(min_gpus, int) or min_gpus < 1:
        raise FixtureError(f"{meta_path}: min_gpus must be a whole number of GPUs, 1 or more")
    own_session = meta.get("own_session", "")
    if not isinstance(own_session, str):
        raise FixtureError(f"{meta_path}: own_session must say why the fixture needs a session of its own")
    return Fixture(
        str(meta["rule"]),
        str(meta["name"]),
        str(meta["summary"]),
        str(meta["metric"]),
        str(meta["direction"]),
        float(threshold),
        bool(meta.get("unsafe_fix", False)),
        path,
        skip,
        str(meta.get("why", "")).strip(),
        checks,
        tuple(sorted(windows.items())),
        certainty,
        bad_error.strip(),
        min_gpus,
        own_session.strip(),
    )


def _passes_of(metric: str) -> set:
    if metric in DERIVED:
        return set(DERIVED[metric])
    return {METRIC_PASS[metric]}


def split_rules(values: Sequence[str]) -> List[str]:
    """--rule TL104 --rules TL401,TL402 -> ['TL104', 'TL401', 'TL402']."""
    out: List[str] = []
    for value in values:
        out += [r.strip() for r in value.split(",") if r.strip()]
    return out


def discover(fixtures_dir: Path, rules: Sequence[str] = ()) -> List[Fixture]:
    """Every `<dir>/*/meta.toml` fixture, sorted by rule code; filtered by `rules`."""
    if not fixtures_dir.is_dir():
        raise FixtureError(f"no fixtures directory at {fixtures_dir}")
    found = [load_fixture(p) for p in sorted(fixtures_dir.iterdir()) if (p / "meta.toml").is_file()]
    rules = split_rules(rules)
    if rules:
        wanted = {r.upper() for r in rules}
        unknown = sorted(wanted - {f.rule.upper() for f in found})
        if unknown:
            raise FixtureError(f"no fixture for {', '.join(unknown)} in {fixtures_dir}")
        found = [f for f in found if f.rule.upper() in wanted]
    return sorted(found, key=lambda f: (f.rule, f.name))


def too_few_gpus(fx: Fixture, gpus: int) -> Optional[str]:
    """Why `fx` is not measured on a machine with `gpus` GPUs, or None when it can be."""
    if fx.min_gpus <= gpus:
        return None
    return f"not measured on {gpus} GPU(s): the fixture needs {fx.min_gpus} (meta.toml min_gpus)"


def run_order(fixtures: Sequence[Fixture]) -> List[Fixture]:
    """The order rules are measured in: least certain first, then by rule code."""
    return sorted(fixtures, key=lambda f: (f.certainty.rank, f.rule, f.name))


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


@dataclass(frozen=True)
class Planned:
    fixture: Fixture
    repeat: int
    script: str
    passes: Tuple[str, ...]


def run_passes(fx: Fixture, repeat: int) -> Tuple[str, ...]:
    passes = ["timing"]
    if fx.metric_pass != "timing":
        passes.append(fx.metric_pass)
    if repeat == 0:
        passes += [p for p in fx.context_passes() if p not in passes]
    return tuple(p for p in PASSES if p in passes)


def rule_repeats(fx: Fixture, repeats: int) -> int:
    """A rule's repeats: one when its bad script crashes (a crash is not a sample to compare)."""
    return 1 if fx.bad_error else repeats


def plan(fixtures: Sequence[Fixture], repeats: int) -> List[Planned]:
    """The runs in execution order: per rule, per repeat, bad and fixed alternating."""
    steps: List[Planned] = []
    for fx in fixtures:
        for r in range(rule_repeats(fx, repeats)):
            order = SCRIPTS if r % 2 == 0 else SCRIPTS[::-1]
            for which in order:
                steps.append(Planned(fx, r, which, run_passes(fx, r)))
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


@dataclass
class RuleRuns:
    """One rule's runs; `complete` is False when the rule was not (fully) run."""

    fixture: Fixture
    runs: List[Run] = field(default_factory=list)
    complete: bool = True
    reason: str = ""
    seconds: float = 0.0


BUDGET_CUT = "--time-budget ran out during this rule"
STOPPED = "stopped (SIGTERM or Ctrl-C) during this rule"


def measure(
    fixtures: Sequence[Fixture],
    repeats: int = 5,
    progress: Optional[Callable[[Run], None]] = None,
    nvml: Optional[NvmlSampler] = None,
    timeout: float = DEFAULT_TIMEOUT,
    traces: Optional[Path] = None,
    budget_s: Optional[float] = None,
    estimate: Optional[Callable[[Fixture], float]] = None,
    on_rule: Optional[Callable[[RuleRuns], None]] = None,
    clock: Callable[[], float] = time.monotonic,
    smoke: bool = False,
) -> Dict[str, RuleRuns]:
    """Every planned run, sequentially (one GPU, one process at a time), in the
    order given; keyed by fixture directory.

    With `budget_s`, a rule starts only when its estimated time (`estimate`,
    scaled by how the rules so far compared with their estimates) fits in what
    is left, and no run may outlast the budget; a rule that does not fit or is
    cut short is returned with ``complete=False`` and its reason (the runs it
    finished kept). `on_rule` is called after every rule (measured or not), in
    order, so a report can be written as the run goes; when the run is stopped
    (an exception: SIGTERM turned into one, Ctrl-C) it is called for the rule
    in progress, with the runs it finished, before the exception goes on.
    With `traces`, each profile window keeps its Chrome trace there; with
    `smoke`, the scripts run at their smoke sizes (a dry run on the CPU)."""
    out: Dict[str, RuleRuns] = {}
    if traces is not None:
        traces.mkdir(parents=True, exist_ok=True)
    deadline = clock() + budget_s if budget_s is not None else None
    spent_est, spent_real = 0.0, 0.0
    for fx in fixtures:
        started = clock()
        est = estimate(fx) if estimate is not None else None
        if deadline is not None:
            ratio = min(3.0, max(0.5, spent_real / spent_est)) if spent_est > 0 else 1.0
            expected = (est or 0.0) * ratio
            left = deadline - started
            if expected > left or left <= 0:
                rr = RuleRuns(
                    fx,
                    [],
                    False,
                    f"not run: its estimated {expected:.0f} s did not fit in the "
                    f"{max(left, 0):.0f} s left of --time-budget",
                )
                out[str(fx.path)] = rr
                if on_rule:
                    on_rule(rr)
                continue
        rr = RuleRuns(fx)
        try:
            _measure_rule(rr, repeats, deadline, timeout, traces, nvml, progress, clock, smoke)
        except BaseException:
            rr.complete, rr.reason = False, STOPPED
            last = rr.runs[-1] if rr.runs else None
            if last is not None and last.rc in (-signal.SIGTERM, -signal.SIGINT):
                last.cut = True  # killed by the same stop
            rr.seconds = clock() - started
            out[str(fx.path)] = rr
            if on_rule:
                on_rule(rr)
            raise
        rr.seconds = clock() - started
        if rr.complete and est:
            spent_est += est
            spent_real += rr.seconds
        out[str(fx.path)] = rr
        if on_rule:
            on_rule(rr)
    return out


def _measure_rule(
    rr: RuleRuns,
    repeats: int,
    deadline: Optional[float],
    timeout: float,
    traces: Optional[Path],
    nvml: Optional[NvmlSampler],
    progress: Optional[Callable[[Run], None]],
    clock: Callable[[], float],
    smoke: bool,
) -> None:
    """One rule's planned runs into `rr`, until they are done or the deadline cuts them."""
    fx = rr.fixture
    for step in plan([fx], repeats):
        run_timeout = timeout
        if deadline is not None:
            left = deadline - clock()
            if left <= 1:
                rr.complete, rr.reason = False, BUDGET_CUT
                return
            run_timeout = min(timeout, left)
        extra = None
        if traces is not None and "profile" in step.passes:
            name = f"{fx.path.name}-{step.script}-r{step.repeat}.json"
            extra = {"TORCHLINT_VERIFY_TRACE": str((traces / name).resolve())}
        run = run_script(fx, step.script, step.passes, step.repeat, smoke=smoke, timeout=run_timeout, env=extra)
        if deadline is not None and run.rc == -1 and run_timeout < timeout:
            run.cut = True
            rr.runs.append(run)
            rr.complete, rr.reason = False, BUDGET_CUT
            return
        timing = run.window("timing")
        if nvml is not None and timing is not None:
            util = nvml.mean(timing.get("window_start_unix"), timing.get("window_end_unix"))
            if util is not None:
                timing["nvml_util_percent"] = util
        rr.runs.append(run)
        if progress:
            progress(run)


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


# ---------------------------------------------------------------------------
# Aggregation and verdicts


def metric_values(runs: Sequence[Run], script: str, metric: str) -> List[Optional[float]]:
    """The metric from every run of `script` that measured its window (its windows, for a derived metric)."""
    needed = _passes_of(metric) if (metric in DERIVED or metric in METRIC_PASS) else {"timing"}
    out: List[Optional[float]] = []
    for run in runs:
        if run.script == script and all(run.window(p) is not None for p in needed):
            out.append(run.value(metric))
    return out


def _median(runs: Sequence[Run], script: str, metric: str) -> Optional[float]:
    s = V.summarize(metric_values(runs, script, metric))
    return s.median if s is not None else None


def evaluate_checks(fx: Fixture, runs: Sequence[Run]) -> Tuple[bool, str]:
    """The fixture's own mechanism checks (meta.toml `checks`), on medians."""
    for check in fx.checks:
        script, metric, op, rhs = parse_check(check)
        left = _median(runs, script, metric)
        if isinstance(rhs, tuple):
            right = _median(runs, rhs[0], rhs[1])
            rtext = f"{rhs[0]}.{rhs[1]} = {_num(right)}"
        else:
            right, rtext = rhs, _num(rhs)
        if left is None or right is None:
            return False, f"check '{check}': not measured"
        if not OPS[op](left, right):
            return False, f"check '{check}' does not hold: {script}.{metric} = {_num(left)}, {rtext}"
    return True, ""


def _num(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4g}"


def mechanism(fx: Fixture, runs: Sequence[Run], expected_device: str) -> Tuple[bool, str]:
    """The conditions under which the declared metric means what the rule says."""
    needed = ("timing", fx.metric_pass)
    for r in runs:
        for p in needed:
            if p in r.passes and r.window(p) is None:
                return False, f"{r.script}.py {p} window (repeat {r.repeat}) failed: {r.window_error(p)}"
    if not runs:
        return False, "no runs"
    devices = sorted({str((r.metrics or {}).get("device", "?")) for r in runs if r.metrics})
    if any(not d.startswith(expected_device) for d in devices):
        return False, f"ran on {', '.join(devices)}, expected {expected_device}"
    for which in SCRIPTS:
        if not any(v for v in metric_values(runs, which, "samples")):
            return False, f"{which}.py counted no samples (h.count)"
    bad = [v for v in metric_values(runs, "bad", fx.metric) if v is not None]
    fixed = [v for v in metric_values(runs, "fixed", fx.metric) if v is not None]
    if fx.metric == "busy_fraction":
        for which in SCRIPTS:
            pruns = [w for w in (r.window("profile") for r in runs if r.script == which) if w is not None]
            if not all(w.get("window_found") for w in pruns):
                return False, f"{which}.py: the profiler trace has no torchlint.window annotation"
        # Only the script the fix should make busier must show GPU work: a bad
        # script may leave the GPU idle on purpose (placement rules run it on the CPU).
        busier = "fixed" if fx.direction == "up" else "bad"
        pruns = [w for w in (r.window("profile") for r in runs if r.script == busier) if w is not None]
        if expected_device == "cuda" and not any(w.get("kernels") for w in pruns):
            return False, f"{busier}.py: no GPU kernel in the window"
    elif fx.metric == "h2d_copies" and not any(bad):
        return False, "bad.py makes no host-to-device copy in the window: nothing for the fix to remove"
    elif fx.metric == "sync_count" and not any(bad):
        return False, "bad.py makes no synchronizing call in the window: nothing for the fix to remove"
    elif fx.metric == "peak_mem_bytes" and not (any(bad) and any(fixed)):
        return False, "peak memory was not recorded"
    return evaluate_checks(fx, runs)


CONTEXT_METRICS = (
    "wall_s",
    "samples_per_s",
    "peak_mem_bytes",
    "busy_fraction",
    "busy_fraction_timed",
    "profiler_slowdown",
    "kernels",
    "kernels_per_step",
    "h2d_copies",
    "h2d_per_step",
    "h2d_pinned",
    "h2d_pageable",
    "d2h_per_step",
    "syncs_per_step",
    "sync_count",
    "steps",
    "sm_clock_mhz_start",
    "sm_clock_mhz_end",
    "nvml_util_percent",
    "trace_events",
)


def _expected_crash(fx: Fixture, run: Run) -> str:
    """The part of a bad run's error that is the crash its fixture expects, else ''."""
    if run.script != "bad" or not fx.bad_error or run.rc == 0:
        return ""
    return next((part for part in run.error.split(" | ") if fx.bad_error in part), "")


def crash_check(fx: Fixture, runs: Sequence[Run], expected_device: str) -> Tuple[bool, str]:
    """For a fixture with `bad_error`: every bad run stopped with that error, and
    fixed.py ran (every window, on the expected device, samples counted, GPU
    kernels in its profiled window on a GPU)."""
    bad = [r for r in runs if r.script == "bad"]
    fixed = [r for r in runs if r.script == "fixed"]
    if not bad or not fixed:
        return False, "no runs"
    for r in bad:
        if r.rc == 0:
            device = (r.metrics or {}).get("device", "?")
            return False, f"bad.py ran to its end on {device} instead of stopping with '{fx.bad_error}'"
        if not _expected_crash(fx, r):
            return False, f"bad.py stopped, but not with '{fx.bad_error}': {r.error}"
    for r in fixed:
        for p in r.passes:
            if r.window(p) is None:
                return False, f"fixed.py {p} window (repeat {r.repeat}) failed: {r.window_error(p)}"
        device = str((r.metrics or {}).get("device", "?"))
        if not device.startswith(expected_device):
            return False, f"fixed.py ran on {device}, expected {expected_device}"
    if not any(metric_values(fixed, "fixed", "samples")):
        return False, "fixed.py counted no samples (h.count)"
    if expected_device == "cuda" and not any((r.window("profile") or {}).get("kernels") for r in fixed):
        return False, "fixed.py: no GPU kernel in the profiled window"
    return True, ""


def crash_result(
    fx: Fixture, runs: Sequence[Run], expected_device: str = "cuda", root: Optional[Path] = None
) -> Dict[str, Any]:
    """The verdict of a fixture with `bad_error`: PASS is "bad crashes, fixed runs"."""
    ok, why = crash_check(fx, runs, expected_device)
    crash = next((c for c in (_expected_crash(fx, r) for r in runs) if c), "")
    fixed = V.summarize(metric_values(runs, "fixed", fx.metric))
    if ok:
        verdict, reason = (
            V.PASS,
            f"bad crashes, fixed runs: bad.py stopped with '{crash.strip()}'; fixed.py ran on {expected_device}",
        )
    else:
        verdict, reason = V.FAIL, why
    result = fixture_header(fx, root)
    result.update(
        repeats=1,
        bad=None,
        fixed=fixed.to_dict() if fixed else None,
        bad_crash=crash.strip(),
        change=None,
        effect=None,
        noise=None,
        mechanism={"ok": ok, "reason": why},
        verdict=verdict,
        reason=reason,
        metrics=context(runs),
        errors=[
            f"{r.script}.py (repeat {r.repeat}, {'+'.join(r.passes)}): {r.error}"
            for r in runs
            if r.error and not _expected_crash(fx, r)
        ],
        runs=[run_record(r) for r in runs],
    )
    return result


def rule_result(
    fx: Fixture,
    runs: Sequence[Run],
    expected_device: str = "cuda",
    root: Optional[Path] = None,
    repeats: Optional[int] = None,
) -> Dict[str, Any]:
    if fx.bad_error:
        return crash_result(fx, runs, expected_device, root)
    bad = V.summarize(metric_values(runs, "bad", fx.metric))
    fixed = V.summarize(metric_values(runs, "fixed", fx.metric))
    ok, why = mechanism(fx, runs, expected_device)
    v = V.decide(fx.metric, fx.direction, fx.threshold, bad, fixed, ok, why)
    result = fixture_header(fx, root)
    result.update(
        repeats=repeats if repeats is not None else len({r.repeat for r in runs}),
        bad=bad.to_dict() if bad else None,
        fixed=fixed.to_dict() if fixed else None,
        change=v.change,
        effect=v.effect,
        noise=v.noise,
        mechanism={"ok": ok, "reason": why},
        verdict=v.verdict,
        reason=v.reason,
        metrics=context(runs),
        errors=[f"{r.script}.py (repeat {r.repeat}, {'+'.join(r.passes)}): {r.error}" for r in runs if r.error],
        runs=[run_record(r) for r in runs],
    )
    return result


def run_record(r: Run) -> Dict[str, Any]:
    """What the report keeps of one run: its windows' numbers (no trace)."""
    m = r.metrics or {}
    return {
        "script": r.script,
        "repeat": r.repeat,
        "passes": list(r.passes),
        "rc": r.rc,
        "error": r.error,
        "cut": r.cut,
        "seconds": round(r.seconds, 3),
        "device": m.get("device"),
        "gpu_name": m.get("gpu_name"),
        "startup_s": m.get("startup_s"),
        "setup_s": m.get("setup_s"),
        "warmup": m.get("warmup"),
        "windows": m.get("passes"),
    }


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
    for base in (ROOT, root or Path.cwd(), PACKAGED_FIXTURES.parent):  # relative when the fixture is known
        try:
            where = fx.path.resolve().relative_to(base.resolve()).as_posix()
            break
        except ValueError:
            continue
    return {
        "rule": fx.rule,
        "name": fx.name,
        "fixture": where,
        "summary": fx.summary,
        "why": fx.why,
        "metric": fx.metric,
        "direction": fx.direction,
        "threshold": fx.threshold,
        "threshold_unit": "points" if V.is_points(fx.metric) else "relative",
        "checks": list(fx.checks),
        "bad_error": fx.bad_error,
        "certainty": fx.certainty.value,
    }


def _unmeasured_result(fx: Fixture, verdict: str, reason: str, root: Optional[Path], **extra: Any) -> Dict[str, Any]:
    """A result with no measurement: the header, the verdict and why."""
    result = fixture_header(fx, root)
    result.update(
        bad=None,
        fixed=None,
        change=None,
        effect=None,
        noise=None,
        mechanism=None,
        verdict=verdict,
        reason=reason,
        metrics={},
        errors=[],
    )
    result.update(extra)
    return result


def skipped_result(fx: Fixture, reason: str, root: Optional[Path] = None) -> Dict[str, Any]:
    return _unmeasured_result(fx, V.SKIPPED, reason, root)


def not_run_result(fx: Fixture, reason: str, runs: Sequence[Run] = (), root: Optional[Path] = None) -> Dict[str, Any]:
    """A rule this report does not measure (yet): another report may (see --merge)."""
    return _unmeasured_result(
        fx,
        V.NOT_RUN,
        reason,
        root,
        errors=[f"{r.script}.py (repeat {r.repeat}): {r.error}" for r in runs if r.error],
        runs=[run_record(r) for r in runs],
    )


MIN_CUT_REPEATS = 3  # finished repeats that still give a verdict when a rule is cut short


def finished_repeats(runs: Sequence[Run]) -> int:
    """How many repeats, counted from the first, have a run of each script and no cut run."""
    by_repeat: Dict[int, List[Run]] = {}
    for r in runs:
        by_repeat.setdefault(r.repeat, []).append(r)
    k = 0
    while len(by_repeat.get(k, ())) == len(SCRIPTS) and not any(r.cut for r in by_repeat[k]):
        k += 1
    return k


def cut_result(
    fx: Fixture,
    runs: Sequence[Run],
    reason: str,
    repeats: int,
    expected_device: str = "cuda",
    root: Optional[Path] = None,
) -> Dict[str, Any]:
    """A rule cut short (time budget, SIGTERM): its verdict from the repeats it
    finished when there are at least MIN_CUT_REPEATS of them (or all it plans,
    if fewer), else not-run; every run it made stays in the record."""
    planned = rule_repeats(fx, repeats)
    k = finished_repeats(runs)
    need = min(MIN_CUT_REPEATS, planned)
    if k >= need:
        result = rule_result(fx, [r for r in runs if r.repeat < k], expected_device, root, repeats=k)
        result["reason"] = f"{result['reason']} (cut short after {k} of {planned} repeats: {reason})"
        result["runs"] = [run_record(r) for r in runs]
        return result
    why = f"not run: {reason}, after {len(runs)} run(s); {k} finished repeat(s), a verdict needs {need}"
    return not_run_result(fx, why, runs, root)


def smoke_result(fx: Fixture, runs: Sequence[Run], root: Optional[Path] = None) -> Dict[str, Any]:
    result = fixture_header(fx, root)
    mine = [r for r in runs if r.fixture == str(fx.path)]
    failed = [r for r in mine if not r.ok]
    result.update(
        verdict="smoke-ok" if not failed else "smoke-failed",
        reason="; ".join(f"{r.script}.py: {r.error}" for r in failed),
        runs=[
            {
                "script": r.script,
                "ok": r.ok,
                "seconds": round(r.seconds, 3),
                "error": r.error,
                "passes": list(r.passes),
                "metrics": r.metrics,
            }
            for r in mine
        ],
    )
    return result
