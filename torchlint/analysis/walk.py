"""A fast, read-only traversal of a LibCST tree for `CSTVisitor`s.

`CSTNode.visit` rebuilds every node it passes through (each
`_visit_and_replace_children` calls the node's constructor and its validation)
and visits every whitespace and operator token, which make up most of a tree.
For a visitor that only reads, both are wasted: on the torch `nn/optim/
utils/data` sources that traversal cost twice the parse itself.

`walk(node, visitor)` calls the same `visitor.on_visit` / `visitor.on_leave`
hooks, in the same source order, with the same "return False to skip the
children" rule, but

- never rebuilds a node, and
- does not descend into whitespace, comment and operator tokens (commas,
  parentheses, brackets, `+`, `==`, `async` ...), unless the visitor has a
  `visit_<Type>` / `leave_<Type>` method for that token type; a field whose
  declared type can hold only such tokens (or plain values) is not even read.

Attribute hooks (`visit_<Type>_<attr>`) are not called; a visitor that needs
them must use `CSTNode.visit`.

The order in which each node's children are visited is LibCST's own source
order, learnt once per node type by running that type's
`_visit_and_replace_children` with a probe that records the attribute names
(`on_visit_attribute` is called even for empty optional fields).
"""

from __future__ import annotations

import types
import typing
from typing import AbstractSet, Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Tuple

import libcst as cst
from libcst._nodes import op as _op
from libcst._nodes import whitespace as _ws

__all__ = [
    "walk",
    "child_fields",
    "children",
    "own_method",
    "TOKEN_TYPES",
    "descendants",
    "nodes_of",
    "contains",
    "mentions",
]


def _node_classes(module: types.ModuleType) -> List[type]:
    return [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, cst.CSTNode)]


# Node types that hold only whitespace, comments and fixed tokens: nothing a
# read-only analysis visitor needs unless it asks for the type by name.
TOKEN_TYPES: FrozenSet[type] = frozenset(
    _node_classes(_op)
    + _node_classes(_ws)
    + [
        cst.LeftParen,
        cst.RightParen,
        cst.LeftSquareBracket,
        cst.RightSquareBracket,
        cst.LeftCurlyBrace,
        cst.RightCurlyBrace,
        cst.Asynchronous,
    ]
)


