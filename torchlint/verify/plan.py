"""`torchlint verify --plan`: the runs a measurement makes and an estimate of
its time on the GPU machine, per rule, per session part and in total, without
running anything.

Per script the estimate starts from its ``cost.json`` (measured on a CPU by
``python -m torchlint.verify.costs``, see :mod:`torchlint.verify.costs`):

- GPU time of a step: its matmul FLOPs on GPU tensors at ``GPU_FLOPS`` (25
  TFLOP/s: about half an H100's FP32 peak, since torch keeps TF32 off for
  matmuls by default and the fixtures' matrices are small), its convolution
  FLOPs at ``GPU_CONV_FLOPS`` (cuDNN runs them in TF32 by default:
  ``torch.backends.cudnn.allow_tf32`` is True), plus ``KERNEL_S`` per GPU
  operation (a launch's minimum);
- host time of a step: the CPU-side work measured on one CPU thread (the
  step's time minus its meta operations), scaled to an idle core (the matmul
  rate measured beside it against ``REFERENCE_CPU_FLOPS``: other load on the
  shared machine that measured slows both alike), where the part spent in CPU
  matmuls/convolutions (their FLOPs at the measured one-thread rate) is
  scaled to ``HOST_CORES`` cores at ``HOST_EFFICIENCY`` and the rest (Python,
  data loading, element-wise work) is taken as is, plus ``LAUNCH_S`` per GPU
  operation (Python, dispatcher and launch);
- a step takes the larger of the two (the host runs ahead of the GPU), or
  their sum when the step synchronizes (``.item()``);
- a run: ``START_S`` (interpreter, ``import torch``, CUDA context, cuBLAS) +
  ``OPTIMIZER_IMPORT_S`` when the script creates an optimizer (the first one
  imports ``torch._dynamo``) + its set-up + the first step + the warm-up
  (``warmup_s``, at least ``warmup_min`` steps) + each window (its target
  time, or its minimum steps when a step is slower; under the profiler each
  operation costs ``PROFILER_OP_S`` more host time, and the trace
  ``TRACE_S_PER_EVENT`` per event to stop, export and read, ~5 events per GPU
  operation) + what the script does after its last step (``tail_s``; a
  profiler that recorded every step, as TL501's do, also ``PROFILER_STOP_S_PER_OP``
  per operation it recorded) + ``EXIT_S``;
- a bad script that crashes on a GPU (meta.toml ``bad_error``) stops at its
  first step: start-up, the optimizer import and its fixed script's set-up.

Without a cost.json a script counts as ``FALLBACK_RUN_S`` per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from torchlint.verify import costs as costs_mod
from torchlint.verify import session
from torchlint.verify.fixture_meta import SCRIPTS, Fixture
from torchlint.verify.harness import DEFAULT_WINDOWS, window_steps
from torchlint.verify.passes import SETTLE_BELOW_S
from torchlint.verify.runner import plan, rule_repeats

GPU_FLOPS = 25e12
GPU_CONV_FLOPS = 100e12  # TF32 convolutions, ~20% of the H100's TF32 peak: small channel counts are memory-bound
KERNEL_S = 4e-6
LAUNCH_S = 12e-6
HOST_CORES = 16  # the GPU machine's CPU cores
HOST_EFFICIENCY = 0.5  # of a perfect 16x speed-up of CPU matmuls over one thread
# Interpreter and `import torch` (1.6 s for the CPU build on an idle core here), the CUDA
# build's libraries, the CUDA context and cuBLAS/cuDNN handles.
START_S = 3.5
# A script's first torch.optim optimizer imports torch._dynamo: 1.2-3.5 s for the CPU build
# here (cost.json `dynamo_import_s`, by load), more with the CUDA build's inductor/triton.
OPTIMIZER_IMPORT_S = 2.0
EXIT_S = 0.5
PROFILER_OP_S = 15e-6
TRACE_S_PER_EVENT = 15e-6
EVENTS_PER_GPU_OP = 5
# Stopping a profiler that recorded a whole run: ~5 us per event, ~3 events per operation
# (measured here: 1.1 s for the 200k events of 300 steps of TL501's loop).
PROFILER_STOP_S_PER_OP = 15e-6
# One FP32 thread's 1024^3 matmul rate on an idle core of the machine that measured cost.json.
REFERENCE_CPU_FLOPS = 100e9
FALLBACK_RUN_S = 20.0
DEFAULT_BUDGET_S = float(session.RULES_BUDGET_S)


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
    conv = cost.get("device_conv_flops", 0)
    gpu = (cost.get("device_flops", 0) - conv) / GPU_FLOPS + conv / GPU_CONV_FLOPS + ops * KERNEL_S
    host_s = cost.get("host_s", cost.get("step_s", 0.0))
    rate = cost.get("cpu_flops_per_s") or 0.0
    host_flops = cost.get("host_flops", 0)
    if rate > 0 and host_flops:  # CPU matmuls: from one thread to the GPU machine's cores
        in_matmuls = min(host_s, host_flops / rate)
        host_s -= in_matmuls * (1 - 1 / (HOST_CORES * HOST_EFFICIENCY))
    host = host_s * idle_factor(cost) + ops * LAUNCH_S
    profiled_host = host + (ops + cost.get("host_ops", 0)) * PROFILER_OP_S
    if cost.get("syncs_per_step", 0) >= 0.9:  # a sync every step: host and GPU take turns
        step, profiled = gpu + host, gpu + profiled_host
    else:  # the host queues ahead of the GPU
        step, profiled = max(gpu, host), max(gpu, profiled_host)
    events = EVENTS_PER_GPU_OP * ops + cost.get("host_ops", 0)
    return StepEstimate(step, gpu, host, float(cost.get("setup_s", 0.0)) * idle_factor(cost), events, profiled)


def idle_factor(cost: Dict[str, Any]) -> float:
    """CPU time measured on a busy machine, scaled to an idle core: the ratio of the matmul
    rate measured with it to an idle core's (`REFERENCE_CPU_FLOPS`), at most 1. Other load
    on a shared machine slows Python and matmuls alike; the GPU machine runs one session."""
    rate = cost.get("cpu_flops_per_s") or 0.0
    return min(1.0, rate / REFERENCE_CPU_FLOPS) if rate > 0 else 1.0


def start_estimate(cost: Dict[str, Any]) -> float:
    """Before the first step: start-up, the optimizer's import, the script's set-up."""
    setup = float(cost.get("setup_s", 0.0)) * idle_factor(cost)
    return START_S + (OPTIMIZER_IMPORT_S if cost.get("optimizer") else 0.0) + setup


def run_estimate(fx: Fixture, script: str, passes: Sequence[str], scripts: Dict[str, Any]) -> float:
    """One run of `script` measuring `passes`, from the fixture's cost.json scripts."""
    cost = scripts.get(script)
    if script == "bad" and fx.bad_error:  # it stops at its first step: its fixed script's start
        fixed = scripts.get("fixed")
        return start_estimate(fixed) + EXIT_S if fixed and "error" not in fixed else FALLBACK_RUN_S
    if not cost or "error" in cost:
        return FALLBACK_RUN_S
    w = dict(DEFAULT_WINDOWS)
    w.update(dict(fx.windows))
    s = step_estimate(cost)
    step = max(s.step_s, 1e-6)
    warmup_steps = max(w["warmup_s"] / step, w["warmup_min"])
    total = start_estimate(cost) + float(cost.get("tail_s", 0.0)) * idle_factor(cost) + EXIT_S
    total += step + warmup_steps * step  # the first step, then the warm-up
    steps = 1 + warmup_steps
    for name in passes:
        n = window_steps(w[f"{name}_s"], step, int(w[f"{name}_min"]), int(w[f"{name}_max"]))
        if name == "profile":
            settle = int(w["profile_settle"]) if step < SETTLE_BELOW_S else 0
            total += (n + settle) * (s.profiled_step_s + s.events_per_step * TRACE_S_PER_EVENT)
            steps += n + settle
        else:
            total += n * step
            steps += n
    if cost.get("profiled"):
        total += steps * (cost.get("device_ops", 0) + cost.get("host_ops", 0)) * PROFILER_STOP_S_PER_OP
    return total


