"""One file's outcome: what linting, fixing or diffing its contents produced,
with the project questions its analysis asked. Frozen, plain data: the
runner's and the cache's unit, carried across process boundaries."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Optional, Tuple

from torchlint.findings import Finding, Problem

if TYPE_CHECKING:
    from torchlint.analysis.project.kinds import Dependency

# What the pipeline can do with a file: report findings, fix it in place, or show the fixes as a diff.
MODES = ("lint", "fix", "diff")


@dataclass(frozen=True)
class FileOutcome:
    """What linting, fixing or diffing one file's contents produced (the
    runner's and the cache's unit): findings, problems and, when fixing, the
    new contents."""

    path: str
    findings: Tuple[Finding, ...] = ()
    problems: Tuple[Problem, ...] = ()
    fixes_applied: int = 0
    # The fixed file contents when they differ from the original (fix/diff modes);
    # dropped once written by the runner.
    new_data: Optional[bytes] = None
    diff: Optional[str] = None  # diff mode: the unified diff
    written: bool = False
    # Text of the lines findings point at, for code frames and fingerprints:
    # ((cell, row, text), ...), cell None outside notebooks.
    lines: Tuple[Tuple[Optional[int], int, str], ...] = ()
    # Not problems (they leave the exit code alone): e.g. an unknown rule code
    # in a suppression comment. `path` is where ("a.py:3", "nb.ipynb:cell 2:1").
    warnings: Tuple[Problem, ...] = ()
    # The questions the file's analysis asked the project index, with their
    # answers (torchlint/analysis/project/): the cache reuses this outcome only
    # while the index still gives the same answers.
    dependencies: Tuple[Dependency, ...] = field(default=(), compare=False)

    @property
    def needs_write(self) -> bool:
        return self.new_data is not None and not self.written


def relabel(outcome: FileOutcome, path: str) -> FileOutcome:
    """`outcome` as if produced for `path`: its findings, problems and
    warnings name `path` instead of the path it was linted as. The cache
    stores outcomes keyed by contents, so a hit may come from a run that
    named the file differently (`src/a.py` from the project root, `a.py` from
    `src/`)."""
    old = outcome.path
    if old == path:
        return outcome

    def where(text: str) -> str:  # "a.py", "a.py:3", "nb.ipynb:cell 2:1"
        if text == old or text.startswith(old + ":"):
            return path + text[len(old) :]
        return text

    return replace(
        outcome,
        path=path,
        findings=tuple(replace(f, path=path) if f.path == old else f for f in outcome.findings),
        problems=tuple(replace(p, path=where(p.path)) for p in outcome.problems),
        warnings=tuple(replace(w, path=where(w.path)) for w in outcome.warnings),
    )
