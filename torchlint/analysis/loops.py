"""Loop questions for the loop and sync rules: where code runs every iteration
of a hot loop (directly or in a same-file helper the loop calls), whether a
statement sits under a periodic guard (`if step % N == 0:`), and whether the
hot loop trains.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import libcst as cst

from torchlint.analysis.facts import Call, Function, Loop, Site
from torchlint.analysis.semantics import Semantics


@dataclass(frozen=True)
class HotContext:
    """Why a site runs every iteration of a hot loop."""

    loop: Loop  # the outermost hot loop that drives it
    training: bool  # that loop (or anything it calls in the file) trains
    via: Optional[str] = None  # the helper function name, when reached through a call


def _has_modulo(expr: cst.CSTNode) -> bool:
    found = []

    class _V(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, cst.Modulo):
                found.append(node)

    expr.visit(_V())
    return bool(found)


class Loops:
    def __init__(self, sem: Semantics) -> None:
        self.sem = sem
        self.facts = sem.facts
        self._training: Dict[int, bool] = {}
        self._helper: Dict[int, Optional[HotContext]] = {}

    @classmethod
    def of(cls, sem: Semantics) -> "Loops":
        v = getattr(sem, "_tl_loops", None)
        if v is None:
            v = cls(sem)
            sem._tl_loops = v  # type: ignore[attr-defined]
        return v

    # -- guards ------------------------------------------------------------

    def periodic_guard(self, site: Site, loop: Optional[Loop] = None) -> bool:
        """Under an `if` whose test uses `%` (`if step % 100 == 0:`) inside the loop."""
        for if_node in site.ifs:
            if_site = self.facts.site_of_statement(if_node)
            if loop is not None and if_site is not None and not loop.contains(if_site.order):
                continue
            if _has_modulo(if_node.test):
                return True
        return False

    # -- training ------------------------------------------------------------

    def is_training_loop(self, loop: Loop) -> bool:
        """The loop's body (nested loops and same-file helpers it calls included)
        calls `.backward()` or `optimizer.step()`."""
        key = id(loop.node)
        if key not in self._training:
            self._training[key] = False
            self._training[key] = self._trains(loop)
        return self._training[key]

    def _trains(self, loop: Loop) -> bool:
        for call in self.facts.calls:
            if call.site.scope is not loop.scope or not loop.contains(call.site.order):
                continue
            if self._is_train_call(call):
                return True
            fn = self._local_function(call)
            if fn is not None and self._function_trains(fn, set()):
                return True
        return False

    def _is_train_call(self, call: Call) -> bool:
        return call.method == "backward" or self.sem.is_optimizer_step(call) or call.qualname in (
            "torch.autograd.backward", "torch.autograd.grad")

    def _function_trains(self, fn: Function, seen: set) -> bool:
        if id(fn.node) in seen:
            return False
        seen.add(id(fn.node))
        for call in self.facts.calls:
            if not any(s is fn.scope for s in call.site.scope.chain()):
                continue
            if self._is_train_call(call):
                return True
            inner = self._local_function(call)
            if inner is not None and self._function_trains(inner, seen):
                return True
        return False

    def _local_function(self, call: Call) -> Optional[Function]:
        """The module-level (or enclosing) function a plain-name call resolves to."""
        func = call.node.func
        if not isinstance(func, cst.Name):
            return None
        bs = self.facts.visible_bindings(func.value, call.site.scope)
        if len(bs) != 1 or bs[0].kind != "def":
            return None
        node = bs[0].target
        for fn in self.facts.functions:
            if fn.node is node:
                return fn
        return None

    def steps_environment(self, loop: Loop) -> bool:
        """The loop drives an environment (`env.step(action)`): online acting,
        where pulling the action to the host is inherent."""
        for call in self.facts.calls:
            if call.method == "step" and call.site.scope is loop.scope and loop.contains(call.site.order):
                from torchlint.analysis.facts import dotted_name

                if "env" in (dotted_name(call.receiver) or "").lower():
                    return True
        return False

    # -- hot contexts ------------------------------------------------------

    def hot_context(self, site: Site) -> Optional[HotContext]:
        """How `site` runs every iteration of a hot loop, or None."""
        loop = self.sem.hot_loop_of(site)
        if loop is not None:
            if self.periodic_guard(site, loop):
                return None
            return HotContext(loop, self.is_training_loop(loop))
        # A helper called from a hot loop: the site is in the function's body
        # (not under a periodic guard inside the function).
        fn_scope = site.scope.function
        if fn_scope is None or site.scope is not fn_scope:
            return None
        if self.periodic_guard(site):
            return None
        fn = self.facts.function_of(fn_scope)
        if fn is None:
            return None
        return self._helper_context(fn, 0)

    def _helper_context(self, fn: Function, depth: int) -> Optional[HotContext]:
        key = id(fn.node)
        if key in self._helper:
            return self._helper[key]
        self._helper[key] = None
        result = None
        if depth < 3 and fn.scope.parent is not None and fn.scope.parent.kind != "class":
            for call in self._calls_of(fn):
                loop = self.sem.hot_loop_of(call.site)
                if loop is not None:
                    if self.periodic_guard(call.site, loop):
                        continue
                    result = HotContext(loop, self.is_training_loop(loop), fn.name)
                    break
                outer_scope = call.site.scope
                outer = self.facts.function_of(outer_scope) if outer_scope.kind == "function" else None
                if outer is not None and not self.periodic_guard(call.site):
                    ctx = self._helper_context(outer, depth + 1)
                    if ctx is not None:
                        result = HotContext(ctx.loop, ctx.training, fn.name)
                        break
        self._helper[key] = result
        return result

    def _calls_of(self, fn: Function) -> List[Call]:
        out = []
        for call in self.facts.calls:
            if isinstance(call.node.func, cst.Name) and call.node.func.value == fn.name:
                if self._local_function(call) is fn:
                    out.append(call)
        return out
