"""Autograd graphs kept across iterations: which values carry a graph, which
are accumulated from one iteration to the next (`total += loss`,
`losses.append(loss)`), and whether an accumulator later reaches
`.backward()` (gradient accumulation, which needs the graph) or only code
that reads its value (logging, returning it)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Dict, Hashable, Iterable, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Facts, Loop, Site, dotted_name
from torchlint.analysis.grad import Grad
from torchlint.analysis.helpers import root_name
from torchlint.analysis.loops import Loops
from torchlint.analysis.places import Places, backpropagated
from torchlint.analysis.values import Values
from torchlint.analysis.vocabulary import GRAD_USERS

MAX_DEPTH = 5
# Methods whose result has no graph (or is not a tensor).
_DETACHING = frozenset({"item", "detach", "detach_", "tolist", "numpy", "argmax", "argmin", "size", "dim", "numel"})
# Attributes that leave the graph (`.data`) or are not tensors.
_NOT_GRAPH_ATTRS = frozenset({"data", "grad", "shape", "dtype", "device", "requires_grad", "ndim", "is_cuda"})
# Builtins that turn a tensor into a Python value.
_TO_HOST = frozenset({"float", "int", "bool", "len", "str", "repr", "round"})
# Readers that only look at a value: printing, formatting, logging.
_READERS = frozenset({"print", "float", "int", "str", "repr", "round", "len", "format"})
# Builtins whose result holds what they were given: follow it.
_PASS_ON = frozenset({"sum", "max", "min", "list", "tuple", "sorted", "reversed"})
_LOG_METHODS = frozenset(
    {"info", "debug", "warning", "log", "add_scalar", "add_scalars", "set_description", "set_postfix", "write"}
)


class Reach(enum.Enum):
    """Where an accumulator's value goes after it is accumulated."""

    READ = "read"  # only printed, formatted, logged, converted to a number or returned
    BACKWARD = "backward"  # it (or a value computed from it) reaches `.backward()`/`autograd.grad`
    UNKNOWN = "unknown"  # handed to code we cannot see, stored on an object, put in a container


@dataclass(frozen=True)
class Accumulation:
    """`name` collects a value across the iterations of `loop` at `site`."""

    name: str
    value: cst.BaseExpression  # what is added or appended
    site: Site
    loop: Loop
    node: cst.CSTNode  # the `+=` statement or the `.append(...)` call


