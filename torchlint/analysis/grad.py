"""Gradients: where autograd is off (`no_grad`/`inference_mode` blocks and
decorators, `set_grad_enabled(False)`, functions only called from such
regions), which forwards run in an inference context, and whether a
forward's result (or anything computed from it) later needs gradients:
reaches `.backward()`, `torch.autograd.grad`, an optimizer, or a caller that
trains on it."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import (
    BindingKind,
    Call,
    Facts,
    Function,
    Loop,
    Scope,
    ScopeKind,
    Site,
    dotted_name,
    strip_methods,
)
from torchlint.analysis.helpers import Helpers, root_name
from torchlint.analysis.knowledge import MODULE_BUILD_CHAIN
from torchlint.analysis.loops import INFER, Loops
from torchlint.analysis.places import Places
from torchlint.analysis.project.kinds import ClassKind
from torchlint.analysis.roles import Roles
from torchlint.analysis.value_kinds import MODULE, ModelCall
from torchlint.analysis.values import Values
from torchlint.analysis.vocabulary import (
    ENABLE_GRAD,
    INFERENCE_NAME,
    NO_GRAD_CONTEXTS,
    NO_GRAD_EVALUATORS,
    SET_GRAD_ENABLED,
)
from torchlint.analysis.walk import children, contains, mentions

MAX_TAINT_ROUNDS = 6
# A project's own decorator or context manager named after what it wraps.
_NAMES_NO_GRAD = re.compile(r"inference_mode|no_grad", re.I)
_CONTAINER_METHODS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "put"})


class Grad:
    def __init__(
        self, facts: Facts, values: Values, helpers: Helpers, loops: Loops, roles: Roles, places: Places
    ) -> None:
        self.facts = facts
        self.values = values
        self.helpers = helpers
        self.loops = loops
        self.roles = roles
        self.places = places
        self._guarded_fn: Dict[int, bool] = {}
        self._disables: Optional[List[Tuple[Scope, int]]] = None
        self._taint: Dict[int, Tuple[Set[int], Set[str], bool]] = {}
        self._containers: Dict[int, Set[str]] = {}

    # -- no-grad regions ---------------------------------------------------------------

    def _is_no_grad_expr(self, expr: cst.BaseExpression) -> bool:
        target = expr.func if isinstance(expr, cst.Call) else expr
        q = self.facts.qualname(target)
        if q in NO_GRAD_CONTEXTS:
            return True
        name = (q or dotted_name(target) or "").rsplit(".", 1)[-1]
        if not (q or "").startswith("torch.") and _NAMES_NO_GRAD.search(name):
            return True  # a project's own wrapper: `@smart_inference_mode()`, `with utils.no_grad():`
        if q in SET_GRAD_ENABLED and isinstance(expr, cst.Call) and expr.args:
            v = expr.args[0].value
            return isinstance(v, cst.Name) and v.value == "False"
        return self._project_guard(target, called=isinstance(expr, cst.Call))

    def _project_guard(self, target: cst.BaseExpression, called: bool) -> bool:
        """A project's own decorator, decorator factory, context manager or alias
        that the project index says turns autograd off (`@smart_inference_mode()`,
        `with eval_mode():`, `no_grad = torch.no_grad`), here or in another file."""
        project = self.values.project
        if project is None:
            return False
        q = self.facts.qualname(target)
        if q is None and isinstance(target, cst.Name) and _module_level(self.facts, target.value):
            q = project.local(target.value)
        return q is not None and project.guards_grad(q, called)

    def is_no_grad_with(self, with_node: cst.With) -> bool:
        return any(self._is_no_grad_expr(item.item) for item in with_node.items)

    def _enables_grad(self, with_node: cst.With) -> bool:
        for item in with_node.items:
            expr = item.item
            target = expr.func if isinstance(expr, cst.Call) else expr
            q = self.facts.qualname(target)
            if q in ENABLE_GRAD:
                return True
            if q in SET_GRAD_ENABLED and isinstance(expr, cst.Call) and expr.args:
                v = expr.args[0].value
                if not (isinstance(v, cst.Name) and v.value == "False"):
                    return True  # True or a variable: can't tell
        return False

    def decorated_no_grad(self, fn: Function) -> bool:
        return any(self._is_no_grad_expr(d.decorator) for d in fn.decorators)

    def decorated_enable_grad(self, fn: Function) -> bool:
        for d in fn.decorators:
            target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
            if self.facts.qualname(target) in ENABLE_GRAD:
                return True
        return False

    def _global_disables(self) -> List[Tuple[Scope, int]]:
        """`torch.set_grad_enabled(False)` called as a statement: (scope, order)."""
        if self._disables is None:
            self._disables = [
                (c.site.scope, c.site.order)
                for c in self.facts.calls
                if c.qualname in SET_GRAD_ENABLED
                and c.node.args
                and isinstance(c.node.args[0].value, cst.Name)
                and c.node.args[0].value.value == "False"
                and isinstance(c.site.parent, cst.Expr)
            ]
        return self._disables

    def guarded(self, site: Site) -> bool:
        """Autograd is off (or explicitly on: not our business) at `site`."""
        if any(self.is_no_grad_with(w) or self._enables_grad(w) for w in site.withs):
            return True
        for scope in site.scope.chain():
            if scope.kind == ScopeKind.FUNCTION:
                fn = self.facts.function_of(scope)
                if fn is not None and (self.decorated_no_grad(fn) or self.decorated_enable_grad(fn)):
                    return True
            if scope.kind == ScopeKind.LAMBDA and self._evaluator_callback(scope.node):
                return True
        for scope, order in self._global_disables():
            if scope.kind == ScopeKind.MODULE or (scope is site.scope and order < site.order):
                return True
        fn_scope = site.scope.function
        while fn_scope is not None:
            fn = self.facts.function_of(fn_scope)
            if fn is not None and self._called_only_guarded(fn):
                return True
            parent = fn_scope.parent
            fn_scope = parent.function if parent is not None else None
        return False

    def guarded_here(self, site: Site) -> bool:
        """Autograd is off at `site` by the code around it in its own function:
        a no-grad `with` or decorator (not by who calls the function)."""
        if any(self.is_no_grad_with(w) for w in site.withs):
            return True
        for scope in site.scope.chain():
            if scope.kind == ScopeKind.FUNCTION:
                fn = self.facts.function_of(scope)
                if fn is not None and self.decorated_no_grad(fn):
                    return True
        return False

    def _evaluator_callback(self, node: cst.CSTNode) -> bool:
        """`node` is handed as `eval_func=` to a framework evaluator that runs
        it with autograd off (pytorch_pfn_extras' `Evaluator`)."""
        parent = self.facts.parent_of(node)
        call = self.facts.call_of_arg(parent) if isinstance(parent, cst.Arg) else None
        return (
            call is not None
            and call.qualname in NO_GRAD_EVALUATORS
            and isinstance(parent, cst.Arg)
            and parent.keyword is not None
            and parent.keyword.value == "eval_func"
        )

    def _called_only_guarded(self, fn: Function) -> bool:
        key = id(fn.node)
        if key in self._guarded_fn:
            return self._guarded_fn[key]
        self._guarded_fn[key] = False
        calls = self.values.callers(fn) if fn.name != "<lambda>" else []
        result = all(self.guarded(c.site) for c in calls) if calls else self._project_called_guarded(fn)
        self._guarded_fn[key] = result
        return result

    def _project_called_guarded(self, fn: Function) -> bool:
        """No call of `fn` in its file: every call of it (of a method, by its
        name) in the other files of its project runs with autograd off (a
        trainer's `infer()` that only validation callbacks call under no_grad)."""
        project = self.values.project
        parent = fn.scope.parent
        if project is None or parent is None or fn.name.startswith("__") or fn.name in ("forward", "<lambda>"):
            return False
        if parent.kind == ScopeKind.MODULE:
            return project.called_guarded(project.local(fn.name))
        owner = parent.parent
        if parent.kind == ScopeKind.CLASS and owner is not None and owner.kind == ScopeKind.MODULE:
            return project.called_guarded(project.local(parent.name), fn.name)
        return False

    # -- eval mode ----------------------------------------------------------------------------

    def after_eval(self, call: Call) -> Optional[int]:
        """The order of a `.eval()` earlier in the same scope with no `.train()`
        in between (None when there is none)."""
        site = call.site
        last_eval = last_train = -1
        for c in self.helpers.calls_in_scope(site.scope):
            if c.site.order >= site.order or c.receiver is None:
                continue
            if (c.method == "eval" and not c.node.args) or (
                c.method == "train"
                and c.node.args
                and isinstance(c.node.args[0].value, cst.Name)
                and c.node.args[0].value.value == "False"
            ):
                last_eval = max(last_eval, c.site.order)
            elif c.method == "train" and not (c.node.args and not isinstance(c.node.args[0].value, cst.Name)):
                last_train = max(last_train, c.site.order)
        if last_eval < 0 or last_train > last_eval:
            return None
        # A `.train()` later in an enclosing loop puts the model back in training mode next iteration.
        if site.loop is not None:
            for loop in site.loop.chain():
                if loop.scope is not site.scope or loop.contains(last_eval):
                    break
                for c in self.loops.calls_in(loop):
                    if c.method == "train" and c.receiver is not None:
                        return None
        return last_eval

    # -- does the result need gradients? ---------------------------------------------------

    def grad_needed(self, call: Call) -> bool:
        """The forward's result, or anything computed from it in its function,
        reaches `.backward()`/`torch.autograd.grad`/an optimizer, is handed to
        code we cannot see in a file that trains, is stored on an object, or is
        returned to a caller that trains."""
        tainted, names, escapes = self._tainted(call)
        scope = call.site.scope
        file_trains = any(self.values.is_train_call(c) for c in self.facts.calls)

        containers = self._containers.get(id(call.node), set())

        def reaches(expr: cst.BaseExpression, site: Site) -> bool:
            """Some name read in `expr` holds the forward's result (or a container of it)."""
            for name in _names_in(expr):
                if name in containers:
                    return True
                if name in names and any(id(b) in tainted for b in self.places.reaching(name, site)):
                    return True
            return False

        for c in self.helpers.calls_in_scope(scope):
            if c.site.order < call.site.order and not _same_loop(c.site, call.site):
                continue
            if (
                c.method == "backward"
                and c.receiver is not None
                and (reaches(c.receiver, c.site) or contains(c.receiver, call.node))
            ):
                return True
            if c.qualname in ("torch.autograd.grad", "torch.autograd.backward") and any(
                reaches(a.value, c.site) for a in c.node.args
            ):
                return True
            fn = self.helpers.function(c)
            if (
                fn is not None
                and self.helpers.summary(fn).trains
                and any(reaches(a.value, c.site) or a.value is call.node for a in c.node.args)
            ):
                return True
        if escapes and file_trains:
            return True
        if self._returned(call, names):
            fn = self.facts.function_of(scope.function) if scope.function is not None else None
            if fn is not None and self._callers_train(fn):
                return True
        return False

    def _tainted(self, call: Call) -> Tuple[Set[int], Set[str], bool]:
        """The bindings (ids) computed from the forward's result in its scope,
        their names (plus containers it was put in), and whether it was stored
        on an object."""
        key = id(call.node)
        if key in self._taint:
            return self._taint[key]
        scope = call.site.scope
        start = self.facts.bindings_at(call.site.stmt)
        tainted: Set[int] = {id(b) for b in start}
        names: Set[str] = {b.name for b in start}
        escapes = any("." in b.name for b in start) or _stores_subscript(call.site.stmt)
        # `outputs.append(model(x))`: the container holds it.
        holder = self.facts.call_of_arg(call.site.parent) if isinstance(call.site.parent, cst.Arg) else None
        if holder is not None and holder.receiver is not None and holder.method in _CONTAINER_METHODS:
            r = root_name(holder.receiver)
            if r:
                names.add(r)
                self._containers.setdefault(key, set()).add(r)
        uses = self.facts.uses_in(scope)
        for _ in range(MAX_TAINT_ROUNDS):
            added = False
            for u in uses:
                if u.node.value not in names:
                    continue
                reach = self.places.reaching(u.node.value, u.site)
                if not any(id(b) in tainted for b in reach) and u.node.value not in self._containers.get(key, ()):
                    continue
                for b in self.facts.bindings_at(u.site.stmt):
                    if id(b) not in tainted:
                        tainted.add(id(b))
                        names.add(b.name)
                        added = True
                        if "." in b.name:
                            escapes = True
                if _stores_subscript(u.site.stmt):
                    escapes = escapes or any("." in t for t in _stmt_targets(u.site.stmt))
                    for t in _stmt_targets(u.site.stmt):
                        if t not in names:
                            names.add(t)
                            self._containers.setdefault(key, set()).add(t)
                            added = True
                parent = u.site.parent
                # `losses.append(out)`: the container now holds it.
                if isinstance(parent, cst.Arg):
                    c = self.facts.call_of_arg(parent)
                    if c is not None and c.receiver is not None and c.method in _CONTAINER_METHODS:
                        r = root_name(c.receiver)
                        if r and r not in names:
                            names.add(r)
                            self._containers.setdefault(key, set()).add(r)
                            added = True
            for b in self.facts.bindings_in(scope):
                # `kl_loss /= n`: an augmented assignment reads its target, so it holds the result still
                if b.kind == BindingKind.AUGASSIGN and b.name in names and id(b) not in tainted:
                    if any(id(r) in tainted for r in self.places.reaching(b.name, b.site)):
                        tainted.add(id(b))
                        added = True
            if not added:
                break
        self._taint[key] = (tainted, names, escapes)
        return self._taint[key]

    def _returned(self, call: Call, tainted: Set[str]) -> bool:
        if isinstance(call.site.stmt, cst.Return):
            return True
        fn_scope = call.site.scope.function
        if fn_scope is None:
            return False
        fn = self.facts.function_of(fn_scope)
        if fn is None:
            return False
        for r, _ in self.facts.returns_of(fn):
            if r.value is not None and mentions(r.value, tainted):
                return True
        return False

    def _callers_train(self, fn: Function) -> bool:
        for c in self.values.callers(fn):
            if any(self.values.is_train_call(x) for x in self.helpers.calls_in_scope(c.site.scope)):
                return True
        return False

    # -- inference contexts -------------------------------------------------------------

    def inference_function(self, site: Site) -> Optional[Function]:
        """The innermost enclosing function named like an inference entry point."""
        for s in site.scope.chain():
            if s.kind == ScopeKind.FUNCTION:
                fn = self.facts.function_of(s)
                if fn is not None and INFERENCE_NAME.match(fn.name):
                    return fn
        return None

    def inference_context(self, mc: ModelCall) -> Optional[str]:
        """Why this forward runs for inference (None: it does not, or we can't tell)."""
        call = mc.call
        site = call.site
        if self.roles.excluded(site) or self._checked(call):
            return None
        if self.untrained(mc) or self.frozen(mc.model, site) or self.values.parameter_free(mc.model, site):
            return None  # a demo model, or one whose parameters (or lack of them) record no graph
        return self._inference_reason(mc)

    def script_work(self, mc: ModelCall) -> bool:
        """The forward is a script's own work: module-level code of a file that
        never trains runs a model with trained weights on real input, outside
        any loop, in a file that peeks at no batch, and the model is not one
        that stays on the CPU (an inference script runs it for every input it
        is started on)."""
        return (
            mc.call.site.loop is None
            and not self._peeks_a_batch
            and self._pretrained_script(mc)
            and not self.places.stays_on_cpu(mc.model, mc.call.site)
        )

    @cached_property
    def _peeks_a_batch(self) -> bool:
        """The file takes one batch of an iterable (`next(iter(loader))`): its
        single forwards look at a sample, they are not the script's work."""
        for c in self.facts.calls:
            if c.qualname == "next" or (isinstance(c.node.func, cst.Name) and c.node.func.value == "next"):
                arg = c.node.args[0].value if c.node.args else None
                if isinstance(arg, cst.Call) and isinstance(arg.func, cst.Name) and arg.func.value == "iter":
                    return True
        return False

    def _pretrained_script(self, mc: ModelCall) -> bool:
        """A script's own code (module level) runs a model with trained weights on
        real input and never trains: the forward is the script's work."""
        site = mc.call.site
        return (
            site.scope is self.facts.module_scope
            and not any(self.values.is_train_call(c) for c in self.facts.calls)
            and self.values.is_pretrained(mc.model, site)
            and not self._random_inputs(mc.call)
        )

    def over_data(self, site: Site) -> bool:
        """`site` runs for every batch of a pass over data that does not train:
        in a loop over a loader, dataset or batches (directly, or in a same-file
        function such a loop calls every iteration)."""
        loop = site.loop
        while loop is not None and loop.scope is site.scope:
            if self.loops.is_data_loop(loop) and not self.loops.trains(loop) and not self.loops.runs_once(loop):
                return True
            loop = loop.parent
        hot = self.loops.hot_context(site)
        return hot is not None and not hot.training and self.loops.is_data_loop(hot.loop)

    def frozen(self, model: cst.BaseExpression, site: Site) -> bool:
        """The model's parameters were frozen (`model.requires_grad_(False)` as a
        statement, or in the chain its name is bound to): its forward records
        no graph."""
        name = dotted_name(model)
        if name is None:
            return False
        for call in self._freezing_calls:
            inner: Optional[cst.BaseExpression] = call.receiver
            while isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute):
                inner = inner.func.value
            if dotted_name(inner) == name:
                return True
            if any(b.value is not None and contains(b.value, call.node) for b in self.facts.bindings_of(name)):
                return True
        return name in self._frozen_by_loops

    @cached_property
    def _freezing_calls(self) -> List[Call]:
        """The file's `x.requires_grad_(False)` calls."""
        out = []
        for call in self.facts.calls_with_method("requires_grad_"):
            flag = call.node.args[0].value if call.node.args else None
            if isinstance(flag, cst.Name) and flag.value == "False":
                out.append(call)
        return out

    @cached_property
    def _frozen_by_loops(self) -> Set[str]:
        """Names of models frozen by `for p in model.parameters(): p.requires_grad = False`."""
        out: Set[str] = set()
        for b in self.facts.bindings:
            if b.kind != BindingKind.FOR or b.index is not None or not isinstance(b.value, cst.Call):
                continue
            call = self.facts.call_for(b.value)
            name = dotted_name(call.receiver) if call is not None and call.method == "parameters" else None
            if name is None or name in out:
                continue
            for other in self.facts.bindings_of(f"{b.name}.requires_grad"):
                if (
                    other.site.loop is not None
                    and other.site.loop.node is b.site.loop.node  # type: ignore[union-attr]
                    and isinstance(other.value, cst.Name)
                    and other.value.value == "False"
                ):
                    out.add(name)
                    break
        return out

    def _inference_reason(self, mc: ModelCall) -> Optional[str]:
        call = mc.call
        site = call.site
        loop = self.roles.work_loop(site)
        inner = self.roles.work_loop(site, innermost=True)
        if inner is not None and self.loops.role(inner) == INFER and not self.loops.trains(inner):
            return "an inference loop over data" if self.loops.is_data_loop(inner) else "a generation loop"
        if (
            loop is not None
            and self.loops.trains(loop)
            and self.loops.periodic_guard(site, loop)
            and self.places.accelerator_in_play()
        ):
            return "a periodic evaluation inside the training loop"
        fn = self.inference_function(site)
        if (
            fn is not None
            and (self.roles.function_does_work(fn) or self.values.callers(fn))
            and not _lightning_step(self.facts, fn, self.values)
        ):
            return f"function `{fn.name}`"
        if self.after_eval(call) is not None and (loop is not None or self._function_runs(site)):
            return "after `.eval()`"
        if self._pretrained_script(mc):
            return "a pretrained model in a script that never trains"
        return None

    def untrained(self, mc: ModelCall) -> bool:
        """The model is built here with random weights, never given trained ones,
        and the forward runs before any training (in a file that never trains, or
        a shape check run before the training loop starts)."""
        if any(self.values.is_train_call(c) for c in self.facts.calls) and not self._before_training(mc.call.site):
            return False
        name = dotted_name(mc.model)
        if name is None or self.values.is_pretrained(mc.model, mc.call.site):
            return False
        bindings = self.values.bindings_for(name, mc.call.site)
        if not bindings:
            return False
        for b in bindings:
            if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.value is None or b.index is not None:
                return False
            inner = strip_methods(b.value, MODULE_BUILD_CHAIN)
            call = self.facts.call_for(inner) if isinstance(inner, cst.Call) else None
            if (
                call is None
                or not self._constructs_module(call)
                or call.method == "from_pretrained"
                or self.helpers.function(call) is not None
                or self.values.project_function(call)
            ):
                return False
        return True

    def _constructs_module(self, call: Call) -> bool:
        """A module construction: a known module class, or an imported class
        (`sm.EncoderRNN(...)`) whose instance the file uses as a model."""
        kind = self.values.call_kind(call)
        if kind == MODULE:
            return True
        name = dotted_name(call.node.func) or ""
        return kind is None and name.rsplit(".", 1)[-1][:1].isupper()

    def _before_training(self, site: Site) -> bool:
        """Module-level code (or a function called only from there) that runs
        before the first module-level statement that trains."""
        module = self.facts.module_scope
        first = self._first_module_training
        if first is None:
            return False
        if site.scope is module:
            # In a loop that also trains (validate, then train, each epoch): from the
            # second iteration on, the model is trained.
            loop = site.loop
            while loop is not None:
                if loop.contains(first):
                    return False
                loop = loop.parent
            return site.order < first
        fn = self.facts.function_of(site.scope) if site.scope.kind == ScopeKind.FUNCTION else None
        callers = self.values.callers(fn) if fn is not None else []
        return bool(callers) and all(c.site.scope is module and c.site.order < first for c in callers)

    @cached_property
    def _first_module_training(self) -> Optional[int]:
        """The order of the first module-level call that trains (itself or through
        a same-file helper)."""
        module = self.facts.module_scope
        trains = [
            c.site.order
            for c in self.facts.calls
            if c.site.scope is module
            and (
                self.values.is_train_call(c)
                or ((fn := self.helpers.function(c)) is not None and self.helpers.summary(fn).trains)
            )
        ]
        return min(trains) if trains else None

    def _checked(self, call: Call) -> bool:
        """The forward's result is checked, not used: an `assert` or a
        `torch.testing.assert_*` call (a correctness test)."""
        if isinstance(call.site.stmt, cst.Assert):
            return True
        parent = call.site.parent
        holder = self.facts.call_of_arg(parent) if isinstance(parent, cst.Arg) else None
        return holder is not None and (
            (holder.qualname or "").startswith("torch.testing.") or (holder.method or "").startswith("assert")
        )

    def _function_runs(self, site: Site) -> bool:
        """Module-level code, or a function that is called somewhere in the file."""
        fn_scope = site.scope.function
        if fn_scope is None:
            return True
        fn = self.facts.function_of(fn_scope)
        return fn is not None and (bool(self.values.callers(fn)) or self.roles.function_does_work(fn))

    def _random_inputs(self, call: Call) -> bool:
        """Every tensor input comes straight from a random/constant factory: a demo."""
        args = [a.value for a in call.node.args]
        if not args:
            return False
        for arg in args:
            expr = arg
            if isinstance(arg, cst.Name):
                bs = self.facts.visible_bindings(arg.value, call.site.scope)
                if len(bs) != 1 or bs[0].value is None:
                    return False
                expr = bs[0].value
                if (
                    bs[0].index is not None
                    and isinstance(expr, (cst.Tuple, cst.List))
                    and bs[0].index < len(expr.elements)
                ):
                    expr = expr.elements[bs[0].index].value  # `x, y = torch.randn(...), torch.randn(...)`
            if not (
                isinstance(expr, cst.Call)
                and (self.facts.qualname(expr.func) or "").startswith(
                    ("torch.rand", "torch.zeros", "torch.ones", "torch.empty", "torch.full")
                )
            ):
                return False
        return True


