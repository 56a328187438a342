"""Same-file helpers, summarised once: which arguments a function moves to a
device or reads on the host, whether it trains, runs a model, switches one
to eval mode, or builds one. A helper from another module stays unknown (rules stay silent
about what it does)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call, Facts, Function, Part, Scope, ScopeKind, dotted_name
from torchlint.analysis.knowledge import HOST_CASTS, HOST_VALUE_READS, SCALAR_LOGGERS, is_move_call
from torchlint.analysis.value_kinds import MODULE
from torchlint.analysis.values import Values
from torchlint.analysis.vocabulary import PLACING_NAME
from torchlint.analysis.walk import contains

MAX_DEPTH = 3


@dataclass(frozen=True)
class Summary:
    moves: FrozenSet[str] = frozenset()  # parameters moved to a device (or handed to something that places them)
    trains: bool = False  # calls .backward(), an optimizer step or torch.autograd.grad (itself or a helper)
    forwards: bool = False  # runs a model forward (itself or a helper)
    evals: bool = False  # calls `.eval()` on something
    returns_module: bool = False
    # parameters read on the host every call (`.item()`, `.tolist()` of the parameter or
    # a value computed from it), itself or in a helper: (parameter, what reads it)
    syncs: Tuple[Tuple[str, str], ...] = ()


def root_name(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """`x` for `x`, `x[0]`, `x.y`, `x.items()`, `x.to(d)`: the name at the bottom."""
    while expr is not None:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Attribute):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        else:
            return None
    return None


class Helpers:
    def __init__(self, facts: Facts, values: Values) -> None:
        self.facts = facts
        self.values = values
        self._summaries: Dict[int, Summary] = {}
        self._calls_in: Optional[Dict[int, List[Call]]] = None
        self._calls_by_scope: Optional[Dict[int, List[Call]]] = None

    def function(self, call: Call) -> Optional[Function]:
        return self.values.local_function(call)

    def calls_in(self, fn: Function) -> List[Call]:
        """Calls in `fn`'s body, nested lambdas and comprehensions included,
        nested functions excluded."""
        if self._calls_in is None:
            index: Dict[int, List[Call]] = {}
            for call in self.facts.calls:
                for scope in call.site.scope.chain():
                    index.setdefault(id(scope.node), []).append(call)
                    if scope.kind == ScopeKind.FUNCTION:
                        break
            self._calls_in = index
        return self._calls_in.get(id(fn.scope.node), [])

    def calls_in_scope(self, scope: Scope) -> List[Call]:
        """Calls whose own scope is `scope`."""
        if self._calls_by_scope is None:
            index: Dict[int, List[Call]] = {}
            for call in self.facts.calls:
                index.setdefault(id(call.site.scope.node), []).append(call)
            self._calls_by_scope = index
        return self._calls_by_scope.get(id(scope.node), [])

    def summary(self, fn: Function, depth: int = 0) -> Summary:
        key = id(fn.node)
        if key in self._summaries:
            return self._summaries[key]
        self._summaries[key] = Summary()  # cycle guard: a recursive call adds nothing
        if depth > MAX_DEPTH:
            return self._summaries[key]
        params = set(fn.params)
        derived = self._derived(fn, params)
        computed = self._computed(fn, derived)
        moves: Set[str] = set()
        syncs: Dict[str, str] = {}
        trains = forwards = evals = False
        for call in self.calls_in(fn):
            if is_move_call(call):
                root = root_name(call.receiver)
                if root in derived:
                    moves.add(derived[root])
            read = _host_read(call, self.facts)
            if read is not None and not self._occasional(call, fn):
                for name in _operand_roots(read[0]):
                    if name in computed:
                        syncs.setdefault(computed[name], read[1])
                        break
            if self.values.is_train_call(call):
                trains = True
            if call.method == "eval" and not call.node.args:
                evals = True
            if self.values.model_call(call) is not None:
                forwards = True
            inner = self.function(call)
            if inner is not None and inner is not fn:
                s = self.summary(inner, depth + 1)
                trains, forwards, evals = trains or s.trains, forwards or s.forwards, evals or s.evals
                for p in s.moves:
                    arg = self.values.argument_for(call, inner, p)
                    root = root_name(arg)
                    if root in derived:
                        moves.add(derived[root])
                for p, what in s.syncs:
                    root = root_name(self.values.argument_for(call, inner, p))
                    if root in derived and not self._occasional(call, fn):
                        syncs.setdefault(derived[root], what)
            elif inner is None and _places_by_name(call):
                for a in call.node.args:
                    root = root_name(a.value)
                    if root in derived:
                        moves.add(derived[root])
        returns = self.facts.returns_of(fn)
        returns_module = bool(returns) and all(
            r.value is not None and self.values.expr_kind(r.value, s) == MODULE for r, s in returns
        )
        result = Summary(frozenset(moves), trains, forwards, evals, returns_module, tuple(sorted(syncs.items())))
        self._summaries[key] = result
        return result

    @staticmethod
    def _occasional(call: Call, fn: Function) -> bool:
        """`call` runs only on some calls of `fn`: under an `if`, or in a `try`
        handler (a read on one branch is not a read every call). The branch of
        `if isinstance(val, torch.Tensor):` that a tensor takes runs on every
        call handed one."""
        params = set(fn.params)
        for i in call.site.ifs:
            taken = _tensor_branch(i.test, params)
            in_body = contains(i.body, call.node)
            if taken is None or taken is not in_body:
                return True
        return any(part is not Part.BODY for _, part in call.site.region)

    def _derived(self, fn: Function, params: Set[str]) -> Dict[str, str]:
        """Names in `fn` that hold a parameter or a part of it (`x, y = batch`,
        `x = batch[0]`, `for k, v in batch.items()`): name -> the parameter."""
        derived = {p: p for p in params}
        bindings = [
            b
            for b in self.facts.bindings_under(fn.scope)
            if b.value is not None
            and b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN, BindingKind.FOR, BindingKind.COMPREHENSION)
        ]
        for _ in range(MAX_DEPTH):
            changed = False
            for b in bindings:
                if b.name in derived or "." in b.name:
                    continue
                value = b.value
                if b.index is not None and isinstance(value, (cst.Tuple, cst.List)):
                    # `x_real, y_real = x.view(-1, d), torch.ones(n, 1)`: element by element
                    if b.index >= len(value.elements):
                        continue
                    value = value.elements[b.index].value
                root = root_name(value)
                if root in derived:
                    derived[b.name] = derived[root]
                    changed = True
            if not changed:
                break
        return derived

    def _computed(self, fn: Function, derived: Dict[str, str]) -> Dict[str, str]:
        """`derived`, plus names computed from those by arithmetic or a comparison
        (`hit = pred == y`, `err = (a - b).abs()`): name -> the parameter. Only for
        host reads: a value computed from an argument is not the argument, so a
        move of it moves nothing."""
        computed = dict(derived)
        bindings = [
            b
            for b in self.facts.bindings_under(fn.scope)
            if b.value is not None
            and b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            and b.index is None
            and "." not in b.name
        ]
        for _ in range(MAX_DEPTH):
            changed = False
            for b in bindings:
                if b.name in computed or b.value is None:
                    continue
                for name in _operand_roots(b.value):
                    if name in computed:
                        computed[b.name] = computed[name]
                        changed = True
                        break
            if not changed:
                break
        return computed


_HOST_READS = HOST_VALUE_READS  # item, tolist
_HOST_CASTS = HOST_CASTS  # float, int, bool


def logged_value(call: Call, facts: Facts) -> Optional[cst.BaseExpression]:
    """The value a scalar logger reads on the host (`writer.add_scalar("loss", loss, step)`:
    `loss`), or None when `call` is no such call: also when a class of the file
    defines a method of that name (the receiver may be the project's own logger,
    which may keep the tensor) or an argument is starred (can't tell which)."""
    where = SCALAR_LOGGERS.get(call.method or "")
    if where is None or call.receiver is None or any(a.star for a in call.node.args):
        return None
    if any(facts.function_named_in_node(call.method or "", c.node) for c in facts.classes.values()):
        return None
    position, keyword = where
    arg = call.keyword(keyword) or (call.positional[position] if len(call.positional) > position else None)
    return arg.value if arg is not None else None


def _host_read(call: Call, facts: Facts) -> Optional[Tuple[cst.BaseExpression, str]]:
    """(what is read, how) for `t.item()`, `t.tolist()` and `float(t)` / `int(t)` /
    `bool(t)` (the builtins, not rebound), and the value of a scalar logger."""
    if call.method in _HOST_READS and call.receiver is not None and not call.node.args:
        return call.receiver, f"`.{call.method}()`"
    logged = logged_value(call, facts)
    if logged is not None:
        return logged, f"`{call.method}()` of a tensor"
    func = call.node.func
    if (
        isinstance(func, cst.Name)
        and func.value in _HOST_CASTS
        and not facts.bindings_of(func.value)
        and len(call.node.args) == 1
        and not call.node.args[0].star
        and call.node.args[0].keyword is None
    ):
        return call.node.args[0].value, f"`{func.value}()` of a tensor"
    return None


def _tensor_branch(test: cst.BaseExpression, params: Set[str]) -> Optional[bool]:
    """For `if isinstance(val, torch.Tensor):` on a parameter: True (its body is
    what a call handed a tensor runs), False for `if not isinstance(...)`; None
    for any other test. (The project summaries ask the same of another file.)"""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _tensor_branch(test.expression, params)
        return None if inner is None else not inner
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance":
        args = test.args
        if (
            len(args) == 2
            and isinstance(args[0].value, cst.Name)
            and args[0].value.value in params
            and (dotted_name(args[1].value) or "").rsplit(".", 1)[-1] == "Tensor"
        ):
            return True
    return None


def _operand_roots(expr: cst.BaseExpression) -> List[str]:
    """The names at the bottom of an expression's tensor operands: `x` for
    `x.sum()`, `x[0]`; `a`, `b` for `(a == b).float()`, `a - b`, `-a`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        expr = expr.func.value
    if isinstance(expr, cst.BinaryOperation):
        return _operand_roots(expr.left) + _operand_roots(expr.right)
    if isinstance(expr, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
            return []
        out = _operand_roots(expr.left)
        for c in expr.comparisons:
            out += _operand_roots(c.comparator)
        return out
    if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
        return _operand_roots(expr.expression)
    root = root_name(expr)
    return [root] if root is not None else []


def _places_by_name(call: Call) -> bool:
    """`to_device(batch)`, `move_to_cuda(x)`, `accelerator.prepare(...)`: a callee
    whose name says it places what it is handed."""
    name = dotted_name(call.node.func) or ""
    return bool(PLACING_NAME.search(name.rsplit(".", 1)[-1]))
