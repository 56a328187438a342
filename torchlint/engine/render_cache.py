"""Positions of reported nodes and the spans of fix anchors, rendering only the
top-level statements that are new since the last lint of the same document.

`node_edits.render` runs one code generation pass over the whole module. Top-
level statements render independently of each other (the module renders its
header, each statement and its footer in turn, with no indentation in force),
so the pass splits into one per statement: each records, at offsets relative
to the statement, where the wanted nodes inside it are. A statement reused by
an incremental parse (torchlint/source/reparse.py: the same node object) keeps its
record from the previous lint, and its code; only the new statements are
rendered. Only the statements that hold a wanted node are rendered at all (the
others' code comes from the plain code generation, `Parsed.statement_code`):
given the facts' parent map (`parent_of`), each wanted node no record knows is
traced up to its top-level statement, and that statement alone is rendered
(again, when it was rendered before for other nodes). A document's first lint
thus renders only the statements with findings. A wanted node that cannot be
traced (no parent map, a token the facts walk skips), or that its statement
does not hold, makes every statement render again, so the result is always
that of `node_edits.render` (tests/test_incremental.py compares them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Set, Tuple

import libcst as cst
from libcst._position import CodePosition, CodeRange

from torchlint.engine.node_edits import Anchor, ParentOf, Rendered, _Recorder, render
from torchlint.source.edits import LineIndex
from torchlint.source.reparse import Parsed


@dataclass(frozen=True)
class _Record:
    """Where wanted nodes are in one statement's code (offsets from its start)."""

    code: str
    spans: Mapping[cst.CSTNode, Tuple[int, int]]  # the PositionProvider range
    anchors: Mapping[cst.CSTNode, Anchor]  # whole span and indentation
    twice: frozenset


def _record(module: cst.Module, statement: cst.CSTNode, wanted: Set[cst.CSTNode]) -> _Record:
    state = _Recorder(module, wanted)
    statement._codegen(state)
    code = "".join(state.tokens)
    spans = {node: state.position(node) for node in state.ends}
    anchors = {node: Anchor(start, state.ends[node], indent) for node, (start, indent) in state.starts.items()}
    return _Record(code, spans, anchors, frozenset(state.twice))


class RenderCache:
    """One document's per-statement records, kept for the statements of the
    last module rendered."""

    def __init__(self) -> None:
        self._records: Dict[cst.CSTNode, _Record] = {}
        self.statements_rendered = 0  # for tests and measurements

    def render(
        self,
        parsed: Parsed,
        nodes: Iterable[cst.CSTNode] = (),
        anchors: Iterable[cst.CSTNode] = (),
        parent_of: Optional[ParentOf] = None,
    ) -> Rendered:
        """`node_edits.render(parsed.module, nodes, anchors)`; `parent_of` (the
        facts' parent map) lets it render only the statements holding them."""
        module = parsed.module
        nodes, anchors = list(nodes), list(anchors)
        if not module.has_trailing_newline or module in nodes or module in anchors:
            self._records = {}
            return render(module, nodes, anchors)  # the module's own range, or a popped final newline
        wanted = set(nodes) | set(anchors)
        records: Dict[cst.CSTNode, _Record] = {s: self._records[s] for s in module.body if s in self._records}
        missing = wanted - _known(records.values())
        if missing:
            holding = _holding(module, missing, parent_of) if parent_of is not None else None
            if holding is not None:  # render (again) just the statements holding them
                statements = [s for s in module.body if s in holding]
            else:
                statements = [s for s in module.body if s not in records]
            records.update(self._render(parsed, statements, wanted))
            if not wanted <= _known(records.values()):  # reported on unchanged code: render it all again
                records = self._render(parsed, module.body, wanted)
        self._records = records
        return self._assemble(parsed, records, nodes, anchors)

    def _render(self, parsed: Parsed, statements, wanted: Set[cst.CSTNode]) -> Dict[cst.CSTNode, _Record]:
        out: Dict[cst.CSTNode, _Record] = {}
        for statement in statements:
            out[statement] = _record(parsed.module, statement, wanted)
            self.statements_rendered += 1
        return out

    def _assemble(
        self, parsed: Parsed, records: Mapping[cst.CSTNode, _Record], nodes: List[cst.CSTNode], anchors
    ) -> Rendered:
        module = parsed.module
        starts: Dict[cst.CSTNode, int] = {}
        pieces: List[str] = [_lines_code(module, module.header)]
        offset = len(pieces[0])
        statement: cst.CSTNode
        for i, statement in enumerate(module.body):
            found = records.get(statement)
            if found is not None:
                parsed.codes[i] = found.code
            code = parsed.statement_code(i)
            starts[statement] = offset
            pieces.append(code)
            offset += len(code)
        pieces.append(_lines_code(module, module.footer))
        code = "".join(pieces)
        index = LineIndex(code)

        def where(offset: int) -> CodePosition:
            row, column = index.position(offset)
            return CodePosition(row, column - 1)

        spans: Dict[cst.CSTNode, Tuple[int, int]] = {}
        found_anchors: Dict[cst.CSTNode, Anchor] = {}
        twice: Set[cst.CSTNode] = set()
        for statement, record in records.items():
            base = starts.get(statement)
            if base is None:
                continue
            twice |= record.twice
            for node, (start, end) in record.spans.items():
                if node in spans:
                    twice.add(node)
                spans[node] = (base + start, base + end)
            for node, anchor in record.anchors.items():
                found_anchors[node] = Anchor(base + anchor.start, base + anchor.end, anchor.indent)
        positions = {}
        for node in nodes:
            if node in spans and node not in twice:
                start, end = spans[node]
                positions[node] = CodeRange(where(start), where(end))
        out_anchors = {node: found_anchors[node] for node in anchors if node in found_anchors and node not in twice}
        return Rendered(positions, code, out_anchors)


def _holding(module: cst.Module, nodes: Iterable[cst.CSTNode], parent_of: ParentOf) -> Optional[Set[cst.CSTNode]]:
    """The top-level statements of `module` that hold `nodes`, by the parent
    map; None when one of them cannot be traced to a top-level statement."""
    top = {id(statement) for statement in module.body}
    out: Set[cst.CSTNode] = set()
    for node in nodes:
        current: Optional[cst.CSTNode] = node
        while current is not None and id(current) not in top:
            current = parent_of(current)
        if current is None:
            return None
        out.add(current)
    return out


def _known(records: Iterable[_Record]) -> Set[cst.CSTNode]:
    out: Set[cst.CSTNode] = set()
    for record in records:
        out.update(record.spans)
    return out


def _lines_code(module: cst.Module, lines) -> str:
    from torchlint.source.reparse import _lines_code as lines_code

    return lines_code(module, lines)


__all__ = ["RenderCache"]
