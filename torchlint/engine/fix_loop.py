"""The fix loop: apply fixes until none applies, for a .py file and for a
notebook's cells alike.

Each pass applies every applicable fix that does not overlap an earlier one,
then lints the result again, so overlapping fixes are applied one at a time
against fresh positions. A pass whose combined result does not parse is
retried fix by fix; a fix whose result does not parse is refused and reported,
never returned. Fixes still offered after `MAX_FIX_PASSES` passes are reported
as not converging. Findings carry their fixes only when they survive
suppression (torchlint/engine/pipeline.py), so a suppressed finding is never fixed.

What is edited is a `Document`: its `source` is the Python text the pipeline
lints; it says where a finding's fix lands in it (a notebook refuses fixes
that span cells or touch IPython lines) and applies fixes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, FrozenSet, List, Optional, Protocol, Sequence, Set, Tuple

from torchlint.findings import Applicability, Edit, FileResult, Finding, Problem
from torchlint.source.edits import apply_fix_groups

MAX_FIX_PASSES = 10


class Document(Protocol):
    """Something the fix loop edits."""

    @property
    def source(self) -> str:
        """The Python text that is linted."""
        ...

    @property
    def displayed_rows(self) -> FrozenSet[int]:
        """Rows of `source` where a statement whose value is displayed starts (a
        notebook cell's last bare expression); empty for a .py file."""
        ...

    @property
    def cell_rows(self) -> Tuple[int, ...]:
        """Rows of `source` where a notebook cell starts, in order; empty for a .py file."""
        ...

    def edits_of(self, finding: Finding) -> Optional[Tuple[Edit, ...]]:
        """The edits of `finding`'s fix in this document, or None where it cannot apply."""
        ...

    def apply(self, fixes: Sequence[Tuple[Edit, ...]]) -> Tuple["Document", int]:
        """The document with the non-overlapping `fixes` applied, and how many were."""
        ...


@dataclass(frozen=True)
class TextDocument:
    """A .py file's text."""

    source: str
    displayed_rows: FrozenSet[int] = frozenset()
    cell_rows: Tuple[int, ...] = ()

    def edits_of(self, finding: Finding) -> Optional[Tuple[Edit, ...]]:
        return finding.fix.edits if finding.fix is not None else None

    def apply(self, fixes: Sequence[Tuple[Edit, ...]]) -> Tuple["TextDocument", int]:
        text, applied = apply_fix_groups(self.source, fixes)
        return TextDocument(text), applied


# Lints a document's source: its result, and whether it parsed.
Lint = Callable[[Document], Tuple[FileResult, bool]]


@dataclass(frozen=True)
class Fixed:
    """The loop's outcome: the last document, its lint, fixes applied, problems."""

    document: Document
    result: FileResult
    applied: int
    problems: Tuple[Problem, ...]


def fix_document(document: Document, lint: Lint, path: str, unsafe: bool = False) -> Fixed:
    """Apply safe (and, with `unsafe`, unsafe) fixes to `document` until none applies."""
    allowed = {Applicability.SAFE} | ({Applicability.UNSAFE} if unsafe else set())
    result, _ = lint(document)
    problems: List[Problem] = []
    refused: Set[Tuple[str, Tuple[Edit, ...]]] = set()  # fixes whose output did not parse
    total = 0
    converged = False
    for _ in range(MAX_FIX_PASSES):
        fixes = _applicable(document, result.findings, allowed, refused)
        if not fixes:
            converged = True
            break
        candidate, applied = document.apply([edits for _, edits in fixes])
        if applied == 0 or candidate.source == document.source:
            converged = True
            break
        linted, parsed = lint(candidate)
        if not parsed:
            one = _first_that_parses(document, fixes, lint, refused, problems, path)
            if one is None:
                converged = True
                break
            candidate, linted = one
            applied = 1
        document, result = candidate, linted
        total += applied
    if not converged:
        codes = sorted({code for code, _ in _applicable(document, result.findings, allowed, refused)})
        if codes:
            problems.append(
                Problem(
                    path,
                    f"fixes did not converge after {MAX_FIX_PASSES} passes ({', '.join(codes)}); kept the last result",
                )
            )
    all_problems = tuple(problems) + tuple(p for p in result.problems if p not in problems)
    return Fixed(document, result, total, all_problems)


def _applicable(
    document: Document, findings: Sequence[Finding], allowed, refused
) -> List[Tuple[str, Tuple[Edit, ...]]]:
    out = []
    for f in findings:
        if f.fix is None or f.fix.applicability not in allowed:
            continue
        edits = document.edits_of(f)
        if edits is not None and (f.code, edits) not in refused:
            out.append((f.code, edits))
    return out


def _first_that_parses(document: Document, fixes, lint: Lint, refused, problems: List[Problem], path: str):
    """Apply fixes singly and keep the first whose result parses (with its lint),
    refusing those that do not. Positions are relative to `document` as linted:
    only one fix is safe to apply on it, so the next pass offers the rest again."""
    for code, edits in fixes:
        candidate, n = document.apply([edits])
        if n and candidate.source != document.source:
            linted, parsed = lint(candidate)
            if parsed:
                return candidate, linted
        refused.add((code, edits))
        problem = Problem(path, "a fix produced code that does not parse; it was not applied", code)
        if problem not in problems:
            problems.append(problem)
    return None