def _lightning_step(facts: Facts, fn: Function, values: Values) -> bool:
    """Lightning's `*_step` hooks run without gradients under the trainer (also
    in a class whose LightningModule base is another project class)."""
    parent = fn.scope.parent
    if parent is None or parent.kind != ScopeKind.CLASS or not fn.name.endswith("_step"):
        return False
    info = facts.classes.get(parent.name)
    return info is not None and any(
        (facts.qualname(b) or "").startswith(("lightning", "pytorch_lightning")) or _project_lightning(facts, b, values)
        for b in info.bases
    )


def _project_lightning(facts: Facts, base: cst.BaseExpression, values: Values) -> bool:
    """A base class the project index knows to be a LightningModule."""
    if values.project is None:
        return False
    q = facts.qualname(base)
    if q is None and isinstance(base, cst.Name) and _module_level(facts, base.value):
        q = values.project.local(base.value)
    return q is not None and values.project_class(q) is ClassKind.LIGHTNING_MODULE


def _module_level(facts: Facts, name: str) -> bool:
    """Every binding of `name` in the file is at module level (a name the
    project index knows by this file's summary)."""
    bindings = facts.bindings_of(name)
    return bool(bindings) and all(b.site.scope.kind == ScopeKind.MODULE for b in bindings)


def _stmt_targets(stmt: Optional[cst.CSTNode]) -> List[str]:
    """Names (dotted for attributes, the root for subscripts) a statement binds."""
    targets: List[cst.BaseExpression] = []
    if isinstance(stmt, cst.Assign):
        targets = [t.target for t in stmt.targets]
    elif isinstance(stmt, (cst.AnnAssign, cst.AugAssign, cst.For)):
        targets = [stmt.target]
    out: List[str] = []
    stack = list(targets)
    while stack:
        t = stack.pop()
        if isinstance(t, (cst.Tuple, cst.List)):
            stack.extend(e.value for e in t.elements)
        elif isinstance(t, cst.StarredElement):
            stack.append(t.value)
        elif isinstance(t, cst.Subscript):
            r = root_name(t)
            if r:
                out.append(r)
        else:
            n = dotted_name(t)
            if n:
                out.append(n)
    return out


def _stores_subscript(stmt: Optional[cst.CSTNode]) -> bool:
    """`d[k] = value`: a store into a container."""
    if isinstance(stmt, cst.Assign):
        return any(isinstance(t.target, cst.Subscript) for t in stmt.targets)
    return isinstance(stmt, (cst.AugAssign, cst.AnnAssign)) and isinstance(stmt.target, cst.Subscript)


def _names_in(expr: Optional[cst.CSTNode]) -> List[str]:
    out: List[str] = []
    stack = [expr] if expr is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            out.append(node.value)
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)  # `x.attr`: `x`, not a variable named `attr`
        else:
            stack.extend(children(node))
    return out


def _same_loop(a: Site, b: Site) -> bool:
    """`a` is in a loop that also holds `b` (so it runs after `b` on the next iteration)."""
    loop: Optional[Loop] = b.loop
    while loop is not None and loop.scope is b.scope:
        if loop.contains(a.order):
            return True
        loop = loop.parent
    return False
