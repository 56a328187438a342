"""One file through the pipeline, every door alike:

    decode -> parse -> facts -> rules -> suppression -> fixes -> result

- decode (torchlint/source/decode.py): bytes to text; a notebook (torchlint/source/notebook.py)
  to its code cells as one module;
- parse (torchlint/source/parsing.py), guarded: a file that cannot be decoded or
  parsed gets TL000 (torchlint/rules/syntax_error.py) and nothing else;
- facts and rules (torchlint/engine/checker.py): the rules' reports;
- suppression (torchlint/source/suppression.py): reports on suppressed lines are
  dropped, before any fix is built for them;
- fixes (torchlint/engine/node_edits.py): the surviving reports become findings with
  their fixes' edits, from one code generation pass; fixing runs the one fix
  loop (torchlint/engine/fix_loop.py) over a .py file's text or a notebook's cells.

`lint_text`/`fix_text` work on Python source text; `process_bytes` on a file's
contents (a .py or a .ipynb), and is what the runner and torchlint.api call.

Each takes an optional `reuse` (a `Reuse`: torchlint/engine/incremental.py's
document state) through which a lint re-parses incrementally, renders only
new statements and answers a text it linted before from memory; every one of
its answers is what the cold lint gives, so the results are the same.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, AbstractSet, Callable, Iterable, List, Optional, Protocol, Sequence, Tuple, Type

import libcst as cst

from torchlint.engine.checker import checked, enabled_rules
from torchlint.engine.fix_loop import Fixed, TextDocument, fix_document
from torchlint.engine.gc_pause import gc_paused
from torchlint.engine.node_edits import ParentOf, Rendered, fix_edits, render
from torchlint.engine.outcome import MODES, FileOutcome
from torchlint.engine.precheck import could_matter
from torchlint.findings import Applicability, FileResult, Finding, Fix, Problem
from torchlint.rules.base import Report, Rule
from torchlint.rules.syntax_error import SyntaxErrorRule
from torchlint.source import notebook
from torchlint.source.decode import DecodeError, decode_source
from torchlint.source.edits import LineIndex, diff_edits, replace_nodes, unified_diff
from torchlint.source.parsing import SourceError, cpython_error, parse
from torchlint.source.suppression import parse_suppressions, unknown_codes

if TYPE_CHECKING:
    from torchlint.analysis.project import FileView, ProjectIndex

log = logging.getLogger("torchlint")

BOM = "\ufeff"


def is_notebook(path: str) -> bool:
    return path.endswith(".ipynb")


# A lint's result, and whether its text parsed.
Linted = Tuple[FileResult, bool]


class Reuse(Protocol):
    """What a lint may take from earlier lints of the same document; each
    answer must be the one the cold lint computes."""

    def cached(self, text: str, precheck: bool) -> Optional[Linted]:
        """The lint of exactly this text, if kept."""
        ...

    def store(self, text: str, precheck: bool, linted: Linted) -> None: ...

    def parse(self, text: str) -> cst.Module:
        """`parsing.parse(text)` (raises SourceError alike)."""
        ...

    def render(
        self,
        module: cst.Module,
        nodes: Iterable[cst.CSTNode],
        anchors: Iterable[cst.CSTNode],
        parent_of: Optional[ParentOf] = None,
    ) -> Rendered:
        """`node_edits.render(module, nodes, anchors)`; `parent_of`: each
        visited node's parent (the facts'), to find the statements holding them."""
        ...

    def checkpoint(self) -> None:
        """Called between stages; may raise a BaseException to stop the lint."""
        ...

    def statement_codes(self, module: cst.Module) -> Optional[Callable[[int], str]]:
        """The code of `module`'s top-level statement i, where kept (shared
        with the renderer); None: not kept."""
        ...


class _Cold:
    """No reuse: parse and render from scratch."""

    def cached(self, text: str, precheck: bool) -> Optional[Linted]:
        return None

    def store(self, text: str, precheck: bool, linted: Linted) -> None:
        pass

    def parse(self, text: str) -> cst.Module:
        return parse(text)

    def render(
        self,
        module: cst.Module,
        nodes: Iterable[cst.CSTNode],
        anchors: Iterable[cst.CSTNode],
        parent_of: Optional[ParentOf] = None,
    ) -> Rendered:
        return render(module, nodes, anchors)  # one pass over the module: no parent map needed

    def checkpoint(self) -> None:
        pass

    def statement_codes(self, module: cst.Module) -> Optional[Callable[[int], str]]:
        return None


COLD: Reuse = _Cold()


# -- Python source text ---------------------------------------------------------------------


def lint_text(
    text: str,
    path: str,
    enabled: AbstractSet[str],
    precheck: bool = True,
    reuse: Reuse = COLD,
    displayed: AbstractSet[int] = frozenset(),
    project: Optional[ProjectIndex] = None,
    cells: Sequence[int] = (),
) -> FileResult:
    """Findings (sorted, each with its fix) and problems for Python source text.
    A leading BOM is not part of the text (as for CPython): positions and edits
    ignore it. `project`: the index of the project the file is part of (None:
    an index of this text alone; see torchlint/analysis/project/).

    With `precheck` (torchlint/engine/precheck.py), a file that mentions nothing any
    enabled rule looks for is only checked for syntax (TL000) by CPython's
    parser, falling back to the full parse for its message when that fails."""
    text = text[1:] if text.startswith(BOM) else text
    return _lint(text, path, enabled, precheck, reuse, displayed, project, cells)[0]


def fix_text(
    text: str,
    path: str,
    enabled: AbstractSet[str],
    unsafe: bool = False,
    reuse: Reuse = COLD,
    project: Optional[ProjectIndex] = None,
) -> FileResult:
    """Apply safe (and, with `unsafe`, unsafe) fixes until none applies; the
    result holds the fixed text, the findings left in it and the fixes applied."""
    bom = BOM if text.startswith(BOM) else ""
    fixed = fix_document(TextDocument(text[len(bom) :]), _linter(path, enabled, reuse, project), path, unsafe)
    result = fixed.result
    return FileResult(path, result.findings, fixed.problems, bom + fixed.document.source, fixed.applied)


def _linter(path: str, enabled: AbstractSet[str], reuse: Reuse = COLD, project: Optional[ProjectIndex] = None):
    return lambda document: _lint(
        document.source,
        path,
        enabled,
        reuse=reuse,
        displayed=document.displayed_rows,
        project=project,
        cells=document.cell_rows,
    )


def _lint(
    text: str,
    path: str,
    enabled: AbstractSet[str],
    precheck: bool = True,
    reuse: Reuse = COLD,
    displayed: AbstractSet[int] = frozenset(),
    project: Optional[ProjectIndex] = None,
    cells: Sequence[int] = (),
) -> Linted:
    """The lint of BOM-less `text`, and whether it parsed (with the cyclic
    garbage collector paused: see torchlint/engine/gc_pause.py). `displayed`: rows
    where a notebook cell's displayed last expression starts; `cells`: rows
    where its cells start (a lint kept by text alone cannot know them:
    notebooks are not answered from `reuse`)."""
    notebook_rows = bool(displayed or cells)
    kept = reuse.cached(text, precheck) if not notebook_rows else None
    if kept is not None:
        return kept
    with gc_paused():
        linted = _lint_unpaused(text, path, enabled, precheck, reuse, displayed, project, cells)
    if not notebook_rows:
        reuse.store(text, precheck, linted)
    return linted


def project_view(project: Optional[ProjectIndex], path: str, text: str) -> FileView:
    """The project index as file `path` asks it; without an index, one of this
    text alone (summarised only if a question needs it)."""
    from torchlint.analysis.project import ProjectIndex

    return (project if project is not None else ProjectIndex.of_text(path, text)).view(path)


def _lint_unpaused(
    text: str,
    path: str,
    enabled: AbstractSet[str],
    precheck: bool,
    reuse: Reuse,
    displayed: AbstractSet[int],
    project: Optional[ProjectIndex] = None,
    cells: Sequence[int] = (),
) -> Linted:
    view = project_view(project, path, text)
    if precheck and not _may_report(text, enabled_rules(enabled), view):
        if cpython_error(text) is None:
            return FileResult(path), True
    try:
        module = reuse.parse(text)
    except SourceError as exc:
        return FileResult(path, (SyntaxErrorRule.finding(path, exc.message, exc.row, exc.column),)), False
    try:
        reports, problems, analysis = checked(
            module,
            text,
            path,
            enabled,
            reuse.checkpoint,
            displayed=displayed,
            project=view,
            cells=cells,
            statement_code=reuse.statement_codes(module) if cells else None,
        )
        reuse.checkpoint()
        parent_of = analysis.facts.parent_of
        findings = _findings(module, text, path, reports, problems, reuse, parent_of) if reports else []
    except RecursionError:
        return FileResult(path, (), (Problem(path, "file too deeply nested to analyse; skipped"),)), True
    except Exception as exc:  # shared analysis (facts, positions, suppressions): this file only
        log.exception("analysis failed on %s", path)
        problem = Problem(path, f"internal error in analysis: {type(exc).__name__}: {exc}")
        return FileResult(path, (), (problem,)), True
    return FileResult(path, tuple(findings), tuple(problems)), True


def _may_report(text: str, rules: Sequence[Type[Rule]], project: FileView) -> bool:
    """Some enabled rule may report on `text`: the text mentions something
    rules look for (torchlint/engine/precheck.py) and some rule's own necessary
    condition holds (`Rule.may_report`)."""
    return could_matter(text, rules) and any(rule.may_report(text, project) for rule in rules)


def _findings(
    module,
    text: str,
    path: str,
    reports: Sequence[Report],
    problems: List[Problem],
    reuse: Reuse = COLD,
    parent_of: Optional[ParentOf] = None,
) -> List[Finding]:
    """Position the reports, drop the suppressed ones and duplicates, and build
    the fixes of those that remain."""
    anchors = [old for rep in reports if rep.replacements for old in rep.replacements]
    rendered = reuse.render(module, [rep.node for rep in reports], anchors, parent_of)
    suppressions = parse_suppressions(text)
    kept: List[Tuple[Report, Finding]] = []
    seen = set()
    for rep in reports:
        pos = rendered.positions.get(rep.node)
        if pos is None:
            problems.append(Problem(path, "internal error: reported a node outside the module", rep.rule.CODE))
            continue
        row = pos.start.line
        if suppressions.suppressed(rep.rule.CODE, row):
            continue
        finding = Finding(
            code=rep.rule.CODE,
            name=rep.rule.NAME,
            message=rep.message,
            path=path,
            row=row,
            column=pos.start.column + 1,
            end_row=pos.end.line,
            end_column=pos.end.column + 1,
            noqa_row=row,
        )
        key = (finding.code, finding.row, finding.column, finding.message)
        if key not in seen:
            seen.add(key)
            kept.append((rep, finding))
    fixes = _Fixes(module, text, path, rendered, problems)
    out = [fixes.attach(rep, finding) for rep, finding in kept]
    out.sort(key=Finding.sort_key)
    return out


class _Fixes:
    """Builds the fixes of one lint's findings."""

    def __init__(self, module, text: str, path: str, rendered, problems: List[Problem]) -> None:
        self.module = module
        self.text = text
        self.path = path
        self.rendered = rendered
        self.problems = problems
        self.index: Optional[LineIndex] = None
        self.roundtrip: Optional[bool] = None

    def attach(self, rep: Report, finding: Finding) -> Finding:
        if not rep.replacements or not self._roundtrips():
            return finding
        try:
            edits = self._edits(rep)
        except Exception as exc:
            log.exception("fix of %s failed on %s", rep.rule.CODE, self.path)
            message = f"internal error building fix: {type(exc).__name__}: {exc}"
            self.problems.append(Problem(self.path, message, rep.rule.CODE))
            return finding
        if not edits:
            return finding
        fix = Fix(rep.applicability or Applicability.SAFE, rep.fix_message or rep.rule.FIX_TITLE or "", edits)
        return replace(finding, fix=fix)

    def _roundtrips(self) -> bool:
        # LibCST does not reproduce some sources exactly (a final lone \r is
        # dropped); a fix diffed against such a source would lose that text.
        if self.roundtrip is None:
            self.roundtrip = self.rendered.code == self.text
            if not self.roundtrip:
                log.debug("%s does not round-trip through LibCST; fixes withheld", self.path)
        return self.roundtrip

    def _edits(self, rep: Report):
        assert rep.replacements is not None
        if self.index is None:
            self.index = LineIndex(self.text)
        edits = fix_edits(self.module, self.text, self.index, self.rendered.anchors, rep.replacements)
        if edits is None:  # not provably local: transform the module and diff
            edits = diff_edits(self.text, replace_nodes(self.module, rep.replacements).code)
        return edits


