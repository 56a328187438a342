"""Entries of constant dict literals: `config["training"]["device"]` where
`config = {"training": {"device": "cpu"}}` is the name's only binding and
nothing writes into it. A configuration written as a literal in the script (or
a notebook cell above) is what the run uses."""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from torchlint.analysis.facts import BindingKind, Facts, Site

# Methods that change a dict in place: after one, an entry may hold anything.
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"})


def _key(node: cst.Subscript) -> Optional[str]:
    """The string key of `d["key"]`, or None."""
    if len(node.slice) != 1:
        return None
    index = node.slice[0].slice
    if not isinstance(index, cst.Index) or not isinstance(index.value, cst.SimpleString):
        return None
    value = index.value.evaluated_value
    return value if isinstance(value, str) else None


def _path(expr: cst.BaseExpression) -> Optional[Tuple[str, List[str]]]:
    """(`config`, ["training", "device"]) for `config["training"]["device"]`."""
    keys: List[str] = []
    while isinstance(expr, cst.Subscript):
        key = _key(expr)
        if key is None:
            return None
        keys.append(key)
        expr = expr.value
    if not isinstance(expr, cst.Name) or not keys:
        return None
    return expr.value, keys[::-1]


def _written(facts: Facts, name: str) -> bool:
    """Some read of `name` (in any scope: a parameter of the same name counts too)
    writes into the dict: an item assignment or `del`
    (`config["device"] = ...`, at any depth) or a mutating method (`config.update(...)`)."""
    for use in facts.uses_of(name):
        node: cst.CSTNode = use.node
        parent = facts.parent_of(node)
        while isinstance(parent, cst.Subscript) and parent.value is node:
            node, parent = parent, facts.parent_of(parent)
        if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.Del)) and node is not use.node:
            return True
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _MUTATORS:
            return True
    return False


def dict_entry(facts: Facts, expr: cst.BaseExpression, site: Site) -> Optional[Tuple[cst.BaseExpression, Site]]:
    """The value expression (and its site) that a constant-key lookup reads, when
    the dict is a literal bound once, unconditionally, and never written into."""
    found = _path(expr)
    if found is None:
        return None
    name, keys = found
    bindings = facts.visible_bindings(name, site.scope)
    if len(bindings) != 1 or bindings[0].kind != BindingKind.ASSIGN or bindings[0].index is not None:
        return None
    binding = bindings[0]
    if binding.site.ifs or binding.site.loop is not None or _written(facts, name):
        return None
    if binding.site.order > site.order and binding.site.scope is site.scope:
        return None
    value: Optional[cst.BaseExpression] = binding.value
    for key in keys:
        if not isinstance(value, cst.Dict):
            return None
        entries = [
            e.value
            for e in value.elements
            if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key
        ]
        if len(entries) != 1 or any(isinstance(e, cst.StarredDictElement) for e in value.elements):
            return None
        value = entries[0]
    return (value, binding.site) if value is not None else None