@dataclass
class RulePlan:
    fixture: Fixture
    repeats: int
    runs: int
    seconds: float
    per_script: Dict[str, StepEstimate]
    missing_costs: bool


def rule_plan(fx: Fixture, repeats: int) -> RulePlan:
    data = costs_mod.load(fx.path) or {}
    scripts = data.get("scripts", {})
    steps = plan([fx], repeats)
    seconds = sum(run_estimate(fx, p.script, p.passes, scripts) for p in steps)
    per_script = {
        w: step_estimate(scripts[w])
        for w in SCRIPTS
        if w in scripts and "error" not in scripts[w] and "crashes" not in scripts[w]
    }
    missing = any(w not in scripts or "error" in scripts[w] for w in SCRIPTS)
    return RulePlan(fx, rule_repeats(fx, repeats), len(steps), seconds, per_script, missing)


def estimator(repeats: int) -> Callable[[Fixture], float]:
    """A function fixture -> estimated seconds, for measure()'s --time-budget."""
    cache: Dict[str, float] = {}

    def estimate(fx: Fixture) -> float:
        if str(fx.path) not in cache:
            cache[str(fx.path)] = rule_plan(fx, repeats).seconds
        return cache[str(fx.path)]

    return estimate


def _fmt_s(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def render(
    fixtures: Sequence[Fixture], repeats: Optional[int] = None, budget_s: float = DEFAULT_BUDGET_S
) -> Tuple[str, float]:
    """The plan of the session's parts (least certain first) as text, and its total
    in seconds; `repeats` overrides the parts' own (session.REPEATS)."""
    parts = session.parts(fixtures, repeats)
    plans = [(part, rule_plan(fx, part.repeats)) for part in parts for fx in part.fixtures]
    how = f"--repeats {repeats}" if repeats else "repeats per part"
    lines = [
        f"torchlint verify plan: {len(plans)} rule(s) in {len(parts)} part(s), least certain first, {how}; "
        "estimated for one H100 (method: docs/verify.md, 'Planning a run')",
        "",
    ]
    header = ("Part", "Rule", "Certainty", "Metric", "Repeats", "Runs", "Bad step", "Fixed step", "Estimate")
    rows = [header]
    for part, p in plans:
        steps = [_step_text(p, w) for w in SCRIPTS]
        rows.append(
            (
                str(part.number),
                p.fixture.rule,
                p.fixture.certainty.value,
                p.fixture.metric,
                str(p.repeats),
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
    total = sum(p.seconds for _, p in plans)
    runs = sum(p.runs for _, p in plans)
    lines += [
        "",
        f"Total: {runs} runs, {_fmt_s(total)} ({total:.0f} s); "
        f"{'within' if total <= budget_s else 'OVER'} the {_fmt_s(budget_s)} budget ({budget_s:.0f} s)",
        "",
        "Parts (scripts/gpu_verify.sh runs them in this order under one deadline):",
    ]
    for part in parts:
        seconds = sum(p.seconds for q, p in plans if q is part)
        lines.append(f"  {part.name}: --rules {part.rules} --repeats {part.repeats}   ({_fmt_s(seconds)})")
    left_out = session.unmeasured(fixtures)
    if left_out:
        lines += ["", f"Not in this session on {session.GPUS} GPU (in no part):"]
        lines += [f"  {fx.rule}: {why}" for fx, why in left_out]
    return "\n".join(lines) + "\n", total


def _step_text(p: RulePlan, script: str) -> str:
    if script == "bad" and p.fixture.bad_error:
        return "crashes"
    s = p.per_script.get(script)
    if s is None:
        return "?"
    where = "gpu" if s.gpu_s >= s.host_s else "host"
    return f"{s.step_s * 1000:.1f} ms ({where})"
