"""A faster `ast.walk` for the project pass: every node under a root, in no
particular order, skipping the fields that hold no code (`ctx`, type
comments), with each node class's child fields looked up once."""

from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Sequence, Tuple

SKIP_FIELDS = frozenset({"ctx", "type_comment", "kind"})
# The statement fields that hold statement lists (bodies, branches, handlers, cases).
BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_FIELDS: Dict[type, Tuple[str, ...]] = {}


def child_fields(cls: type) -> Tuple[str, ...]:
    """The fields of node class `cls` that may hold code."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = tuple(f for f in cls._fields if f not in SKIP_FIELDS)  # type: ignore[attr-defined]
    return found


def push_children(node: ast.AST, stack: List[ast.AST]) -> None:
    """Append the nodes directly under `node` that may hold code to `stack`."""
    for name in child_fields(type(node)):
        value = getattr(node, name, None)
        if type(value) is list:
            stack.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            stack.append(value)


def children(node: ast.AST) -> List[ast.AST]:
    """The nodes directly under `node` that may hold code."""
    out: List[ast.AST] = []
    push_children(node, out)
    return out


def all_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """`root` and every node under it (depth first; use where order does not matter)."""
    stack: List[ast.AST] = [root]
    while stack:
        node = stack.pop()
        yield node
        push_children(node, stack)


def all_statements(body: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """Every statement in `body`, at any depth (function, class, branch,
    handler and case bodies), with no expression visited."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        for field in BODY_FIELDS:
            inner = getattr(node, field, None)
            if inner:
                stack.extend(reversed(inner))
