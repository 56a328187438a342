"""Findings and fixes: frozen, plain data that crosses process and JSON boundaries.

Rows are 1-based lines; columns are 1-based and count characters (code points),
as in Ruff's JSON output. Editors that need UTF-16 convert at their boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Optional, Tuple

if TYPE_CHECKING:
    from torchlint.analysis.project.kinds import Dependency


class Applicability(str, Enum):
    """How safe a fix is (Ruff's model)."""

    SAFE = "safe"
    UNSAFE = "unsafe"

    def __str__(self) -> str:  # "safe", not "Applicability.SAFE"
        return self.value


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text between (row, column) and (end_row, end_column) by `content`."""

    row: int
    column: int
    end_row: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    edits: Tuple[Edit, ...]


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    path: str
    row: int
    column: int
    end_row: int
    end_column: int
    fix: Optional[Fix] = None
    # For notebooks: the 1-based cell number; rows/columns are then cell-relative.
    cell: Optional[int] = None
    noqa_row: Optional[int] = field(default=None, compare=False)

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.row, self.column, self.code, self.message)

    @property
    def fixable(self) -> bool:
        return self.fix is not None


@dataclass(frozen=True)
class Problem:
    """Something that stopped part of the work: an unreadable file, a crashed rule,
    a fix that could not be written. Problems make the run exit 2."""

    path: str
    message: str
    rule: Optional[str] = None

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        rule = f"[{self.rule}] " if self.rule else ""
        return f"{where}{rule}{self.message}"


@dataclass(frozen=True)
class FileResult:
    """Everything linting (or fixing) one file produced."""

    path: str
    findings: Tuple[Finding, ...] = ()
    problems: Tuple[Problem, ...] = ()
    # Set by fixing: the new text and how many fixes were applied.
    fixed_source: Optional[str] = None
    fixes_applied: int = 0


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
