"""Statement spans, as the corpus's scorer reads labels."""

from __future__ import annotations

import ast
from typing import Tuple

_COMPOUND = (
    ast.For,
    ast.While,
    ast.If,
    ast.With,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Try,
    ast.AsyncFor,
    ast.AsyncWith,
)


def statement_span(source: str, line: int) -> Tuple[int, int]:
    """The lines of the smallest statement holding `line` (compound statements
    count by their header), as the corpus's own scorer reads labels."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return line, line
    best, size = (line, line), None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if isinstance(node, _COMPOUND):
                span = (node.lineno, node.body[0].lineno - 1 if node.body else node.lineno)
                if not span[0] <= line <= max(span):
                    continue
            else:
                span = (node.lineno, node.end_lineno or node.lineno)
            if size is None or span[1] - span[0] < size:
                best, size = span, span[1] - span[0]
    return best
