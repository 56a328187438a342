"""Which calls' results a file iterates again and again: `train_loader,
val_loader = get_dataloaders(...)` of another module, then `for epoch in
range(epochs): for x, y in train_loader:`. The project index reads it to tell
a loader factory's file that a loader it returns has its worker processes
started anew at every pass (TL304).

A pass counts when, in one function (or the module's body), a `for` iterates
a name (through `enumerate(...)`/`tqdm(...)`) whose only binding in that
scope is `name = f(...)` or an element of `a, b = f(...)`, made outside a
loop around the `for` that repeats: a `for` or `while` not stopped by a
`break`/`return` at its own level, and no `if` with a `%` test between the
two (`if epoch % 10 == 0:` runs now and then). A `for` that stops at its
first item (a peek) does not count.
"""

from __future__ import annotations

import ast
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from torchlint.analysis.project.handoffs import dotted
from torchlint.analysis.project.tree_walk import BODY_FIELDS, all_statements, push_children
from torchlint.analysis.vocabulary import ITER_WRAPPERS

# (the callee as written, `get_dataloaders` or `utils.load_dataset`; the element of its result, -1 for the whole)
ResultPasses = Tuple[Tuple[str, int], ...]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def result_passes(tree: ast.Module, qualify: Callable[[Optional[str]], Optional[str]]) -> ResultPasses:
    """Every (callee, element) whose result a scope of `tree` iterates in a
    loop that repeats (see the module); the callee is a name the scope does
    not bind itself (an import, or a name of the module). `qualify` reads a
    dotted name through the module's imports (None: not imported).

    Statements only are walked, except in a scope with such a `for`, whose
    bindings are then counted."""
    found: Set[Tuple[str, int]] = set()
    for body, params in _scopes(tree):
        _Scope(body, qualify, found, params).run()
    return tuple(sorted(found))


def _scopes(tree: ast.Module) -> Iterator[Tuple[Sequence[ast.stmt], Sequence[str]]]:
    """The module's body, then every function's (at any depth), with its parameters."""
    yield tree.body, ()
    for node in all_statements(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]]
            yield node.body, params


class _Scope:
    def __init__(
        self,
        body: Sequence[ast.stmt],
        qualify: Callable[[Optional[str]], Optional[str]],
        found: Set[Tuple[str, int]],
        params: Sequence[str] = (),
    ) -> None:
        self.body = body
        self.qualify = qualify
        self.found = found
        self.params = params
        self.results: Dict[str, Tuple[str, int, Tuple[int, ...]]] = {}  # name -> (callee, element, loops around)
        self.candidates: List[Tuple[str, str, int]] = []  # (iterated name, callee, element)

    def run(self) -> None:
        self._walk(self.body, [])
        if not self.candidates:
            return
        stores = self._stores()
        for name, callee, element in self.candidates:
            if stores.get(name) == 1 and callee.split(".")[0] not in stores:
                self.found.add((callee, element))  # (a callee the scope binds: a local value's method)

    def _stores(self) -> Dict[str, int]:
        """Name -> how many times the scope binds it (imports aside)."""
        stores: Dict[str, int] = {p: 1 for p in self.params}
        stack: List[ast.AST] = list(self.body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name):
                if not isinstance(node.ctx, ast.Load):
                    stores[node.id] = stores.get(node.id, 0) + 1
            elif isinstance(node, _SCOPES):
                if not isinstance(node, ast.Lambda):
                    stores[node.name] = stores.get(node.name, 0) + 1
                continue  # what it binds is another scope's
            push_children(node, stack)
        return stores

    def _walk(self, body: Sequence[ast.AST], path: List[ast.AST]) -> None:
        for stmt in body:
            if isinstance(stmt, _SCOPES):
                continue
            if isinstance(stmt, ast.Assign):
                self._bind(stmt, path)
            elif isinstance(stmt, (ast.For, ast.AsyncFor)) and path:
                self._pass(stmt, path)
            for field in BODY_FIELDS:
                inner = getattr(stmt, field, None)
                if inner:
                    self._walk(inner, path + [stmt])

    def _bind(self, stmt: ast.Assign, path: List[ast.AST]) -> None:
        if len(stmt.targets) != 1 or not isinstance(stmt.value, ast.Call):
            return
        callee = dotted(stmt.value.func)
        if callee is None:
            return
        loops = tuple(id(n) for n in path if isinstance(n, _LOOPS))
        target = stmt.targets[0]
        if isinstance(target, ast.Name):
            self.results[target.id] = (callee, -1, loops)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    self.results[element.id] = (callee, i, loops)

    def _pass(self, loop: Union[ast.For, ast.AsyncFor], path: List[ast.AST]) -> None:
        name = self._iterated_name(loop.iter)
        bound = self.results.get(name) if name is not None else None
        if name is None or bound is None or _stops_at_once(loop):
            return
        callee, element, loops_at_binding = bound
        for i in range(len(path) - 1, -1, -1):
            outer = path[i]
            if not isinstance(outer, _LOOPS) or id(outer) in loops_at_binding:
                continue
            between = path[i + 1 :]
            if not _stops_at_once(outer) and not any(isinstance(n, ast.If) and _now_and_then(n.test) for n in between):
                self.candidates.append((name, callee, element))
            return

    def _iterated_name(self, expr: ast.AST) -> Optional[str]:
        while isinstance(expr, ast.Call) and expr.args:
            name = dotted(expr.func)
            if name is None or not (name in ITER_WRAPPERS or (self.qualify(name) or "") in ITER_WRAPPERS):
                return None
            expr = expr.args[0]
        return expr.id if isinstance(expr, ast.Name) else None


def _stops_at_once(loop: ast.AST) -> bool:
    """A `break` or `return` at the loop's own level: it runs its body once."""
    return any(isinstance(s, (ast.Break, ast.Return)) for s in getattr(loop, "body", []))


def _now_and_then(test: ast.AST) -> bool:
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test))
