"""Verdicts: did the fix move the rule's declared metric, beyond the noise?

Pure Python (no torch). Given the repeated samples of the declared metric for
the bad and the fixed script:

- the *change* is ``median(fixed) - median(bad)`` in points for
  ``busy_fraction`` (a fraction: 0.10 is 10 points) and
  ``(median(fixed) - median(bad)) / |median(bad)|`` for every other metric;
- the *effect* is the change signed by the declared direction (positive when
  the metric moved the way the fix should move it);
- the *spread* is the larger of the two scripts' interquartile ranges,
  expressed in the same unit as the change (points, or relative to the bad
  median); the *noise* is 3x the spread.

PASS when the mechanism check holds and the effect exceeds both the threshold
and the noise; FAIL when the mechanism check fails or even effect + noise does
not reach the threshold (the fix clearly does not deliver it); INCONCLUSIVE
otherwise (the spread swamps the effect); SKIPPED without CUDA; NOT_RUN for a
rule a partial report (``--rules`` / ``--time-budget``) did not measure.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

PASS, FAIL, INCONCLUSIVE, SKIPPED = "pass", "fail", "inconclusive", "skipped"
NOT_RUN = "not-run"  # not measured by this report (a --rules/--time-budget split; see --merge)
MEASURED = frozenset({PASS, FAIL, INCONCLUSIVE})
POINT_METRICS = frozenset({"busy_fraction"})
METRICS = ("busy_fraction", "samples_per_s", "peak_mem_bytes", "sync_count", "h2d_copies", "wall_s")
NOISE_FACTOR = 3.0


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default), for q in [0, 1]."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Summary:
    median: float
    spread: float  # interquartile range
    min: float
    max: float
    n: int
    samples: List[float] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def summarize(values: Sequence[Optional[float]]) -> Optional[Summary]:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    return Summary(
        median=statistics.median(xs),
        spread=quantile(xs, 0.75) - quantile(xs, 0.25),
        min=min(xs),
        max=max(xs),
        n=len(xs),
        samples=xs,
    )


def is_points(metric: str) -> bool:
    return metric in POINT_METRICS


def change(metric: str, bad: float, fixed: float) -> float:
    if is_points(metric):
        return fixed - bad
    if bad == 0:
        if fixed == 0:
            return 0.0
        return math.copysign(math.inf, fixed)
    return (fixed - bad) / abs(bad)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    change: Optional[float] = None
    effect: Optional[float] = None
    noise: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def decide(
    metric: str,
    direction: str,
    threshold: float,
    bad: Optional[Summary],
    fixed: Optional[Summary],
    mechanism_ok: bool = True,
    mechanism_reason: str = "",
    cuda: bool = True,
    skip_reason: str = "no CUDA device",
) -> Verdict:
    if not cuda:
        return Verdict(SKIPPED, skip_reason)
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', not {direction!r}")
    if not mechanism_ok and (bad is None or fixed is None):
        return Verdict(FAIL, "mechanism check failed: " + mechanism_reason)
    if bad is None or fixed is None:
        missing = "bad" if bad is None else "fixed"
        return Verdict(FAIL, f"no {metric} measured for the {missing} script")
    delta = change(metric, bad.median, fixed.median)
    sign = 1.0 if direction == "up" else -1.0
    effect = sign * delta
    spread = max(bad.spread, fixed.spread)
    if not is_points(metric):
        spread = spread / abs(bad.median) if bad.median else (0.0 if spread == 0 else math.inf)
    noise = NOISE_FACTOR * spread
    if not mechanism_ok:
        return Verdict(FAIL, "mechanism check failed: " + mechanism_reason, delta, effect, noise)
    if effect > threshold and effect > noise:
        return Verdict(
            PASS,
            f"effect {_fmt(metric, effect)} exceeds threshold {_fmt(metric, threshold)} "
            f"and 3x spread {_fmt(metric, noise)}",
            delta,
            effect,
            noise,
        )
    if effect + noise <= threshold:
        return Verdict(
            FAIL,
            f"effect {_fmt(metric, effect)} is short of threshold {_fmt(metric, threshold)} "
            f"beyond the noise (3x spread {_fmt(metric, noise)})",
            delta,
            effect,
            noise,
        )
    return Verdict(
        INCONCLUSIVE,
        f"3x spread {_fmt(metric, noise)} swamps effect {_fmt(metric, effect)} (threshold {_fmt(metric, threshold)})",
        delta,
        effect,
        noise,
    )


def _fmt(metric: str, value: float) -> str:
    if math.isinf(value):
        return "inf"
    if is_points(metric):
        return f"{value * 100:+.1f} pts"
    return f"{value * 100:+.1f}%"


def format_change(metric: str, value: Optional[float]) -> str:
    return "n/a" if value is None else _fmt(metric, value)


def format_threshold(metric: str, direction: str, threshold: float) -> str:
    arrow = "up" if direction == "up" else "down"
    if is_points(metric):
        return f"{arrow} >= {threshold * 100:g} pts"
    return f"{arrow} >= {threshold * 100:g}%"
