"""Where reported nodes are, and the text edits of their fixes, at a cost linear
in the file.

The reference meaning of a fix is: transform the module, replacing each node in
the rule's `{old node: replacement}` (by identity), and diff the new code
against the source (`edits.replace_nodes` + `edits.diff_edits`). Doing that
per finding costs a whole-module rebuild, code generation and diff each: a
30,000-line file with 12,000 findings never finished.

Here one code generation pass over the module (`render`) records, on the way:
every node's `PositionProvider` range (to position findings), the module's
code (to check that the source round-trips), and for each node a fix will
replace (its "anchor") the text span it produced, whitespace included, and the
indentation in force where it starts. A fix's edits (`fix_edits`) then come
from the replaced nodes alone: each replacement is rendered with the recorded
indentation, exactly as the module's code generation would render it there
(LibCST's whitespace nodes hold their text verbatim; an indented block's
indentation is relative to the tokens in force), and the affected lines are
diffed, as the whole-module diff would diff them.

That is exact when the old node renders alone, with that indentation, to
exactly its text in the source (checked for every replaced node) and the
replacement's code does not depend on separators its parent passes down
(`_same_context`). Otherwise `fix_edits` returns None and the caller falls back
to the whole-module transform. tests/test_node_edits.py compares both ways on
every rule example, the fixtures, the examples and a generated training script.
"""

from __future__ import annotations

import dataclasses
import inspect
from bisect import bisect_right
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, ContextManager, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst._position import CodePosition, CodeRange

from torchlint.findings import Edit
from torchlint.source.codegen import NO_RECORD, PlainCodegen
from torchlint.source.edits import LineIndex, diff_edits

# Code generation keyword arguments a parent passes to a child, and the field
# of the child they stand in for when that field is left to its default.
# tests/test_node_edits.py checks this covers every node type of the LibCST in use.
CONTEXT_KWARGS: Dict[str, Optional[str]] = {
    "default_semicolon": "semicolon",
    "default_comma": "comma",
    "default_comma_whitespace": "comma",
    "default_star": "star",
    "default_space": "whitespace_before_from",
    "default_separator": "separator",
    # Not tied to a field: the node renders differently whatever its fields.
    "default_indicator": None,
    "is_elif": None,
}


@dataclass(frozen=True)
class Anchor:
    """A replaced node's text in the source: [start, end) offsets, whitespace
    included, and the indentation tokens in force where it starts."""

    start: int
    end: int
    indent: Tuple[str, ...]


# A node's parent, as the facts pass recorded it (None: not known).
ParentOf = Callable[[cst.CSTNode], Optional[cst.CSTNode]]


@dataclass(frozen=True)
class Rendered:
    """What one code generation pass over a module records."""

    positions: Mapping[cst.CSTNode, CodeRange]  # of the nodes asked for
    code: str
    anchors: Mapping[cst.CSTNode, Anchor]


