"""Recognising device expressions: `.to(device)` targets, `.cuda()` indices."""
from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.analysis.facts import Call, dotted_name
from torchlint.analysis.semantics import Semantics, is_device_string

_DEVICE_NAME = re.compile(r"(^|_)(device|dev)s?($|_)|^device", re.I)
_DTYPES = frozenset(
    "float float32 float64 float16 half bfloat16 double int int8 int16 int32 int64 long short uint8 bool "
    "complex64 complex128 cfloat cdouble".split()
)


def is_dtype_expr(sem: Semantics, expr: cst.BaseExpression) -> bool:
    q = sem.facts.qualname(expr)
    return bool(q and q.startswith("torch.") and q.split(".", 1)[1] in _DTYPES)


def is_device_expr(sem: Semantics, expr: cst.BaseExpression, call: Call) -> bool:
    """True when `expr` certainly names a device (not a dtype, not another tensor)."""
    if is_device_string(expr):
        return True
    if isinstance(expr, cst.Call):
        return sem.facts.qualname(expr.func) == "torch.device"
    name = dotted_name(expr)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    if last == "device" or _DEVICE_NAME.search(last):
        return True
    return sem.expr_kind(expr, call.site) == "device"


def move_target(sem: Semantics, call: Call) -> Optional[cst.BaseExpression]:
    """For a move call (`.to(dev)`, `.to(device=dev)`, `.cuda()`), the device
    expression it moves to; None when this is not certainly a device move."""
    if call.method == "cuda":
        if not call.node.args:
            return cst.SimpleString('"cuda"')
        arg = call.node.args[0]
        if isinstance(arg.value, cst.Integer) and arg.keyword is None:
            return cst.SimpleString(f'"cuda:{arg.value.value}"')
        return None
    if call.method != "to":
        return None
    kw = call.keyword("device")
    if kw is not None:
        return kw.value
    pos = call.positional
    if pos and is_device_expr(sem, pos[0].value, call):
        return pos[0].value
    return None
