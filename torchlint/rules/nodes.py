"""Node builders for fixes: small, layout-preserving rewrites of calls and
statements that several rules share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Union, cast

import libcst as cst

from torchlint.analysis.facts import BindingKind, TopStatement, dotted_name

if TYPE_CHECKING:
    from torchlint.analysis import Analysis
    from torchlint.analysis.facts import Site
    from torchlint.rules.base import Replacement, RuleContext

_EQ = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def call_with_to(expr: cst.BaseExpression, device: str) -> cst.Call:
    """`expr.to(device)`."""
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("to")), args=[cst.Arg(cst.Name(device))])


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression, comment_after: bool = False) -> cst.Call:
    """`call` with `name=value` set, keeping its layout.

    An existing keyword of that name gets the new value. Otherwise the keyword
    is appended after the last argument, separated the way the call separates
    its arguments (`, ` on one line; newline and indentation when each
    argument has its own line), keeping a trailing comma if the call had one.
    Comments stay on the lines they annotate (the last argument keeps its own),
    and no line gains trailing whitespace; a closing parenthesis on its own
    line stays there.

    `comment_after`: a comment follows the call's `)` on its line (see
    `comment_follows`). It annotates the last argument's line, so where the
    new keyword would get a line of its own after that argument, it goes
    before it instead (before a last keyword argument; on the last argument's
    line after a positional one): the comment stays with what it annotates.
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
    trailing = isinstance(last.comma, cst.Comma)
    # What ends the argument list, before `)`.
    closing = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else last.whitespace_after_arg
    before_comma = last.comma.whitespace_before if isinstance(last.comma, cst.Comma) else _NONE
    between = _between(call, args)
    if (
        comment_after
        and isinstance(between, cst.ParenthesizedWhitespace)
        and not isinstance(closing, cst.ParenthesizedWhitespace)
    ):
        if last.keyword is not None and not last.star:
            # `shuffle=True)  # why`: the new keyword on its own line before the last one.
            new = new.with_changes(comma=cst.Comma(whitespace_before=_NONE, whitespace_after=between))
            return call.with_changes(args=args[:-1] + [new, last])
        between = cst.SimpleWhitespace(" ")  # `ds)  # why`: on the last argument's line
    if isinstance(closing, cst.ParenthesizedWhitespace):
        # `)` on a line of its own: the new argument gets a line of its own too;
        # the last argument keeps what followed it on its line (a comment).
        if isinstance(between, cst.ParenthesizedWhitespace):
            indent, last_line = between.indent, between.last_line
        else:
            indent, last_line = closing.indent, cst.SimpleWhitespace(closing.last_line.value + "    ")
        after_last = closing.with_changes(indent=indent, last_line=last_line)
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_before=before_comma, whitespace_after=after_last),
            whitespace_after_arg=last.whitespace_after_arg if trailing else _NONE,
        )
        end = _clean(closing)
    else:
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_before=before_comma, whitespace_after=between),
            whitespace_after_arg=last.whitespace_after_arg if trailing else _NONE,
        )
        end = closing
    if trailing:
        new = new.with_changes(comma=cst.Comma(whitespace_before=_NONE, whitespace_after=end))
    else:
        new = new.with_changes(whitespace_after_arg=end)
    return call.with_changes(args=args + [new])


_NONE = cst.SimpleWhitespace("")


