"""Whether a rule has earned the default set: stable or preview, as measured.

A rule is **stable** when its first-sight precision (findings judged on pool
repositories it was never tuned on, `docs/accuracy/rounds/`) over its last
two rounds judged with the current guide (`GUIDE`) that drew its findings is
at least `MIN_PRECISION` with at least `MIN_JUDGED` findings judged, and none
of its offered fixes was judged wrong; otherwise it is **preview**: on only with `--preview` (`preview = true`). The measured
figures live in the generated `catalog.STATUS` (read through
`torchlint.rules.status_of`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Tuple

MIN_PRECISION = 0.90
MIN_JUDGED = 10
ROUNDS_CONSIDERED = 2


class Stability(enum.Enum):
    STABLE = "stable"
    PREVIEW = "preview"


@dataclass(frozen=True)
class RuleStatus:
    """A rule's status and the first-sight measurement it rests on."""

    stability: Stability
    judged: int = 0
    tp: int = 0
    fixes_wrong: int = 0
    rounds: Tuple[int, ...] = ()

    @property
    def precision(self) -> Optional[float]:
        return self.tp / self.judged if self.judged else None

    @property
    def is_preview(self) -> bool:
        return self.stability is Stability.PREVIEW

    def measured(self) -> str:
        """`0.92 (23/25, rounds 1-2)`, or why there is no figure."""
        if not self.rounds:
            return "not measured on first sight yet"
        where = f"round {self.rounds[0]}" if len(self.rounds) == 1 else f"rounds {', '.join(map(str, self.rounds))}"
        if not self.judged:
            return f"no findings to judge ({where})"
        wrong = f", {self.fixes_wrong} fix{'es' if self.fixes_wrong != 1 else ''} wrong" if self.fixes_wrong else ""
        return f"{self.precision:.2f} ({self.tp}/{self.judged}, {where}{wrong})"


ALWAYS_ON = RuleStatus(Stability.STABLE)
# A file that cannot be read or parsed is always reported: these are not judged rules.
ALWAYS_REPORTED = frozenset({"TL000", "TL001"})
# The judging guide a round must have used to count towards a status (docs/accuracy.md): rounds
# judged with an earlier guide measured another thing.
GUIDE = "v3"


def decide(judged: int, tp: int, fixes_wrong: int, rounds: Tuple[int, ...]) -> RuleStatus:
    """The policy: stable on enough judged findings, precise enough, no wrong fix."""
    stable = judged >= MIN_JUDGED and tp / judged >= MIN_PRECISION and fixes_wrong == 0
    return RuleStatus(Stability.STABLE if stable else Stability.PREVIEW, judged, tp, fixes_wrong, rounds)
