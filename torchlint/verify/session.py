"""The one-call GPU session (``scripts/gpu_verify.sh``): its parts, their
repeats and its time limits.

The GPU machine gives one command of at most 10 minutes; the session takes
``LIMIT_S`` of it: environment capture, then one ``python -m torchlint.verify``
part per certainty level, least certain first, sharing one deadline (each part
gets ``--time-budget`` = what is left of ``RULES_BUDGET_S``), then the merge.
``python -m torchlint.verify.session [--fixtures DIR]`` prints the parts, one
per line: ``name<TAB>rules<TAB>repeats``, for the script to read."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint.verify.fixture_meta import Certainty, Fixture, default_fixtures_dir, discover, run_order, too_few_gpus

LIMIT_S = 540  # the whole call: 9 of the device command's 10 minutes
RULES_BUDGET_S = 480  # the parts' shared budget: the limit less environment capture (~30 s) and the merge
# Repeats per part, what fits RULES_BUDGET_S: three for the rules whose effect is in doubt (a
# spread, the interquartile range, to hold the effect against); two for the medium part (a
# median and a range; three no longer fit with 16 fixtures: docs/verify.md, '--plan'); one
# pair for the placement family, whose effects (a step on the CPU vs the GPU, or a crash)
# need no spread to be read.
REPEATS: Dict[Certainty, int] = {Certainty.LOW: 3, Certainty.MEDIUM: 2, Certainty.HIGH: 1}
GPUS = 1  # the session's machine: fixtures that need more (meta.toml min_gpus) are in no part


@dataclass(frozen=True)
class Part:
    number: int
    certainty: Certainty
    repeats: int
    fixtures: Tuple[Fixture, ...]

    @property
    def name(self) -> str:
        return f"part{self.number}-{self.certainty.value}"

    @property
    def rules(self) -> str:
        return ",".join(fx.rule for fx in self.fixtures)


def unmeasured(fixtures: Sequence[Fixture], gpus: int = GPUS) -> List[Tuple[Fixture, str]]:
    """The fixtures a session on `gpus` GPUs leaves out, with why: too few GPUs, or
    a cost the plan cannot estimate (meta.toml `own_session`: measure it with
    `torchlint verify --rules CODE` in a session of its own)."""
    out = []
    for fx in run_order(fixtures):
        why = too_few_gpus(fx, gpus)
        if why is None and fx.own_session:
            why = f"in a session of its own (torchlint verify --rules {fx.rule}): {fx.own_session}"
        if why is not None:
            out.append((fx, why))
    return out


def parts(fixtures: Sequence[Fixture], repeats: Optional[int] = None, gpus: int = GPUS) -> List[Part]:
    """One part per certainty level, least certain first; `repeats` overrides REPEATS.
    Fixtures that need more than `gpus` GPUs are in none (see `unmeasured`)."""
    out: List[Part] = []
    left_out = {id(fx) for fx, _ in unmeasured(fixtures, gpus)}
    for level in Certainty:
        group = tuple(fx for fx in run_order(fixtures) if fx.certainty is level and id(fx) not in left_out)
        if group:
            out.append(Part(len(out) + 1, level, repeats or REPEATS[level], group))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchlint.verify.session", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=None)
    args = parser.parse_args(argv)
    for part in parts(discover(args.fixtures or default_fixtures_dir())):
        print(f"{part.name}\t{part.rules}\t{part.repeats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
