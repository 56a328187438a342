"""Command-line options a file declares: `parser.add_argument("--num-workers",
type=int, default=4)` gives the option `num_workers` (its `dest`) the default
`4`. Rules ask what a value read from parsed arguments (`args.num_workers`)
is when the script runs as written, without flags."""

from __future__ import annotations

from typing import Dict, Optional

import libcst as cst

from torchlint.analysis.facts import Facts


def option_defaults(facts: Facts) -> Dict[str, Optional[cst.BaseExpression]]:
    """Each option's `dest` -> its `default=` expression (None: no default, so
    `None` at run time, or declared twice with different defaults)."""
    out: Dict[str, Optional[cst.BaseExpression]] = {}
    for call in facts.calls:
        if call.method != "add_argument":
            continue
        dest = _dest(call.node)
        if dest is None:
            continue
        kw = call.keyword("default")
        default = kw.value if kw is not None else None
        if dest in out and not _same(out[dest], default):
            out[dest] = None  # two parsers (or branches) disagree: unknown
        else:
            out[dest] = default
    return out


def _dest(node: cst.Call) -> Optional[str]:
    """`dest=` if given, else the first long option (`--num-workers` ->
    `num_workers`), else a positional name."""
    names = []
    for arg in node.args:
        if arg.keyword is not None:
            if arg.keyword.value == "dest" and isinstance(arg.value, cst.SimpleString):
                return str(arg.value.evaluated_value)
            continue
        if isinstance(arg.value, cst.SimpleString):
            names.append(str(arg.value.evaluated_value))
    longs = [n for n in names if n.startswith("--")]
    if longs:
        return longs[0][2:].replace("-", "_")
    if names and not names[0].startswith("-"):
        return names[0]
    return None


def _same(a: Optional[cst.BaseExpression], b: Optional[cst.BaseExpression]) -> bool:
    if a is None or b is None:
        return a is b
    return cst.Module([]).code_for_node(a) == cst.Module([]).code_for_node(b)
