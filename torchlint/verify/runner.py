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

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from torchlint.verify.fixture_meta import SCRIPTS, Fixture
from torchlint.verify.harness import PASSES
from torchlint.verify.script_runs import DEFAULT_TIMEOUT, Run, run_script


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
