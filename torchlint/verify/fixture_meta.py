"""A fixture pair as `torchlint verify` reads it: `bad.py`, `fixed.py` and
`meta.toml` (the rule, its metric, direction and threshold, its checks),
loaded and checked; where the fixtures are; which to run, in what order.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from torchlint.verify import verdict as V
from torchlint.verify.harness import DEFAULT_WINDOWS, PASSES

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


CHECK_RE = re.compile(r"^\s*(bad|fixed)\.(\w+)\s*(>=|<=|==|!=|>|<)\s*(?:(bad|fixed)\.(\w+)|(-?[0-9.eE+-]+))\s*$")


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
            if name is not None and passes_of(name) & set(skip):
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


def passes_of(metric: str) -> set:
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