class Graphs:
    def __init__(self, facts: Facts, values: Values, places: Places, loops: Loops, grad: Grad) -> None:
        self.facts = facts
        self.values = values
        self.places = places
        self.loops = loops
        self.grad = grad
        self._memo: Dict[Tuple[Hashable, ...], bool] = {}

    # -- values with a graph -----------------------------------------------------------

    def carries_graph(self, expr: Optional[cst.BaseExpression], site: Site, depth: int = 0) -> bool:
        """`expr` holds a tensor with an autograd graph at `site`: a model's output
        or a loss computed from one with gradients on, a name `.backward()` is
        called on in the same loop, or arithmetic, indexing and tensor methods
        of those. False for detached values (`.item()`, `.detach()`, `.data`) and
        for values we cannot follow."""
        if expr is None or depth > MAX_DEPTH:
            return False
        if isinstance(expr, cst.Name):
            if self._backwarded(expr.value, site):
                return True
            found = self.places.single_value(expr.value, site)
            return found is not None and self.carries_graph(found[0], found[1], depth + 1)
        if isinstance(expr, cst.BinaryOperation):
            return self.carries_graph(expr.left, site, depth + 1) or self.carries_graph(expr.right, site, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.carries_graph(expr.expression, site, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.carries_graph(expr.value, site, depth + 1)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _NOT_GRAPH_ATTRS:
                return False
            return self.carries_graph(expr.value, site, depth + 1)
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            return call is not None and self._call_carries(call, depth)
        return False

    def _call_carries(self, call: Call, depth: int) -> bool:
        if self.grad.guarded(call.site):
            return False
        func = call.node.func
        if isinstance(func, cst.Name) and func.value in _TO_HOST and not self.facts.bindings_of(func.value):
            return False
        if self.values.model_call(call) is not None:
            loop = self.loops.step_loop(call.site)
            return loop is not None and self.loops.trains(loop)  # the model is being trained here
        if call.method in _DETACHING:
            return False
        if self.values.is_loss_call(call):
            return any(self.carries_graph(arg.value, call.site, depth + 1) for arg in call.node.args)
        q = call.qualname or ""
        if q.startswith("torch."):
            return any(self.carries_graph(arg.value, call.site, depth + 1) for arg in call.node.args)
        if call.receiver is not None and call.qualname is None:
            return self.carries_graph(call.receiver, call.site, depth + 1)  # `loss.mean()`, `out.float()`
        return False

    def _backwarded(self, name: str, site: Site) -> bool:
        """`name.backward()` in the loop around `site` (same scope): its value has a graph."""
        loop = site.loop
        if loop is None:
            return False
        for call in self.loops.calls_in(loop):
            target = backpropagated(call)
            if isinstance(target, cst.Name) and target.value == name:
                return True
        return False

    # -- accumulations across iterations -------------------------------------------------

    def accumulations(self) -> List[Accumulation]:
        """`total += v`, `total = total + v` and `items.append(v)` in a loop, where
        the name is bound before the loop in the same scope and not bound again
        in it (so it keeps every iteration's value)."""
        out: List[Accumulation] = []
        for stmt, site in self.facts.statements:
            loop = site.loop
            if loop is None or loop.scope is not site.scope:
                continue
            found = _accumulated(stmt, self.facts, site)
            if found is None:
                continue
            name, value, node = found
            if self.kept_across(name, loop, site) and not self._trimmed_in(name, loop):
                out.append(Accumulation(name, value, site, loop, node))
        return out

    def _trimmed_in(self, name: str, loop: Loop) -> bool:
        """The loop also takes items out of `name` (`del window[0]`,
        `window.pop(0)`, `window.clear()`): a bounded window, it does not keep
        every iteration's value."""
        for stmt, site in self.facts.statements:
            if site.scope is loop.scope and loop.contains(site.order) and isinstance(stmt, cst.Del):
                if root_name(stmt.target) == name:
                    return True
        for call in self.facts.calls:
            if (
                call.method in _TRIMMING_METHODS
                and call.site.scope is loop.scope
                and loop.contains(call.site.order)
                and call.receiver is not None
                and dotted_name(call.receiver) == name
            ):
                return True
        return False

    def kept_across(self, name: str, loop: Loop, site: Site) -> bool:
        """`name` is bound before `loop` (same scope) and only added to inside it."""
        bindings = self.facts.local_bindings(name, site.scope)
        if any(b.kind in (BindingKind.GLOBAL, BindingKind.NONLOCAL) for b in bindings):
            return False
        if not any(b.site.order < loop.order for b in bindings):
            return False
        return all(not loop.contains(b.site.order) or _accumulates(b) for b in bindings)

    # -- where an accumulator goes ------------------------------------------------------

    def reach(self, acc: Accumulation) -> Reach:
        """Where the accumulator's value goes (in its scope, after the
        accumulation): BACKWARD wins over UNKNOWN, which wins over READ."""
        names: Set[str] = {acc.name}
        scope = acc.site.scope
        result = Reach.READ
        frontier = [acc.name]
        seen: Set[str] = set()
        while frontier:
            name = frontier.pop()
            if name in seen:
                continue
            seen.add(name)
            for use in self.facts.local_uses(name, scope):
                if use.site.scope is not scope:
                    result = _worse(result, Reach.UNKNOWN)  # read in a nested function
                    continue
                if use.site.stmt is acc.site.stmt:
                    continue
                verdict, derived = self._use(use.node, use.site, names)
                result = _worse(result, verdict)
                if result is Reach.BACKWARD:
                    return result
                for d in derived:
                    if d not in names:
                        names.add(d)
                        frontier.append(d)
        return result

    def _use(self, node: cst.CSTNode, site: Site, names: Set[str]) -> Tuple[Reach, Iterable[str]]:
        """What one read of an accumulator (or a value computed from it) does:
        (reach, names it flows into)."""
        expr: cst.CSTNode = node
        while True:
            parent = self.facts.parent_of(expr)
            if parent is None:
                return Reach.UNKNOWN, ()
            if isinstance(parent, cst.Attribute) and parent.value is expr:
                grand = self.facts.parent_of(parent)
                if isinstance(grand, cst.Call) and grand.func is parent:
                    method = parent.attr.value
                    if method == "backward":
                        return Reach.BACKWARD, ()
                    if method in ("item", "tolist", "numpy") or method == "detach":
                        return Reach.READ, ()
                    if method in ("append", "extend", "insert") and isinstance(expr, cst.Name):
                        return Reach.READ, ()  # the accumulation itself (`losses.append(v)`)
                    expr = grand  # `total.mean()`, `total.cpu()`: follow the result
                    continue
                if parent.attr.value in _NOT_GRAPH_ATTRS:
                    return Reach.READ, ()
                expr = parent
                continue
            if isinstance(
                parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Subscript, cst.SubscriptElement, cst.Element)
            ) or (isinstance(parent, cst.Tuple) and not isinstance(self.facts.parent_of(parent), cst.For)):
                expr = parent
                continue
            if isinstance(parent, cst.Index):
                return Reach.READ, ()  # used as an index
            if isinstance(parent, (cst.FormattedStringExpression, cst.Comparison, cst.ComparisonTarget)):
                return Reach.READ, ()
            if isinstance(parent, cst.Arg):
                call = self.facts.call_of_arg(parent)
                if call is None:
                    return Reach.UNKNOWN, ()
                return self._argument(call, site, names)
            if isinstance(parent, (cst.Return, cst.Expr)):
                return Reach.READ, ()
            if isinstance(parent, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = _assigned_names(parent)
                if targets is None:
                    return Reach.UNKNOWN, ()  # stored on an object or in a container
                return Reach.READ, targets
            if isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.BooleanOperation, cst.AssignTarget)):
                return Reach.READ, ()
            return Reach.UNKNOWN, ()

    def _argument(self, call: Call, site: Site, names: Set[str]) -> Tuple[Reach, Iterable[str]]:
        if call.qualname in GRAD_USERS or "backward" in (dotted_name(call.node.func) or "").lower():
            return Reach.BACKWARD, ()
        func = call.node.func
        if isinstance(func, cst.Name) and not self.facts.bindings_of(func.value):
            if func.value in _READERS:
                return Reach.READ, ()
            if func.value in _PASS_ON:
                return self._use(call.node, site, names)
        if call.method in _LOG_METHODS or (call.qualname or "").startswith(("logging.", "wandb.")):
            return Reach.READ, ()
        if (call.qualname or "").startswith(("torch.", "numpy.", "math.", "statistics.")):
            # `torch.stack(losses)`: follow the result
            return self._use(call.node, site, names)
        return Reach.UNKNOWN, ()


