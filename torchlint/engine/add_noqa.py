"""`--add-noqa`: a `# noqa: CODE` comment on every line that has findings, as
Ruff's `--add-noqa` does, so that a project can adopt torchlint (or a new
rule) now and fix the existing findings later.

Where each comment goes, and which lines cannot take one, is
torchlint/source/noqa_comments.py; this mode lints the file, adds the
comments and keeps the result only if it parses wherever the original did.
It is idempotent: suppressed findings are not reported, so a second run adds
nothing. Notebooks: the comment goes in the cell; IPython lines are never
touched. A file that does not parse (TL000) is left alone.

`add_noqa(data, path, enabled)` works on a file's contents and returns the
new contents (None when nothing changed), how many comments it added or
extended, and warnings; it never writes (torchlint/files/runner.py does).
"""

from __future__ import annotations

import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING, AbstractSet, Optional, Tuple

from torchlint.findings import Problem
from torchlint.source.noqa_comments import noqa_edits

if TYPE_CHECKING:
    from torchlint.analysis.project import ProjectIndex


@dataclass(frozen=True)
class NoqaResult:
    new_data: Optional[bytes]  # None: nothing to change
    added: int  # lines that got (or extended) a suppression comment
    warnings: Tuple[Problem, ...] = ()
    problems: Tuple[Problem, ...] = ()


def _parses(text: str) -> bool:
    from torchlint.source.parsing import cpython_error

    return cpython_error(text) is None


def add_noqa(data: bytes, path: str, enabled: AbstractSet[str], project: Optional[ProjectIndex] = None) -> NoqaResult:
    """Suppression comments for every finding in a file's contents (see the
    module's docs), linted with the run's `project` index. Never raises for
    bad input: an undecodable file or one that does not parse is left alone."""
    from torchlint.engine.pipeline import is_notebook

    try:
        if is_notebook(path):
            return _notebook(data, path, enabled, project)
        return _source(data, path, enabled, project)
    except tokenize.TokenError as exc:
        return NoqaResult(None, 0, problems=(Problem(path, f"cannot add noqa comments: {exc}"),))


def _source(data: bytes, path: str, enabled: AbstractSet[str], project: Optional[ProjectIndex] = None) -> NoqaResult:
    from torchlint.engine.pipeline import BOM, lint_text
    from torchlint.source.decode import DecodeError, decode_source
    from torchlint.source.edits import apply_fix_groups

    try:
        decoded = decode_source(data)
    except DecodeError:
        return NoqaResult(None, 0)
    bom = BOM if decoded.text.startswith(BOM) else ""
    text = decoded.text[len(bom) :]
    result = lint_text(text, path, enabled, project=project)
    if any(f.code == "TL000" for f in result.findings):
        return NoqaResult(None, 0)
    edits, warnings = noqa_edits(text, list(result.findings), lambda row: f"{path}:{row}")
    if not edits:
        return NoqaResult(None, 0, tuple(warnings))
    new_text, added = apply_fix_groups(text, [(e,) for e in edits])
    if not _parses(new_text) and _parses(text):
        problem = Problem(path, "adding noqa comments would break the code; file left alone")
        return NoqaResult(None, 0, tuple(warnings), (problem,))
    try:
        new_data = decoded.encode(bom + new_text)
    except UnicodeEncodeError:  # pragma: no cover - the comments are ASCII
        return NoqaResult(None, 0, tuple(warnings))
    return NoqaResult(new_data, added, tuple(warnings))


def _notebook(data: bytes, path: str, enabled: AbstractSet[str], project: Optional[ProjectIndex] = None) -> NoqaResult:
    from torchlint.engine.pipeline import lint_text
    from torchlint.source import notebook

    try:
        cells = notebook.read(data)
    except notebook.NotebookError:
        return NoqaResult(None, 0)
    if cells is None:
        return NoqaResult(None, 0)
    result = lint_text(
        cells.source, path, enabled, displayed=cells.displayed_rows, project=project, cells=cells.cell_rows
    )
    if any(f.code == "TL000" for f in result.findings):
        return NoqaResult(None, 0)

    def where(row: int) -> str:
        i, cell_row = cells.locate(row)
        return f"{path}:cell {cells.cells[i].number}:{cell_row}"

    edits, warnings = noqa_edits(cells.source, list(result.findings), where)
    if not edits:
        return NoqaResult(None, 0, tuple(warnings))
    new_cells, added = cells.apply([(e,) for e in edits])
    if not _parses(new_cells.source) and _parses(cells.source):
        problem = Problem(path, "adding noqa comments would break the code; file left alone")
        return NoqaResult(None, 0, tuple(warnings), (problem,))
    new_data = new_cells.to_bytes()
    if new_data is None:
        return NoqaResult(None, 0, tuple(warnings))
    return NoqaResult(new_data, added, tuple(warnings))


__all__ = ["NoqaResult", "add_noqa"]
