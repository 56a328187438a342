"""Findings and fixes: frozen, plain data that crosses process and JSON boundaries.

Rows are 1-based lines; columns are 1-based and count characters (code points),
as in Ruff's JSON output. Editors that need UTF-16 convert at their boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional, Tuple


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
