"""A rule's runs judged: its metric per script, its checks and mechanism,
an expected crash, and the result record `torchlint verify` writes
(measured, cut short, skipped, not run, smoke).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from torchlint.verify import verdict as V
from torchlint.verify.fixture_meta import (
    DERIVED,
    METRIC_PASS,
    OPS,
    PACKAGED_FIXTURES,
    ROOT,
    SCRIPTS,
    Fixture,
    parse_check,
    passes_of,
)
from torchlint.verify.runner import rule_repeats
from torchlint.verify.script_runs import Run

# ---------------------------------------------------------------------------
# Aggregation and verdicts


def metric_values(runs: Sequence[Run], script: str, metric: str) -> List[Optional[float]]:
    """The metric from every run of `script` that measured its window (its windows, for a derived metric)."""
    needed = passes_of(metric) if (metric in DERIVED or metric in METRIC_PASS) else {"timing"}
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
