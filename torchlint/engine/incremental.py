"""Lints of one document as it changes (an editor's buffer): each equal to a
cold lint of its text, computed from what the previous lints left.

- the module comes from an incremental parse (torchlint/source/reparse.py): only the
  top-level statements an edit touched are parsed again;
- positions and fix anchors are rendered only for the statements that hold
  findings and are new, or whose findings are (torchlint/engine/render_cache.py);
- a text linted before (an undo, the result of a fix-all the editor then
  applies, a code action on text just linted) is answered from memory;
- a lint can be cancelled between stages and between rules (`cancelled`),
  when a newer version of the document makes it stale.

The facts and the rules still run over the whole module each time: the shared
analysis (torchlint/analysis/) builds its facts per file, reading the other
files of the project through the index it is given (`project`). A change of
index drops the kept lints. Per-function reuse of facts belongs in the
analysis (see docs/performance.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Tuple

import libcst as cst

from torchlint.config import Settings
from torchlint.engine.node_edits import Rendered, render
from torchlint.engine.pipeline import BOM, Linted, ParentOf, is_notebook, process_text
from torchlint.engine.render_cache import RenderCache
from torchlint.findings import Applicability, Edit, FileResult
from torchlint.source import notebook
from torchlint.source.edits import apply_fix_groups
from torchlint.source.parsing import cpython_error
from torchlint.source.reparse import Parsed, reparse

if TYPE_CHECKING:
    from torchlint.analysis.project import ProjectIndex

# Texts whose lint is kept per document (the current one, a few before it, and
# the candidates of a fix-all).
KEPT_RESULTS = 8


class Cancelled(BaseException):
    """A lint stopped because its text is stale. A BaseException, so that no
    stage's `except Exception` (a crashed rule becomes a problem) catches it."""


def _never() -> bool:
    return False


class DocumentState:
    """What one document's lints reuse (implements pipeline.Reuse)."""

    def __init__(self) -> None:
        self.parsed: Optional[Parsed] = None
        self.renders = RenderCache()
        self.results: "OrderedDict[Tuple[str, bool], Linted]" = OrderedDict()
        self.cancelled: Callable[[], bool] = _never

    def cached(self, text: str, precheck: bool) -> Optional[Linted]:
        found = self.results.get((text, precheck))
        if found is not None:
            self.results.move_to_end((text, precheck))
        return found

    def store(self, text: str, precheck: bool, linted: Linted) -> None:
        self.results[(text, precheck)] = linted
        while len(self.results) > KEPT_RESULTS:
            self.results.popitem(last=False)

    def parse(self, text: str) -> cst.Module:
        self.parsed = reparse(self.parsed, text)
        return self.parsed.module

    def render(
        self,
        module: cst.Module,
        nodes: Iterable[cst.CSTNode],
        anchors: Iterable[cst.CSTNode],
        parent_of: Optional[ParentOf] = None,
    ) -> Rendered:
        if self.parsed is not None and self.parsed.module is module:
            return self.renders.render(self.parsed, nodes, anchors, parent_of)
        return render(module, nodes, anchors)

    def checkpoint(self) -> None:
        if self.cancelled():
            raise Cancelled()

    def statement_codes(self, module: cst.Module) -> Optional[Callable[[int], str]]:
        if self.parsed is not None and self.parsed.module is module:
            return self.parsed.statement_code
        return None