def _clean(ws: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """A line break with the same indentation, without comments, blank lines or trailing spaces."""
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return ws


def _between(call: cst.Call, args: Sequence[cst.Arg]) -> cst.BaseParenthesizableWhitespace:
    """The whitespace after the comma between two arguments of this call: as
    after its own first comma between arguments (without that line's comment),
    else as before its first argument when that starts a line, else one space."""
    for a in args[:-1]:
        if isinstance(a.comma, cst.Comma):
            return _clean(a.comma.whitespace_after)
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return _clean(call.whitespace_before_args)
    return cst.SimpleWhitespace(" ")


def comment_follows(ctx: "Union[RuleContext, Analysis]", node: cst.CSTNode) -> bool:
    """A comment ends the line where `node` ends (`... shuffle=True)  # why`):
    the trailing comment of the statement (or of a compound statement's
    header) that holds `node`, on the line `node` ends on. `ctx`: a rule's
    context or the analysis (anything with the module and its facts)."""
    stmt: Optional[cst.CSTNode] = node
    while stmt is not None and not isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        stmt = ctx.facts.parent_of(stmt)
    if isinstance(stmt, cst.SimpleStatementLine):
        comment = stmt.trailing_whitespace.comment
    elif isinstance(stmt, cst.BaseCompoundStatement) and isinstance(getattr(stmt, "body", None), cst.IndentedBlock):
        comment = stmt.body.header.comment  # type: ignore[attr-defined]
    else:
        return False
    if comment is None or stmt is None:
        return False
    marker = cst.Name("_torchlint_node_end_")
    try:
        code = ctx.module.code_for_node(stmt.deep_replace(node, marker))
    except Exception:  # a node that cannot be replaced by a name there
        return False
    if marker.value not in code:
        return False
    rest = code.split(marker.value, 1)[1]
    line = rest.split("\n", 1)[0].rstrip("\r")
    return line.endswith(comment.value)


def keyword_value(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def parse_statements(lines: List[str]) -> List[cst.BaseStatement]:
    return [cst.parse_statement(line) for line in lines]


def module_at(
    ctx: "RuleContext", module: str, site: "Site", add_missing: bool = True
) -> Optional[Tuple[str, Dict[cst.CSTNode, "Replacement"]]]:
    """The name under which `module` can be used at `site`, and the replacements
    that make it so: none when the file imports it before `site` in source
    order (for code in a function: before its `def`); else `import module` added among the
    file's first imports (in a notebook: the first code cell that imports), or
    at the top when those come after `site`. None when the name means
    something else here, or (without `add_missing`) when the file never
    imports the module itself."""
    facts = ctx.facts
    alias = facts.module_alias(module)
    if alias is None and not add_missing:
        return None
    if alias is not None:
        imports = [b for b in facts.visible_bindings(alias, site.scope) if b.kind == BindingKind.IMPORT]
        if not imports:
            return None  # rebound here: don't guess
        if any(b.site.order < site.order for b in imports):
            # Before `site` in source order: for code in a function, before its `def`,
            # so the import has run whenever the function can be called.
            return alias, {}
        # Imported only after this point (a later notebook cell, an import below a
        # function that runs before it): import it before as well.
    if any(b.kind != BindingKind.IMPORT for b in facts.bindings_of(module)):
        return None  # the name means something else here
    top = module.split(".")[0]
    if top != module and facts.module_alias(top) is None and facts.bindings_of(top):
        return None
    placed = _cell_place(ctx, site) if ctx.path.endswith(".ipynb") else _import_place(ctx, module, site)
    if placed is None:
        return None
    stmt, before = placed
    new = cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(_dotted(module))])])
    if before:
        # The new line takes over the anchor's leading comments and blank lines.
        new = new.with_changes(leading_lines=stmt.leading_lines)
        return module, {stmt: cst.FlattenSentinel([new, stmt.with_changes(leading_lines=[])])}
    return module, {stmt: cst.FlattenSentinel([stmt, new])}


def _dotted(module: str) -> Union[cst.Name, cst.Attribute]:
    """`a.b.c` as a Name/Attribute chain."""
    parts = module.split(".")
    node: Union[cst.Name, cst.Attribute] = cst.Name(parts[0])
    for part in parts[1:]:
        node = cst.Attribute(node, cst.Name(part))
    return node


def _cell_place(ctx: "RuleContext", site: "Site") -> Optional[Tuple[TopStatement, bool]]:
    """In a notebook: at the top of the cell holding `site` (a fix may not span
    cells, and an earlier cell may not hold the import when it runs), after
    its IPython lines. Every fix in that cell that needs the import inserts it
    at the same place, so the fix loop applies one of them per pass (they
    overlap) and the next pass finds the import already there: one import per
    cell, however many statements it fixes."""
    node: Optional[cst.CSTNode] = site.stmt
    while node is not None:
        parent = ctx.facts.parent_of(node)
        if isinstance(parent, cst.Module):
            head = ctx.analysis.cell_head(node)
            return (head if head is not None else cast(TopStatement, node)), True  # a child of the module
        node = parent
    return None


def _import_place(ctx: "RuleContext", module: str, site: "Site") -> Optional[Tuple[TopStatement, bool]]:
    """Where `import module` goes: (statement, insert before it?). In the first
    run of plain `import x` lines, in alphabetical order; else before the first
    import (after `from __future__`); else, or when that is after `site`, before
    the module's first statement (after its docstring and `from __future__`)."""
    found = _import_anchor(ctx.module, module)
    if found is not None:
        stmt, _ = found
        where = ctx.facts.site_of_statement(stmt.body[0]) if isinstance(stmt, cst.SimpleStatementLine) else None
        if where is not None and where.order < site.order:
            return found
    for i, stmt in enumerate(ctx.module.body):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None
        if (
            i == 0
            and isinstance(small, cst.Expr)
            and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))
        ):
            continue  # the docstring
        if isinstance(small, cst.ImportFrom) and dotted_name(small.module) == "__future__":
            continue
        return stmt, True
    return None


def _import_anchor(module: cst.Module, name: str) -> Optional[Tuple[TopStatement, bool]]:
    """In the first run of plain `import x` lines, in alphabetical order; else
    before the first import (after `from __future__`)."""
    plain_run: List[Tuple[Union[cst.SimpleStatementLine, cst.BaseCompoundStatement], str]] = []
    first_import = None
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None
        if isinstance(small, cst.ImportFrom) and dotted_name(small.module) == "__future__":
            continue
        if isinstance(small, cst.Import):
            if plain_run and stmt.leading_lines:
                break  # a blank line or comment ends the block
            plain_run.append((stmt, dotted_name(small.names[0].name) or ""))
            first_import = first_import or stmt
            continue
        if isinstance(small, cst.ImportFrom):
            first_import = first_import or stmt
        if plain_run:
            break
        if first_import is not None and not isinstance(small, cst.ImportFrom):
            break
    if plain_run:
        for stmt, other in plain_run:
            if other > name:
                return stmt, True
        return plain_run[-1][0], False
    return (first_import, True) if first_import is not None else None
