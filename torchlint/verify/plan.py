"""`torchlint verify --plan`: the runs a measurement makes and an estimate of
its time on the GPU machine, per rule and in total, without running anything.

Per script the estimate starts from its ``cost.json`` (measured on a CPU by
``python -m torchlint.verify.costs``, see :mod:`torchlint.verify.costs`):

- GPU time of a step: its FLOPs on GPU tensors at ``GPU_FLOPS`` (25 TFLOP/s:
  about half an H100's FP32 peak, since torch keeps TF32 off for matmuls by
  default and the fixtures' matrices are small) plus ``KERNEL_S`` per GPU
  operation (a launch's minimum);
- host time of a step: the CPU-side work measured on one CPU thread (the
  step's time minus its meta operations), where the part spent in CPU
  matmuls/convolutions (their FLOPs at the measured one-thread rate) is
  scaled to ``HOST_CORES`` cores at ``HOST_EFFICIENCY`` and the rest (Python,
  data loading, element-wise work) is taken as is, plus ``LAUNCH_S`` per GPU
  operation (Python, dispatcher and launch);
- a step takes the larger of the two (the host runs ahead of the GPU), or
  their sum when the step synchronizes (``.item()``);
- a run: ``START_S`` (interpreter, ``import torch``, CUDA context, cuBLAS) +
  its set-up + the first step + the warm-up (``warmup_s``, at least
  ``warmup_min`` steps) +
  each window (its target time, or its minimum steps when a step is slower;
  under the profiler each operation costs ``PROFILER_OP_S`` more host time,
  and the trace ``TRACE_S_PER_EVENT`` per event to stop, export and read, ~5
  events per GPU operation) + ``EXIT_S``.

Without a cost.json a script counts as ``FALLBACK_RUN_S`` per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from torchlint.verify import costs as costs_mod
from torchlint.verify.harness import DEFAULT_WINDOWS, window_steps
from torchlint.verify.passes import SETTLE_BELOW_S
from torchlint.verify.runner import SCRIPTS, Fixture, plan

GPU_FLOPS = 25e12
KERNEL_S = 4e-6
LAUNCH_S = 12e-6
HOST_CORES = 16  # the GPU machine's CPU cores
HOST_EFFICIENCY = 0.5  # of a perfect 16x speed-up of CPU matmuls over one thread
START_S = 4.0
EXIT_S = 0.5
PROFILER_OP_S = 15e-6
TRACE_S_PER_EVENT = 15e-6
EVENTS_PER_GPU_OP = 5
FALLBACK_RUN_S = 20.0
DEFAULT_BUDGET_S = 20 * 60
DEFAULT_COMMAND_S = 480.0
SPLIT_FILL = 0.85  # plan each command to this share of its --time-budget: the estimates have errors


@dataclass(frozen=True)
class StepEstimate:
    step_s: float
    gpu_s: float
    host_s: float
    setup_s: float
    events_per_step: float
    profiled_step_s: float


def step_estimate(cost: Dict[str, Any]) -> StepEstimate:
    ops = cost.get("device_ops", 0)
    gpu = cost.get("device_flops", 0) / GPU_FLOPS + ops * KERNEL_S
    host_s = cost.get("host_s", cost.get("step_s", 0.0))
    rate = cost.get("cpu_flops_per_s") or 0.0
    host_flops = cost.get("host_flops", 0)
    if rate > 0 and host_flops:
        in_matmuls = min(host_s, host_flops / rate)
        host_s = host_s - in_matmuls + in_matmuls / (HOST_CORES * HOST_EFFICIENCY)
    host = host_s + ops * LAUNCH_S
    profiled_host = host + (ops + cost.get("host_ops", 0)) * PROFILER_OP_S
    if cost.get("syncs_per_step", 0) >= 0.9:  # a sync every step: host and GPU take turns
        step, profiled = gpu + host, gpu + profiled_host
    else:  # the host queues ahead of the GPU
        step, profiled = max(gpu, host), max(gpu, profiled_host)
    events = EVENTS_PER_GPU_OP * ops + cost.get("host_ops", 0)
    return StepEstimate(step, gpu, host, float(cost.get("setup_s", 0.0)), events, profiled)


def run_estimate(fx: Fixture, script: str, passes: Sequence[str], cost: Optional[Dict[str, Any]]) -> float:
    if not cost or "error" in cost:
        return FALLBACK_RUN_S
    w = dict(DEFAULT_WINDOWS)
    w.update(dict(fx.windows))
    s = step_estimate(cost)
    step = max(s.step_s, 1e-6)
    total = START_S + s.setup_s + EXIT_S
    total += step + max(w["warmup_s"], w["warmup_min"] * step)  # the first step, then the warm-up
    for name in passes:
        n = window_steps(w[f"{name}_s"], step, int(w[f"{name}_min"]), int(w[f"{name}_max"]))
        if name == "profile":
            settle = int(w["profile_settle"]) if step < SETTLE_BELOW_S else 0
            total += (n + settle) * (s.profiled_step_s + s.events_per_step * TRACE_S_PER_EVENT)
        else:
            total += n * step
    return total


@dataclass
class RulePlan:
    fixture: Fixture
    runs: int
    seconds: float
    per_script: Dict[str, StepEstimate]
    missing_costs: bool


def rule_plan(fx: Fixture, repeats: int) -> RulePlan:
    data = costs_mod.load(fx.path) or {}
    scripts = data.get("scripts", {})
    steps = plan([fx], repeats)
    seconds = sum(run_estimate(fx, p.script, p.passes, scripts.get(p.script)) for p in steps)
    per_script = {w: step_estimate(scripts[w]) for w in SCRIPTS if w in scripts and "error" not in scripts[w]}
    return RulePlan(fx, len(steps), seconds, per_script, len(per_script) < len(SCRIPTS))


def estimator(repeats: int):
    """A function fixture -> estimated seconds, for measure()'s --time-budget."""
    cache: Dict[str, float] = {}

    def estimate(fx: Fixture) -> float:
        if str(fx.path) not in cache:
            cache[str(fx.path)] = rule_plan(fx, repeats).seconds
        return cache[str(fx.path)]

    return estimate