class Session:
    """One document's lints and fixes under one path and settings: `check` and
    `fix` give exactly what `api.check` and `api.fix_source` give for the same
    text, faster after the first. Thread-safe (one call at a time)."""

    def __init__(self, path: str, settings: Optional[Settings] = None) -> None:
        self.path = path
        self.settings = settings or Settings()
        self.enabled = self.settings.enabled_for(path)
        self.state = DocumentState()
        self._lock = threading.Lock()
        self._project: Optional["ProjectIndex"] = None

    def _use(self, project: Optional["ProjectIndex"]) -> None:
        """Lint against `project` from now on; kept lints read the index they
        were made with, so a different index drops them (the parse stays)."""
        if project is not self._project:
            self._project = project
            self.state.results.clear()

    def check(
        self,
        source: str,
        cancelled: Optional[Callable[[], bool]] = None,
        project: Optional["ProjectIndex"] = None,
    ) -> FileResult:
        """Findings and problems for `source` (read as part of `project`, the
        index of the project it belongs to); raises Cancelled when
        `cancelled()` turns true before the lint ends."""
        with self._lock:
            self._use(project)
            self.state.cancelled = cancelled or _never
            try:
                return process_text(source, self.path, self.enabled, reuse=self.state, project=project)
            finally:
                self.state.cancelled = _never

    def fix(
        self,
        source: str,
        unsafe: bool = False,
        cancelled: Optional[Callable[[], bool]] = None,
        project: Optional["ProjectIndex"] = None,
    ) -> Tuple[str, FileResult]:
        """The fixed text and its result (`fix_source`): the first pass applies
        the fixes of the lint kept for `source`; each further pass lints the
        fixed text incrementally (and keeps that lint: the editor's next
        change is usually exactly that text)."""
        with self._lock:
            self._use(project)
            self.state.cancelled = cancelled or _never
            try:
                result = process_text(
                    source, self.path, self.enabled, mode="fix", unsafe=unsafe, reuse=self.state, project=project
                )
            finally:
                self.state.cancelled = _never
        return (result.fixed_source if result.fixed_source is not None else source), result

    def fix_from_kept(
        self, source: str, cancelled: Optional[Callable[[], bool]] = None, project: Optional["ProjectIndex"] = None
    ) -> Tuple[str, Optional[Tuple[Edit, ...]]]:
        """Every safe fix applied, built from the fixes of the lint kept for
        `source` (an editor's fix-all: no lint of the fixed text first): the
        new text, and the edits that make it from `source` (None where the fix
        loop had to run). The one pass applies all of them when none overlaps
        another (a notebook: each within its cell), and the result must
        compile; otherwise (overlapping fixes, a BOM) the fix loop takes over
        (`fix`), still starting from the kept lint. Unlike `--fix`, fixes that
        only appear once these are applied wait for the next fix-all."""
        result = self.check(source, cancelled, project)
        safe = [f.fix.edits for f in result.findings if f.fix is not None and f.fix.applicability == Applicability.SAFE]
        if not safe:
            return source, ()
        if is_notebook(self.path) and not source.startswith(BOM):
            with self._lock:  # reads the kept results, which a lint on another thread may be updating
                fixed_notebook = self._notebook_from_kept(source)
            if fixed_notebook is not None:
                return fixed_notebook, None
        elif not source.startswith(BOM):
            fixed, applied = apply_fix_groups(source, safe)
            if applied == len(safe) and (cpython_error(fixed) is None or cpython_error(source) is not None):
                return fixed, tuple(dict.fromkeys(e for edits in safe for e in edits))
        return self.fix(source, cancelled=cancelled, project=project)[0], None

    def _notebook_from_kept(self, source: str) -> Optional[str]:
        """A notebook's JSON with the kept safe fixes applied to its cells, or
        None where the fix loop must decide (overlaps, a result that does not
        compile, fixes across cells)."""
        try:
            cells = notebook.read(source.encode("utf-8", "surrogatepass"))
        except notebook.NotebookError:
            return None
        kept = self.state.cached(cells.source, True) if cells is not None else None
        if cells is None or kept is None:
            return None
        safe = [f for f in kept[0].findings if f.fix is not None and f.fix.applicability == Applicability.SAFE]
        fixes = [cells.edits_of(f) for f in safe]
        if not fixes or any(edits is None for edits in fixes):
            return None
        new_cells, applied = cells.apply([edits for edits in fixes if edits is not None])
        if applied != len(fixes) or (
            cpython_error(new_cells.source) is not None and cpython_error(cells.source) is None
        ):
            return None
        data = new_cells.to_bytes()
        return data.decode("utf-8", "surrogatepass") if data is not None else None


__all__ = ["Cancelled", "DocumentState", "Session"]
