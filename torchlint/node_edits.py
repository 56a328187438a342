"""Text edits for a fix, built from the replaced nodes' own code.

The general way to turn a rule's `{old_node: new_node}` replacements into text
edits is to transform the whole module and diff its code against the source
(fixes.replace_nodes + fixes.diff_edits). That costs a full tree rebuild, a
full code generation and a line diff per finding: quadratic in a file with
many findings (a 2,000-line training script with 80 findings took seconds),
far too slow for an editor that lints on every keystroke.

Most replacements swap one expression for another. For those, the edit is
simply "the old node's text becomes the new node's code", and both are known
without touching the rest of the module: the old node's position comes from
the PositionProvider pass the engine already ran, and LibCST renders an
expression the same alone as in its module (its whitespace nodes hold their
text verbatim). `local_edits` takes that path when it is provably exact: every
replaced node and its replacement are expressions (or other nodes that own no
indented block), the source text at the old node's range is exactly the old
node's code, and the replaced ranges do not overlap. Anything else returns
None and the caller falls back to the whole-module transform, so the result
is always the text the transform would give.
"""
from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

import libcst as cst

from torchlint.findings import Edit
from torchlint.fixes import LineIndex

# Nodes whose code does not depend on where they sit in the module. Statements
# and blocks do (an IndentedBlock's indentation is relative to its parents).
_LOCAL = (cst.BaseExpression, cst.Arg, cst.Param, cst.Parameters, cst.Index, cst.Slice,
          cst.SubscriptElement, cst.Element, cst.DictElement, cst.StarredElement, cst.WithItem,
          cst.ImportAlias, cst.AsName, cst.Decorator)


def _has_block(node: cst.CSTNode) -> bool:
    """Does the node's code depend on the indentation of the block it sits in?"""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.IndentedBlock, cst.BaseCompoundStatement)):
            return True
        # Rendered with the enclosing block's indentation, which a lone node lacks.
        if isinstance(current, cst.ParenthesizedWhitespace) and current.indent:
            return True
        stack.extend(current.children)
    return False


def local_edits(
    module: cst.Module,
    source: str,
    index: LineIndex,
    positions: Mapping[cst.CSTNode, object],
    replacements: Mapping[cst.CSTNode, object],
) -> Optional[Tuple[Edit, ...]]:
    """The fix's edits, or None when only the whole-module transform is exact."""
    spans: List[Tuple[int, int, str]] = []
    for old, new in replacements.items():
        if not isinstance(old, _LOCAL) or not isinstance(new, _LOCAL):
            return None
        if _has_block(old) or _has_block(new):
            return None
        pos = positions.get(old)
        if pos is None:
            return None
        start = index.offset(pos.start.line, pos.start.column + 1)  # type: ignore[attr-defined]
        end = index.offset(pos.end.line, pos.end.column + 1)  # type: ignore[attr-defined]
        old_code = module.code_for_node(old)
        if source[start:end] != old_code:
            return None
        spans.append((start, end, module.code_for_node(new)))
    spans.sort()
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        if start < end:
            return None
    edits: List[Edit] = []
    for start, end, new_code in spans:
        before = source[start:end]
        if before == new_code:
            continue
        # Keep edits small: drop what old and new text share at either end.
        p = 0
        limit = min(len(before), len(new_code))
        while p < limit and before[p] == new_code[p]:
            p += 1
        s = 0
        while s < limit - p and before[-1 - s] == new_code[-1 - s]:
            s += 1
        a, b = start + p, end - s
        row, col = index.position(a)
        end_row, end_col = index.position(b)
        edits.append(Edit(row, col, end_row, end_col, new_code[p: len(new_code) - s]))
    return tuple(edits)
