"""DataLoader questions for the loading rules: which calls build torch
DataLoaders, what dataset they wrap, and how to add a keyword to a call."""
from __future__ import annotations

from typing import Iterator, List, Optional

import libcst as cst

from torchlint.analysis.facts import Call, Site, dotted_name
from torchlint.analysis.semantics import DATALOADER, TENSOR_DATASET, Semantics


def loader_calls(sem: Semantics) -> Iterator[Call]:
    """`DataLoader(...)` calls that resolve to torch's DataLoader."""
    for call in sem.facts.calls:
        if call.qualname in DATALOADER:
            yield call


def dataset_expr(call: Call) -> Optional[cst.BaseExpression]:
    kw = call.keyword("dataset")
    if kw is not None:
        return kw.value
    pos = call.positional
    return pos[0].value if pos else None


def tensor_dataset_call(sem: Semantics, expr: Optional[cst.BaseExpression], site: Site) -> Optional[cst.Call]:
    """The `TensorDataset(...)` call `expr` certainly is (directly or through
    a name every binding of which is one), else None."""
    if expr is None:
        return None
    if isinstance(expr, cst.Call):
        return expr if sem.facts.qualname(expr.func) in TENSOR_DATASET else None
    name = dotted_name(expr)
    if name is None:
        return None
    bindings = sem.facts.visible_bindings(name, site.scope)
    found: List[cst.Call] = []
    for b in bindings:
        if b.kind not in ("assign", "annassign") or b.index is not None or b.value is None:
            return None
        inner = tensor_dataset_call(sem, b.value, b.site) if isinstance(b.value, cst.Call) else None
        if inner is None:
            return None
        found.append(inner)
    return found[0] if found else None


def with_keyword(node: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`node` with `name=value` set: replaces an existing keyword's value, or
    appends one keeping the call's comma style (trailing comma included)."""
    args = list(node.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            args[i] = a.with_changes(value=value)
            return node.with_changes(args=args)
    eq = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    new = cst.Arg(value, keyword=cst.Name(name), equal=eq)
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if not args:
        return node.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        sep = args[-2].comma if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma) else space
        args[-1] = last.with_changes(comma=sep)
        new = new.with_changes(comma=last.comma)
    else:
        args[-1] = last.with_changes(comma=space)
    return node.with_changes(args=args + [new])


def dataset_class(sem: Semantics, expr: Optional[cst.BaseExpression], site: Site) -> Optional[str]:
    """The same-file class `expr` is an instance of (`ds = MyDataset(...)`)."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in sem.facts.classes:
        return expr.func.value
    name = dotted_name(expr) if expr is not None else None
    if name is None:
        return None
    bindings = sem.facts.visible_bindings(name, site.scope)
    if len(bindings) != 1 or bindings[0].value is None or bindings[0].index is not None:
        return None
    value = bindings[0].value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in sem.facts.classes:
        return value.func.value
    return None


def class_places_on_device(sem: Semantics, class_name: str) -> bool:
    """Code in the class moves or creates tensors on a device (`.to(...)`,
    `.cuda()`, `device=`): its items may already live on the GPU."""
    for call in sem.facts.calls:
        if not any(s.kind == "class" and s.name == class_name for s in call.site.scope.chain()):
            continue
        if call.method in ("to", "cuda") or call.keyword("device") is not None:
            return True
    return False