# -- a file's contents ----------------------------------------------------------------------


def process_bytes(
    data: bytes,
    path: str,
    enabled: AbstractSet[str],
    mode: str = "lint",
    unsafe: bool = False,
    reuse: Reuse = COLD,
    project: Optional[ProjectIndex] = None,
) -> FileOutcome:
    """Lint (mode "lint"), fix ("fix": the outcome carries the new bytes) or
    diff ("diff": also the unified diff) a file's contents; no I/O. A path
    ending in .ipynb is read as a notebook, anything else as Python source.
    Unknown codes in suppression comments become the outcome's warnings.
    `project`: the index of the project the file is part of (None: this file alone)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    if is_notebook(path):
        return _notebook(data, path, enabled, mode, unsafe, reuse, project)
    try:
        decoded = decode_source(data)
    except DecodeError as exc:  # TL000, which is always reported
        return FileOutcome(path, (SyntaxErrorRule.finding(path, exc.message, exc.row, exc.column),))
    text = decoded.text
    warnings = _suppression_warnings(text, lambda row: f"{path}:{row}")
    if mode == "lint":
        result = lint_text(text, path, enabled, reuse=reuse, project=project)
        return FileOutcome(
            path, result.findings, result.problems, lines=_lines_for(text, result.findings), warnings=warnings
        )
    result = fix_text(text, path, enabled, unsafe=unsafe, reuse=reuse, project=project)
    new_text = result.fixed_source if result.fixed_source is not None else text
    if new_text == text:
        return FileOutcome(
            path, result.findings, result.problems, lines=_lines_for(text, result.findings), warnings=warnings
        )
    try:
        new_data = decoded.encode(new_text)
    except UnicodeEncodeError as exc:  # a fix introduced text the file's encoding cannot hold
        original = lint_text(text, path, enabled, reuse=reuse, project=project)
        problem = Problem(path, f"fixed code cannot be encoded as {decoded.encoding}: {exc.reason}; not fixed")
        return FileOutcome(
            path,
            original.findings,
            result.problems + (problem,),
            lines=_lines_for(text, original.findings),
            warnings=warnings,
        )
    return FileOutcome(
        path,
        result.findings,
        result.problems,
        fixes_applied=result.fixes_applied,
        new_data=new_data,
        diff=unified_diff(path, text, new_text) if mode == "diff" else None,
        lines=_lines_for(new_text, result.findings),
        warnings=warnings,
    )


def _suppression_warnings(text: str, where) -> Tuple[Problem, ...]:
    """A warning for each unknown rule code in a suppression comment; `where`
    names a row of `text` ("a.py:3")."""
    from torchlint.rules import all_codes

    return tuple(
        Problem(where(row), f"unknown rule code {code!r} in `{comment}` (see `torchlint rules`); it suppresses nothing")
        for row, code, comment in unknown_codes(text, all_codes())
    )


def _notebook(
    data: bytes,
    path: str,
    enabled: AbstractSet[str],
    mode: str,
    unsafe: bool,
    reuse: Reuse,
    project: Optional[ProjectIndex] = None,
) -> FileOutcome:
    try:
        cells = notebook.read(data)
    except notebook.NotebookError as exc:
        return FileOutcome(path, (SyntaxErrorRule.finding(path, f"cannot read notebook: {exc}"),))
    if cells is None:
        return FileOutcome(path)

    def where(row: int) -> str:
        i, cell_row = cells.locate(row)
        return f"{path}:cell {cells.cells[i].number}:{cell_row}"

    warnings = _suppression_warnings(cells.source, where)
    if mode == "lint":
        result, _ = _lint(
            cells.source,
            path,
            enabled,
            reuse=reuse,
            displayed=cells.displayed_rows,
            project=project,
            cells=cells.cell_rows,
        )
        fixed = Fixed(cells, result, 0, result.problems)
    else:
        fixed = fix_document(cells, _linter(path, enabled, reuse, project), path, unsafe)
    final: notebook.Cells = fixed.document  # type: ignore[assignment]
    findings = tuple(sorted((final.to_cell(f) for f in fixed.result.findings), key=Finding.sort_key))
    lines = final.lines_for(findings)
    problems = fixed.problems
    new_data = None
    if fixed.applied:
        try:
            new_data = final.to_bytes()
        except ValueError as exc:  # pragma: no cover - notebook.read validated the JSON
            problems += (Problem(path, f"cannot write notebook: {exc}"),)
    if new_data is None or new_data == data:
        return FileOutcome(path, findings, problems, lines=lines, warnings=warnings)
    diff = None
    if mode == "diff":
        diff = notebook.cell_diff(path, data, new_data)
    return FileOutcome(
        path,
        findings,
        problems,
        fixes_applied=fixed.applied,
        new_data=new_data,
        diff=diff,
        lines=lines,
        warnings=warnings,
    )


def process_text(
    text: str,
    path: str,
    enabled: AbstractSet[str],
    mode: str = "lint",
    unsafe: bool = False,
    reuse: Reuse = COLD,
    project: Optional[ProjectIndex] = None,
) -> FileResult:
    """`process_bytes` for contents held as text (an editor's buffer, a string):
    Python source is linted as it is; a notebook's JSON is read from its UTF-8."""
    if is_notebook(path):
        data = text.encode("utf-8", "surrogatepass")
        outcome = process_bytes(data, path, enabled, mode, unsafe, reuse, project)
        if mode == "lint":
            return FileResult(path, outcome.findings, outcome.problems)
        new = outcome.new_data.decode("utf-8", "surrogatepass") if outcome.new_data is not None else text
        return FileResult(path, outcome.findings, outcome.problems, new, outcome.fixes_applied)
    if mode == "lint":
        return lint_text(text, path, enabled, reuse=reuse, project=project)
    return fix_text(text, path, enabled, unsafe, reuse, project)


def _rows_of(f: Finding) -> Tuple[int, ...]:
    """The rows a report may show or measure: the finding's and its fix's."""
    rows: Tuple[int, ...] = (f.row, f.end_row)
    if f.fix is not None:
        rows += tuple(r for e in f.fix.edits for r in (e.row, e.end_row))
    return rows


def _lines_for(text: str, findings: Sequence[Finding]) -> Tuple[Tuple[Optional[int], int, str], ...]:
    """Text of the lines findings (and their fixes) touch, for code frames and
    UTF-8 columns: ((None, row, text), ...)."""
    rows = sorted({row for f in findings if f.cell is None for row in _rows_of(f)})
    if not rows:
        return ()
    all_lines = text.splitlines()
    return tuple((None, r, all_lines[r - 1]) for r in rows if 0 < r <= len(all_lines))


__all__ = ["COLD", "Linted", "Reuse", "fix_text", "is_notebook", "lint_text", "process_bytes", "process_text"]