class _FieldProbe(cst.CSTVisitor):
    def __init__(self, parent: cst.CSTNode) -> None:
        self.parent = parent
        self.names: List[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if node is self.parent and attribute not in self.names:
            self.names.append(attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


_FIELDS: Dict[type, Tuple[str, ...]] = {}


def child_fields(node: cst.CSTNode) -> Tuple[str, ...]:
    """The names of `node`'s child-holding attributes, in LibCST's visit order."""
    cls = type(node)
    names = _FIELDS.get(cls)
    if names is None:
        probe = _FieldProbe(node)
        node._visit_and_replace_children(probe)
        found = list(probe.names)
        # A field visited only conditionally (an f-string expression's
        # format_spec, skipped when None) comes last in LibCST's order; keep that
        # place for every field the probe did not see (non-node values, such as
        # a Name's `value`, are passed over by the walk).
        for f in getattr(cls, "__dataclass_fields__", {}):
            if f not in found:
                found.append(f)
        names = _FIELDS[cls] = tuple(found)
    return names


def own_method(visitor_cls: type, name: str) -> Optional[Callable[..., Any]]:
    """`visitor_cls.<name>` unless it is LibCST's do-nothing default (CSTVisitor
    defines a no-op `visit_<Type>`/`leave_<Type>` for every node type)."""
    fn: Optional[Callable[..., Any]] = getattr(visitor_cls, name, None)
    if fn is None or fn is getattr(cst.CSTVisitor, name, None):
        return None
    return fn


_KINDS_BY_VISITOR: Dict[type, Dict[type, int]] = {}
_SKIP, _NODE, _SEQ = 0, 1, 2


def _kinds(visitor_cls: type) -> Dict[type, int]:
    """Per value type: skip it, visit it (a node), or visit its items (tuple/list).
    Filled lazily; a dict lookup instead of an ABC isinstance check per field."""
    kinds = _KINDS_BY_VISITOR.get(visitor_cls)
    if kinds is None:
        kinds = _KINDS_BY_VISITOR[visitor_cls] = {tuple: _SEQ, list: _SEQ}
        for t in TOKEN_TYPES:
            wanted = own_method(visitor_cls, "visit_" + t.__name__) or own_method(visitor_cls, "leave_" + t.__name__)
            kinds[t] = _NODE if wanted else _SKIP
    return kinds


def _classify(kinds: Dict[type, int], t: type) -> int:
    k = kinds[t] = _NODE if issubclass(t, cst.CSTNode) else _SKIP
    return k


_WALKED_FIELDS: Dict[type, Dict[type, Tuple[str, ...]]] = {}


def _walked_fields(visitor_cls: type, kinds: Dict[type, int], node: cst.CSTNode) -> Tuple[str, ...]:
    """`child_fields(node)` without the fields whose declared type can only hold
    tokens the visitor skips (whitespace, commas, parentheses) or plain values:
    a Name has none left, a Call keeps `func` and `args`."""
    per_visitor = _WALKED_FIELDS.setdefault(visitor_cls, {})
    cls = type(node)
    found = per_visitor.get(cls)
    if found is None:
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # an annotation we cannot resolve: keep every field
            hints = {}
        found = tuple(name for name in child_fields(node) if name not in hints or not _only_skipped(hints[name], kinds))
        per_visitor[cls] = found
    return found


def _only_skipped(annotation: object, kinds: Dict[type, int]) -> bool:
    """Every value this annotation allows is a skipped token or not a node."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return True
    if args:
        return all(_only_skipped(a, kinds) for a in args if a is not Ellipsis)
    if not isinstance(annotation, type):
        return False  # a forward reference or a type variable: keep the field
    if not issubclass(annotation, cst.CSTNode):
        return True  # str, MaybeSentinel, None
    skipped = {(t.__module__, t.__qualname__) for t in TOKEN_TYPES if kinds.get(t) == _SKIP}
    # By module and name: a dataclass made with slots leaves its first class
    # object behind among the subclasses.
    return all((t.__module__, t.__qualname__) in skipped for t in _with_subclasses(annotation))


def _with_subclasses(cls: type) -> List[type]:
    out: List[type] = [cls]
    subclasses: List[type] = cls.__subclasses__()
    for sub in subclasses:
        out.extend(_with_subclasses(sub))
    return out


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """Visit `node` and its descendants with `visitor` (see the module docs)."""
    visitor_cls = type(visitor)
    kinds = _kinds(visitor_cls)
    on_visit = visitor.on_visit
    on_leave = visitor.on_leave
    fields_cache = _WALKED_FIELDS.setdefault(visitor_cls, {})

    def rec(n: cst.CSTNode) -> None:
        if on_visit(n):
            names = fields_cache.get(type(n))
            if names is None:
                names = _walked_fields(visitor_cls, kinds, n)
            for name in names:
                value = getattr(n, name)
                k = kinds.get(type(value))
                if k is None:
                    k = _classify(kinds, type(value))
                if k == _NODE:
                    rec(value)
                elif k == _SEQ:
                    for child in value:
                        ck = kinds.get(type(child))
                        if ck is None:
                            ck = _classify(kinds, type(child))
                        if ck == _NODE:
                            rec(child)
        on_leave(n)

    rec(node)


_IS_NODE: Dict[type, bool] = {}


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """`node.children` (its direct child nodes, tokens and whitespace included,
    in LibCST's order) read from its fields: LibCST's property rebuilds the
    node through `_visit_and_replace_children` on every call."""
    out: List[cst.CSTNode] = []
    is_node = _IS_NODE
    for name in child_fields(node):
        value = getattr(node, name)
        t = type(value)
        k = is_node.get(t)
        if k is None:
            k = is_node[t] = issubclass(t, cst.CSTNode)
        if k:
            out.append(value)
        elif t is tuple or t is list:
            for item in value:
                ti = type(item)
                ki = is_node.get(ti)
                if ki is None:
                    ki = is_node[ti] = issubclass(ti, cst.CSTNode)
                if ki:
                    out.append(item)
    return out


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node below it (tokens and whitespace included), depth
    first: for small questions about one expression or statement."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


class _Collector(cst.CSTVisitor):
    """Collects the nodes of some types (none of them tokens) for `nodes_of`."""

    def __init__(self, types: Tuple[type, ...]) -> None:
        self.types = types
        self.wanted: Dict[type, bool] = {}  # per node type: one of `types` (no ABC check per node)
        self.found: List[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        t = type(node)
        wanted = self.wanted.get(t)
        if wanted is None:
            wanted = self.wanted[t] = issubclass(t, self.types)
        if wanted:
            self.found.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass


def nodes_of(node: cst.CSTNode, types: Tuple[type, ...]) -> List[cst.CSTNode]:
    """Every node of `types` at or below `node`, in source order, found by `walk`
    (tokens and whitespace not visited: `types` must not be token types). For
    questions about a whole module, where `descendants` would visit every token."""
    collector = _Collector(types)
    walk(node, collector)
    return collector.found


def contains(node: Optional[cst.CSTNode], target: cst.CSTNode) -> bool:
    """`target` is `node` or lies below it."""
    return node is not None and any(n is target for n in descendants(node))


def mentions(node: cst.CSTNode, names: AbstractSet[str]) -> bool:
    """A Name below `node` (or `node` itself) is one of `names`."""
    return bool(names) and any(isinstance(n, cst.Name) and n.value in names for n in descendants(node))