def _worse(a: Reach, b: Reach) -> Reach:
    order = (Reach.READ, Reach.UNKNOWN, Reach.BACKWARD)
    return a if order.index(a) >= order.index(b) else b


def _assigned_names(stmt: cst.CSTNode) -> Optional[Set[str]]:
    """Plain names an assignment binds; None when it stores elsewhere."""
    if isinstance(stmt, cst.Assign):
        targets = [t.target for t in stmt.targets]
    elif isinstance(stmt, (cst.AugAssign, cst.AnnAssign)):
        targets = [stmt.target]
    else:
        return None
    out: Set[str] = set()
    for t in targets:
        if isinstance(t, cst.Name):
            out.add(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)) and all(isinstance(e.value, cst.Name) for e in t.elements):
            out.update(e.value.value for e in t.elements if isinstance(e.value, cst.Name))
        else:
            return None
    return out


def _accumulated(stmt: cst.CSTNode, facts: Facts, site: Site) -> Optional[Tuple[str, cst.BaseExpression, cst.CSTNode]]:
    """(name, value, node) for `name += value`, `name = name + value` and
    `name.append(value)`; None otherwise."""
    if isinstance(stmt, cst.AugAssign) and isinstance(stmt.operator, cst.AddAssign):
        if isinstance(stmt.target, cst.Name):
            return stmt.target.value, stmt.value, stmt
        return None
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name):
        name = stmt.targets[0].target.value
        value = stmt.value
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            if isinstance(value.left, cst.Name) and value.left.value == name:
                return name, value.right, stmt
        return None
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
        call = facts.call_for(stmt.value)
        if (
            call is not None
            and call.method == "append"
            and isinstance(call.receiver, cst.Name)
            and len(call.node.args) == 1
            and call.node.args[0].keyword is None
            and not call.node.args[0].star
        ):
            return call.receiver.value, call.node.args[0].value, call.node
    return None


_TRIMMING_METHODS = frozenset({"pop", "popleft", "clear", "remove"})


def _accumulates(b: Binding) -> bool:
    """A binding that adds to the name's value instead of replacing it."""
    if b.kind == BindingKind.AUGASSIGN:
        stmt = b.site.stmt
        return isinstance(stmt, cst.AugAssign) and isinstance(stmt.operator, cst.AddAssign)
    if (
        b.kind == BindingKind.ASSIGN
        and isinstance(b.value, cst.BinaryOperation)
        and isinstance(b.value.operator, cst.Add)
    ):
        left = b.value.left
        return isinstance(left, cst.Name) and left.value == b.name
    return False
