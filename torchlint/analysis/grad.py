"""Gradient questions for TL201: inference contexts, no-grad guards (lexical
and through same-file callers), whether gradients are used, and whether a
model carries trained weights.
"""
from __future__ import annotations

import re
from typing import Dict, Optional

import libcst as cst

from torchlint.analysis.facts import Call, Function, Scope, Site, dotted_name
from torchlint.analysis.semantics import Semantics

INFERENCE_NAME = re.compile(r"^_*(eval|evaluate|test|predict|infer|inference|validate|validation|generate)", re.I)
_GRAD_USERS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})
_LOADERS = frozenset({"torch.load", "torch.hub.load", "torch.jit.load", "torch.jit.script", "torch.export.load"})


class Grad:
    def __init__(self, sem: Semantics) -> None:
        self.sem = sem
        self.facts = sem.facts
        self._file_trains: Optional[bool] = None
        self._guarded_fn: Dict[int, bool] = {}

    @classmethod
    def of(cls, sem: Semantics) -> "Grad":
        v = getattr(sem, "_tl_grad", None)
        if v is None:
            v = cls(sem)
            sem._tl_grad = v  # type: ignore[attr-defined]
        return v

    # -- training anywhere ---------------------------------------------------

    def is_grad_use(self, call: Call) -> bool:
        return call.method == "backward" or call.qualname in _GRAD_USERS or self.sem.is_optimizer_step(call)

    def file_trains(self) -> bool:
        if self._file_trains is None:
            self._file_trains = any(self.is_grad_use(c) for c in self.facts.calls)
        return self._file_trains

    def scope_uses_grad(self, scope: Scope) -> bool:
        """The forward's own function (or module body) computes gradients or
        enables them explicitly."""
        for call in self.facts.calls:
            if call.site.scope is scope and (
                self.is_grad_use(call)
                or call.method == "requires_grad_"
                or call.qualname in ("torch.enable_grad", "torch.autograd.enable_grad")
            ):
                return True
        return False

    # -- guards --------------------------------------------------------------

    def _global_disables(self):
        """`torch.set_grad_enabled(False)` called as a statement: (scope, order)."""
        cached = getattr(self, "_disables", None)
        if cached is not None:
            return cached
        out = []
        for c in self.facts.calls:
            if c.qualname in ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled") and c.node.args \
                    and isinstance(c.node.args[0].value, cst.Name) and c.node.args[0].value.value == "False" \
                    and isinstance(c.site.parent, cst.Expr):
                out.append((c.site.scope, c.site.order))
        self._disables = out
        return out

    def guarded(self, site: Site) -> bool:
        if self.sem.under_no_grad(site):
            return True
        for scope, order in self._global_disables():
            if scope.kind == "module" or (scope is site.scope and order < site.order):
                return True
        if any(self._enables_grad(w) for w in site.withs):
            return True  # explicitly with gradients: not our business
        fn_scope = site.scope.function
        while fn_scope is not None:
            fn = self.facts.function_of(fn_scope)
            if fn is not None and self._called_only_guarded(fn):
                return True
            parent = fn_scope.parent
            fn_scope = parent.function if parent is not None else None
        return False

    def _enables_grad(self, with_node: cst.With) -> bool:
        for item in with_node.items:
            expr = item.item
            target = expr.func if isinstance(expr, cst.Call) else expr
            q = self.facts.qualname(target)
            if q in ("torch.enable_grad", "torch.autograd.enable_grad"):
                return True
            if q in ("torch.set_grad_enabled",) and isinstance(expr, cst.Call) and expr.args:
                v = expr.args[0].value
                if not (isinstance(v, cst.Name) and v.value == "False"):
                    return True  # True or a variable: can't tell
        return False

    def _called_only_guarded(self, fn: Function) -> bool:
        key = id(fn.node)
        if key in self._guarded_fn:
            return self._guarded_fn[key]
        self._guarded_fn[key] = False
        if fn.name == "<lambda>":
            return False
        calls = [c for c in self.facts.calls if _calls_function(c, fn)]
        result = bool(calls) and all(self.guarded(c.site) for c in calls)
        self._guarded_fn[key] = result
        return result

    # -- inference contexts --------------------------------------------------

    def inference_function(self, site: Site) -> Optional[Function]:
        """The innermost enclosing function named like an inference entry point."""
        scope = site.scope
        for s in scope.chain():
            if s.kind == "function":
                fn = self.facts.function_of(s)
                if fn is not None and INFERENCE_NAME.match(fn.name):
                    return fn
        return None

    def after_eval(self, call: Call) -> Optional[int]:
        """The order of a `model.eval()` earlier in the same scope with no
        `.train()` in between (None when there is none)."""
        site = call.site
        last_eval = last_train = -1
        for c in self.facts.calls:
            if c.site.scope is not site.scope or c.site.order >= site.order:
                continue
            if c.receiver is not None and ((c.method == "eval" and not c.node.args) or (
                    c.method == "train" and c.node.args and isinstance(c.node.args[0].value, cst.Name)
                    and c.node.args[0].value.value == "False")):
                last_eval = max(last_eval, c.site.order)
            elif c.method == "train" and c.receiver is not None:
                last_train = max(last_train, c.site.order)
        if last_eval < 0 or last_train > last_eval:
            return None
        # A `.train()` later in an enclosing loop that does not also re-run the
        # `.eval()` puts the model back in training mode on the next iteration.
        if site.loop is not None:
            for loop in site.loop.chain():
                if loop.contains(last_eval):
                    break
                for c in self.facts.calls:
                    if c.method == "train" and c.site.scope is site.scope and loop.contains(c.site.order):
                        return None
        return last_eval

    def grad_used_after(self, scope: Scope, order: int) -> bool:
        """Gradients computed in `scope` after source position `order`."""
        return any(c.site.scope is scope and c.site.order > order and self.is_grad_use(c) for c in self.facts.calls)

    def has_trained_weights(self, call: Call) -> bool:
        """The called model is loaded with weights (pretrained / checkpoint)."""
        func = call.node.func
        name = dotted_name(func)
        if name is None:
            return False
        for c in self.facts.calls:
            if c.method in ("load_state_dict", "from_pretrained") and dotted_name(c.receiver) == name:
                return True
        return self._expr_pretrained(func, call.site, 0)

    def _expr_pretrained(self, expr: cst.BaseExpression, site: Site, depth: int) -> bool:
        if depth > 5:
            return False
        if isinstance(expr, cst.Call):
            c = self.facts.call_for(expr)
            if c is None:
                return False
            if c.method == "from_pretrained" or c.qualname in _LOADERS:
                return True
            if c.qualname and (c.qualname.startswith("torchvision.models.") or c.qualname == "timm.create_model"):
                for kw in ("pretrained", "weights"):
                    arg = c.keyword(kw)
                    if arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value in ("None", "False")):
                        return True
                return False
            if c.method in ("to", "cuda", "eval", "half", "float", "bfloat16", "requires_grad_") and c.receiver is not None:
                return self._expr_pretrained(c.receiver, site, depth + 1)
            return False
        name = dotted_name(expr)
        if name is None:
            return False
        bindings = self.facts.visible_bindings(name, site.scope)
        values = [b for b in bindings if b.kind in ("assign", "annassign") and b.value is not None and b.index is None]
        return bool(values) and any(self._expr_pretrained(b.value, b.site, depth + 1) for b in values)

    def is_model_call(self, call: Call) -> bool:
        """A forward: a known module, or a name bound to a loaded checkpoint."""
        if self.sem.is_model_forward(call):
            return True
        from torchlint.analysis.tensors import Tensors

        if Tensors.of(self.sem)._is_module_param_call(call):
            return True
        name = dotted_name(call.node.func)
        if name is not None:
            for b in self.facts.visible_bindings(name, call.site.scope):
                if b.kind == "assign" and isinstance(b.value, cst.Call):
                    c = self.facts.call_for(b.value)
                    if c is not None and c.qualname in _LOADERS:
                        return True
        return False


def _calls_function(call: Call, fn: Function) -> bool:
    func = call.node.func
    if isinstance(func, cst.Name):
        return func.value == fn.name and fn.scope.parent is not None and fn.scope.parent.kind != "class"
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return func.attr.value == fn.name and fn.scope.parent is not None and fn.scope.parent.kind == "class"
    return False