class _Recorder(PlainCodegen):
    """LibCST's code generation, also recording where the wanted nodes are.

    What `PositionProvider` computes for a node (its syntactic range where the
    node records one, else the range of everything it generated), but kept as
    offsets and only for the nodes asked for: tracking line and column through
    every token, for every node, costs six times the code generation itself."""

    def __init__(self, module: cst.Module, wanted: Iterable[cst.CSTNode]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.wanted: Set[cst.CSTNode] = set(wanted)
        self.starts: Dict[cst.CSTNode, Tuple[int, Tuple[str, ...]]] = {}
        self.ends: Dict[cst.CSTNode, int] = {}
        self.syntactic: Dict[cst.CSTNode, Tuple[int, int]] = {}
        self.twice: Set[cst.CSTNode] = set()

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.offset -= len(self.tokens.pop())

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node in self.wanted:
            if node in self.starts:  # one node object in two places: no single answer
                self.twice.add(node)
            self.starts[node] = (self.offset, tuple(self.indent_tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if node in self.wanted:
            self.ends[node] = self.offset

    def record_syntactic_position(  # type: ignore[override]
        self,
        node: cst.CSTNode,
        *,
        start_node: Optional[cst.CSTNode] = None,
        end_node: Optional[cst.CSTNode] = None,
    ) -> ContextManager[None]:
        if node not in self.wanted:
            return NO_RECORD
        return self._syntactic(node, start_node, end_node)

    @contextmanager
    def _syntactic(
        self, node: cst.CSTNode, start_node: Optional[cst.CSTNode], end_node: Optional[cst.CSTNode]
    ) -> Iterator[None]:
        # The range runs from start_node's start to end_node's end, when given:
        # both are generated inside this block, so ask for them now.
        for other in (start_node, end_node):
            if other is not None:
                self.wanted.add(other)
        start = self.offset
        try:
            yield
        finally:
            end = self.offset
            if start_node is not None:
                start = self.position(start_node)[0]
            if end_node is not None:
                end = self.position(end_node)[1]
            self.syntactic[node] = (start, end)

    def position(self, node: cst.CSTNode) -> Tuple[int, int]:
        """The node's range as offsets (syntactic where recorded)."""
        found = self.syntactic.get(node)
        return found if found is not None else (self.starts[node][0], self.ends[node])


def render(module: cst.Module, nodes: Iterable[cst.CSTNode] = (), anchors: Iterable[cst.CSTNode] = ()) -> Rendered:
    """One code generation pass: the module's code, the `PositionProvider`
    range of each of `nodes`, and the span of each of `anchors`."""
    nodes, anchors = list(nodes), list(anchors)
    state = _Recorder(module, nodes + anchors)
    module._codegen(state)
    code = "".join(state.tokens)
    index = LineIndex(code)

    def where(offset: int) -> CodePosition:
        row, column = index.position(offset)
        return CodePosition(row, column - 1)

    positions: Dict[cst.CSTNode, CodeRange] = {}
    for node in nodes:
        if node in state.ends and node not in state.twice:
            start, end = state.position(node)
            positions[node] = CodeRange(where(start), where(end))
    found: Dict[cst.CSTNode, Anchor] = {}
    for node in anchors:
        if node in state.ends and node not in state.twice:
            start, indent = state.starts[node]
            found[node] = Anchor(start, state.ends[node], indent)
    return Rendered(positions, code, found)


def fix_edits(
    module: cst.Module,
    source: str,
    index: LineIndex,
    anchors: Mapping[cst.CSTNode, Anchor],
    replacements: Mapping[cst.CSTNode, object],
) -> Optional[Tuple[Edit, ...]]:
    """The edits of one fix, as the whole-module transform would give them, or
    None when only that transform is known to be exact here."""
    if _MARK in source:  # cannot tell our marker from the file's text
        return None
    spans: List[Tuple[int, int, str]] = []
    by_lines = False
    for old, new in replacements.items():
        anchor = anchors.get(old)
        if anchor is None:
            return None
        rendered_new = _new_code(module, old, new, anchor.indent)
        if rendered_new is None:
            return None
        try:
            old_code, old_indented = _code(module, [old], anchor.indent)
        except Exception:  # a node that cannot render alone (an Annotation): not local
            return None
        if source[anchor.start : anchor.end] != old_code:
            return None
        new_code, new_indented = rendered_new
        spans.append((anchor.start, anchor.end, new_code))
        inline = isinstance(old, _INLINE) and isinstance(new, _INLINE) and not old_indented and not new_indented
        by_lines = by_lines or not inline
    spans.sort()
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        if start < end:  # nested or overlapping replacements: the transform decides
            return None
    return tuple(_edits(source, index, spans, by_lines))


# Nodes that sit within a line: an expression swapped for another, unless its
# code continues on lines indented like its block. Statements and blocks span
# whole lines.
_INLINE = (
    cst.BaseExpression,
    cst.Arg,
    cst.Param,
    cst.Parameters,
    cst.Index,
    cst.Slice,
    cst.SubscriptElement,
    cst.Element,
    cst.DictElement,
    cst.StarredElement,
    cst.WithItem,
    cst.ImportAlias,
    cst.AsName,
    cst.Decorator,
)


def _edits(source: str, index: LineIndex, spans, by_lines: bool) -> List[Edit]:
    """A fix that replaces statements (or code laid out over indented lines)
    becomes the line diff of the lines its replacements touch: what the
    whole-module diff gives there. One that swaps expressions within their
    lines becomes one edit per replacement, trimmed of what the old and new
    text share at either end (the same text, in the edits the expression-level
    path has always given)."""
    if not by_lines:
        return [e for start, end, new_code in spans for e in _trimmed(source, index, start, end, new_code)]
    edits: List[Edit] = []
    for first, last, group in _line_regions(index, spans):
        parts, pos = [], first
        for start, end, new_code in group:
            parts += [source[pos:start], new_code]
            pos = end
        parts.append(source[pos:last])
        row = bisect_right(index.starts, first) - 1  # rows before the region
        for e in diff_edits(source[first:last], "".join(parts)):
            edits.append(Edit(e.row + row, e.column, e.end_row + row, e.end_column, e.content))
    return edits


def _trimmed(source: str, index: LineIndex, start: int, end: int, new_code: str) -> List[Edit]:
    before = source[start:end]
    if before == new_code:
        return []
    p = 0
    limit = min(len(before), len(new_code))
    while p < limit and before[p] == new_code[p]:
        p += 1
    s = 0
    while s < limit - p and before[-1 - s] == new_code[-1 - s]:
        s += 1
    row, col = index.position(start + p)
    end_row, end_col = index.position(end - s)
    return [Edit(row, col, end_row, end_col, new_code[p : len(new_code) - s])]


def _line_regions(index: LineIndex, spans: Sequence[Tuple[int, int, str]]) -> List[Tuple[int, int, list]]:
    """Group sorted spans into regions of whole lines (start of the first line,
    end of the last), merging spans whose lines touch: the lines the whole-module
    diff would see change together."""
    regions: List[Tuple[int, int, list]] = []
    for span in spans:
        start, end, _ = span
        first = index.starts[bisect_right(index.starts, start) - 1]
        row = bisect_right(index.starts, end)
        last = end if index.starts[row - 1] == end and end > start else _line_end(index, row)
        if regions and first <= regions[-1][1]:
            prev_first, prev_last, group = regions[-1]
            regions[-1] = (prev_first, max(prev_last, last), group + [span])
        else:
            regions.append((first, last, [span]))
    return regions


def _line_end(index: LineIndex, row: int) -> int:
    """Offset just past the end of 1-based `row` (its line break included)."""
    return index.starts[row] if row < len(index.starts) else len(index.text)


# Stands for the indentation in force while a node is rendered alone, so that
# its code says whether it uses it (a block, a line break indented like the
# block): such code spans lines. Files containing it fall back to the transform.
_MARK = "\x00\ufdd0"


def _code(module: cst.Module, nodes: Sequence[cst.CSTNode], indent: Tuple[str, ...]) -> Tuple[str, bool]:
    """The code `nodes` get, one after the other, where `indent` is in force,
    and whether it uses that indentation."""
    state = PlainCodegen(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens = [_MARK]
    for node in nodes:
        node._codegen(state)
    code = "".join(state.tokens)
    return code.replace(_MARK, "".join(indent)), _MARK in code


def _new_code(module: cst.Module, old: cst.CSTNode, new: object, indent: Tuple[str, ...]) -> Optional[Tuple[str, bool]]:
    """The code `new` gets in `old`'s place (and whether it uses the indentation),
    or None when that may depend on more than the indentation."""
    if isinstance(new, cst.FlattenSentinel):
        # Statements in a body get no separators from their parent; anything else
        # (arguments, small statements) does, by position: not local.
        nodes = list(new.nodes)
        if not nodes or not isinstance(old, cst.BaseStatement):
            return None
        if not all(isinstance(n, cst.BaseStatement) for n in nodes):
            return None
    elif isinstance(new, cst.CSTNode):
        if not _same_context(old, new):
            return None
        nodes = [new]
    else:  # RemovalSentinel: the parent may render something else in its place
        return None
    try:
        return _code(module, nodes, indent)
    except Exception:  # cannot render alone: the transform will say what it gives
        return None


def _same_context(old: cst.CSTNode, new: cst.CSTNode) -> bool:
    """Does `new` render in `old`'s place as it renders alone? The parent passes
    the same code generation arguments to both; they matter only for fields left
    to their default (a comma, a semicolon), or always (`is_elif`). Since `old`
    rendered alone matches the source (checked by the caller), an argument that
    `old` answers the same way, by its type or by the same defaulted field, is
    one it received as its default."""
    for kwarg in _codegen_kwargs(type(new)):
        field = CONTEXT_KWARGS.get(kwarg, "?")
        if field is None or field == "?":  # renders differently whatever its fields, or unknown
            if type(old) is not type(new):
                return False
            continue
        if getattr(new, field, None) is cst.MaybeSentinel.DEFAULT:
            if kwarg not in _codegen_kwargs(type(old)) or getattr(old, field, None) is not cst.MaybeSentinel.DEFAULT:
                return False
    return True


@lru_cache(maxsize=None)
def _codegen_kwargs(node_type: type) -> Tuple[str, ...]:
    """The keyword arguments a node type's code generation accepts from its parent."""
    params = inspect.signature(node_type._codegen_impl).parameters  # type: ignore[attr-defined]
    return tuple(p for p in params if p not in ("self", "state"))


def node_fields(node_type: type) -> Tuple[str, ...]:
    """The dataclass fields of a node type (for the coverage test)."""
    return tuple(f.name for f in dataclasses.fields(node_type))