def split(plans: Sequence[RulePlan], per_command_s: float) -> List[List[RulePlan]]:
    """Consecutive groups of rules, each estimated within SPLIT_FILL of
    `per_command_s` (a rule longer than that gets a group of its own)."""
    groups: List[List[RulePlan]] = []
    current: List[RulePlan] = []
    total = 0.0
    for p in plans:
        if current and total + p.seconds > SPLIT_FILL * per_command_s:
            groups.append(current)
            current, total = [], 0.0
        current.append(p)
        total += p.seconds
    if current:
        groups.append(current)
    return groups


def _fmt_s(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def render(
    fixtures: Sequence[Fixture],
    repeats: int,
    per_command_s: float = DEFAULT_COMMAND_S,
    budget_s: float = DEFAULT_BUDGET_S,
) -> Tuple[str, float]:
    """The plan as text, and its total in seconds."""
    plans = [rule_plan(fx, repeats) for fx in fixtures]
    lines = [
        f"torchlint verify plan: {len(plans)} rule(s), --repeats {repeats}; estimated for one H100 "
        "(method: docs/verify.md, 'Planning a GPU session')",
        "",
    ]
    header = ("Rule", "Metric", "Runs", "Bad step", "Fixed step", "Estimate")
    rows = [header]
    for p in plans:
        steps = [_step_text(p.per_script.get(w)) for w in SCRIPTS]
        rows.append(
            (
                p.fixture.rule,
                p.fixture.metric,
                str(p.runs),
                steps[0],
                steps[1],
                _fmt_s(p.seconds) + (" (no cost.json)" if p.missing_costs else ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(wd) for c, wd in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * wd for wd in widths))
    total = sum(p.seconds for p in plans)
    runs = sum(p.runs for p in plans)
    lines += [
        "",
        f"Total: {runs} runs, {_fmt_s(total)} ({total:.0f} s); "
        f"{'within' if total <= budget_s else 'OVER'} the {_fmt_s(budget_s)} budget",
        "",
    ]
    lines.append(
        f"Split into commands of --time-budget {per_command_s:.0f} ({_fmt_s(per_command_s)}), each planned "
        f"to at most {SPLIT_FILL:.0%} of it:"
    )
    for i, group in enumerate(split(plans, per_command_s), 1):
        codes = ",".join(p.fixture.rule for p in group)
        lines.append(f"  {i}. --rules {codes}   ({_fmt_s(sum(p.seconds for p in group))})")
    return "\n".join(lines) + "\n", total


def _step_text(s: Optional[StepEstimate]) -> str:
    if s is None:
        return "?"
    where = "gpu" if s.gpu_s >= s.host_s else "host"
    return f"{s.step_s * 1000:.1f} ms ({where})"
