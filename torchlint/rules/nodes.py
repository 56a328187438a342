"""Node builders for fixes: small, layout-preserving rewrites of calls and
statements that several rules share."""

from __future__ import annotations

from typing import List, Optional, Sequence

import libcst as cst

_EQ = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def call_with_to(expr: cst.BaseExpression, device: str) -> cst.Call:
    """`expr.to(device)`."""
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("to")), args=[cst.Arg(cst.Name(device))])


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` set, keeping its layout.

    An existing keyword of that name gets the new value. Otherwise the keyword
    is appended after the last argument, separated the way the call separates
    its arguments (`, ` on one line; newline and indentation when each
    argument has its own line), keeping a trailing comma if the call had one
    and whatever stood between the last argument and the closing parenthesis.
    """
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(value, keyword=cst.Name(name), equal=_EQ)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    separator = _separator(args)
    if isinstance(last.comma, cst.Comma):
        # A trailing comma: the new argument goes after it and keeps one too.
        new = new.with_changes(
            comma=last.comma.with_changes(whitespace_before=cst.SimpleWhitespace("")),
            whitespace_after_arg=last.whitespace_after_arg,
        )
        args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    else:
        # What stood between the last argument and `)` now follows the new one.
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=args + [new])


def _separator(args: Sequence[cst.Arg]) -> cst.Comma:
    """The comma between two arguments of this call: copied from the call's own
    first comma between arguments, else `, `."""
    for a in args[:-1]:
        if isinstance(a.comma, cst.Comma):
            return a.comma
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        return last.comma
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def keyword_value(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def parse_statements(lines: List[str]) -> List[cst.BaseStatement]:
    return [cst.parse_statement(line) for line in lines]
