"""Where a file calls each name: inside a no-grad region or not. A call of
`infer(...)` or `x.infer(...)` counts for `infer`; it is guarded inside
`with torch.no_grad():` / `with torch.inference_mode():` (any receiver whose
name ends so: a project's own `utils.no_grad()` too) or in a function
decorated with one. The project index reads it to tell that every call of a
method or function, in every file of a project, runs with autograd off. Each
name also says whether the file defines a function or method of that name
itself: its calls there are most likely of its own definition."""

from __future__ import annotations

import ast
from typing import Dict, List, Tuple

from torchlint.analysis.project.tree_walk import children

# (called name, guarded calls, other calls, the file defines a function or method of that name)
GuardedCalls = Tuple[Tuple[str, int, int, bool], ...]

_NO_GRAD_NAMES = ("no_grad", "inference_mode")


def _turns_grad_off(expr: ast.expr) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    if name == "set_grad_enabled" and isinstance(expr, ast.Call) and expr.args:
        arg = expr.args[0]
        return isinstance(arg, ast.Constant) and arg.value is False
    return name.endswith(_NO_GRAD_NAMES)


def guarded_calls(tree: ast.Module) -> GuardedCalls:
    counts: Dict[str, List[int]] = {}
    defined = set()
    stack: List[Tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, guarded = stack.pop()
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(_turns_grad_off(i.context_expr) for i in node.items):
            guarded = True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
            guarded = any(_turns_grad_off(d) for d in node.decorator_list)  # its body runs where it is called
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name is not None:
                counts.setdefault(name, [0, 0])[0 if guarded else 1] += 1
        stack.extend((child, guarded) for child in children(node))
    return tuple(sorted((name, g, u, name in defined) for name, (g, u) in counts.items()))
