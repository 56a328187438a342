"""Loops and what they do: which iterate data, which train, which run a model
once per batch and which once per epoch, where code runs every iteration
(directly or in a same-file helper the loop calls), and periodic guards
(`if step % N == 0:`)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call, Facts, Function, Loop, Part, ScopeKind, Site, dotted_name
from torchlint.analysis.helpers import Helpers
from torchlint.analysis.value_kinds import DATASET, LOADER, ForwardMethod
from torchlint.analysis.values import Values
from torchlint.analysis.vocabulary import CLOCKS, INFERENCE_NAME, ITER_WRAPPERS, LOADER_NAME, TOKEN_PICKS
from torchlint.analysis.walk import children, contains, descendants, mentions


class LoopRole(enum.Enum):
    """What a loop does with a model (`Loops.role`)."""

    TRAIN = "train"  # it trains
    INFER = "infer"  # it runs a model over data without training


TRAIN, INFER = LoopRole.TRAIN, LoopRole.INFER
# Builtins that take a loader without yielding its batches.
_NOT_WRAPPERS = frozenset(
    {"len", "range", "print", "isinstance", "id", "str", "repr", "type", "hash", "sorted", "reversed"}
)
MAX_HELPER_DEPTH = 3


@dataclass(frozen=True)
class HotContext:
    """Why a site runs every iteration of a per-batch loop."""

    loop: Loop  # the per-batch (or per-step) loop that drives it
    training: bool  # that loop trains
    via: Optional[str] = None  # the helper function name, when reached through a call
    call: Optional[Call] = None  # that call, in the loop


def _has_modulo(expr: cst.CSTNode) -> bool:
    return any(
        isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo) for node in descendants(expr)
    )


def _leaves(block: cst.BaseSuite) -> bool:
    """The block ends with `return`, `continue`, `break` or `raise`."""
    if _exits(block):
        return True
    last = block.body[-1] if block.body else None
    smalls = last.body if isinstance(last, cst.SimpleStatementLine) else (last,) if last is not None else ()
    return any(isinstance(s, cst.Continue) for s in smalls)


def _exits(block: cst.BaseSuite) -> bool:
    """The block ends by leaving the loop or the function (`break`, `return`, `raise`)."""
    body = block.body
    if not body:
        return False
    last = body[-1]
    smalls = (
        last.body
        if isinstance(last, cst.SimpleStatementLine)
        else (last,)
        if isinstance(block, cst.SimpleStatementSuite)
        else ()
    )
    return any(isinstance(s, (cst.Break, cst.Return, cst.Raise)) for s in smalls)


_FEW = 10  # `if shown < 5: shown += 1; print(...)`: a branch bounded to a few runs


def _bounded_counter(node: cst.If) -> bool:
    """`if shown < 5:` (also `if bad and shown < 5:`) whose body increments
    `shown`: runs a few times in all."""
    tests = [node.test]
    counter = None
    while tests:
        test = tests.pop()
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            tests += [test.left, test.right]
        elif (
            isinstance(test, cst.Comparison)
            and isinstance(test.left, cst.Name)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual))
            and isinstance(test.comparisons[0].comparator, cst.Integer)
            and int(test.comparisons[0].comparator.evaluated_value) <= _FEW
        ):
            counter = test.left.value
    if counter is None:
        return False
    stack: List[cst.CSTNode] = [node.body]
    while stack:
        current = stack.pop()
        if (
            isinstance(current, cst.AugAssign)
            and isinstance(current.target, cst.Name)
            and current.target.value == counter
        ):
            return True
        stack.extend(children(current))
    return False


class Loops:
    def __init__(self, facts: Facts, values: Values, helpers: Helpers) -> None:
        self.facts = facts
        self.values = values
        self.helpers = helpers
        self._calls_by_loop: Optional[Dict[int, List[Call]]] = None
        self._memo: Dict[Tuple[str, int], bool] = {}
        self._roles: Dict[int, Optional[LoopRole]] = {}
        self._helper: Dict[int, Optional[HotContext]] = {}
        self._loop_of_node = {id(loop.node): loop for loop in facts.loops}

    def loop_for(self, node: cst.CSTNode) -> Optional[Loop]:
        return self._loop_of_node.get(id(node))

    # -- what a loop holds ---------------------------------------------------------------

    def calls_in(self, loop: Loop) -> List[Call]:
        """Calls anywhere in the loop (nested loops included), in its own scope."""
        if self._calls_by_loop is None:
            index: Dict[int, List[Call]] = {}
            for call in self.facts.calls:
                current = call.site.loop
                while current is not None:
                    if current.scope is call.site.scope:
                        index.setdefault(id(current.node), []).append(call)
                    current = current.parent
            self._calls_by_loop = index
        return self._calls_by_loop.get(id(loop.node), [])

    def own_calls(self, loop: Loop) -> List[Call]:
        """Calls in the loop's own body, not in a nested loop."""
        return [c for c in self.calls_in(loop) if c.site.loop is loop]

    def _cached(self, key: Tuple[str, int], compute: Callable[[], bool]) -> bool:
        if key not in self._memo:
            self._memo[key] = False
            self._memo[key] = compute()
        return self._memo[key]

    def _call_trains(self, call: Call) -> bool:
        if self.values.is_train_call(call):
            return True
        fn = self.helpers.function(call)
        return fn is not None and self.helpers.summary(fn).trains

    def _call_forwards(self, call: Call) -> bool:
        mc = self.values.model_call(call)
        if mc is not None:
            return mc.method is not ForwardMethod.GENERATE  # one `generate()` per sample is not a per-batch step
        fn = self.helpers.function(call)
        return fn is not None and self.helpers.summary(fn).forwards

    def trains(self, loop: Loop) -> bool:
        """The loop (nested loops and same-file helpers included) trains."""
        return self._cached(("trains", id(loop.node)), lambda: any(self._call_trains(c) for c in self.calls_in(loop)))

    def forwards(self, loop: Loop) -> bool:
        return self._cached(("fwd", id(loop.node)), lambda: any(self._call_forwards(c) for c in self.calls_in(loop)))

    def is_data_loop(self, loop: Loop) -> bool:
        """A `for` over a DataLoader, a dataset or batches (through
        enumerate/tqdm/zip), manual batching `range(0, len(X), bs)`, or a
        `while` that draws batches with `next(...)`."""
        return self._cached(("data", id(loop.node)), lambda: self._data_loop(loop))

    def _data_loop(self, loop: Loop) -> bool:
        node = loop.node
        if isinstance(node, cst.While):
            return any(isinstance(c.node.func, cst.Name) and c.node.func.value == "next" for c in self.own_calls(loop))
        site = self.facts.site_of_statement(node)
        return site is not None and self.is_data_iterable(node.iter, site)

    def iterates_timer(self, loop: Loop) -> bool:
        """The loop iterates what a logger's method yields and times
        (`for x, y in metric_logger.log_every(loader, 10):`, whose `log_every` reads
        a clock around each step it yields; through `enumerate`/`tqdm`): a method
        of a same-file class, or of another file's (the project index)."""
        expr = loop.iter
        while isinstance(expr, cst.Call) and expr.args and (dotted_name(expr.func) or "") in ITER_WRAPPERS:
            expr = expr.args[0].value
        call = self.facts.call_for(expr) if isinstance(expr, cst.Call) else None
        if call is None or call.method is None or not isinstance(call.receiver, cst.Name):
            return False
        owner = call.receiver.value
        cls = self.values.instance_class(owner, call.site)
        if cls is not None:
            method = self.facts.function_named_in_node(call.method, cls)
            return method is not None and any(c.qualname in CLOCKS for c in self.helpers.calls_in(method))
        qualname = self.values.instance_qualname(owner, call.site)
        project = self.values.project
        return qualname is not None and project is not None and project.method_times(qualname, call.method)

    def is_data_iterable(self, expr: Optional[cst.BaseExpression], site: Site, depth: int = 0) -> bool:
        if expr is None or depth > 3:
            return False
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            if call is None:
                return False
            kind = self.values.call_kind(call)
            if kind in (LOADER, DATASET):
                return True
            name = dotted_name(expr.func) or ""
            if (
                name in ITER_WRAPPERS
                or (call.qualname or "") in ITER_WRAPPERS
                or (call.qualname or "").startswith("tqdm")
                or name == "zip"
            ):
                return any(self.is_data_iterable(a.value, site, depth + 1) for a in call.positional)
            if name == "range" and len(call.positional) == 3:
                stop = call.positional[1].value
                return isinstance(stop, cst.Call) and dotted_name(stop.func) == "len"  # range(0, len(X), bs)
            if name == "range" and len(call.positional) == 1:
                bound = dotted_name(call.positional[0].value) or ""
                return bool(re.search(r"batch", bound.rsplit(".", 1)[-1], re.I))  # range(num_batches)
            if name == "iter" and call.positional:
                return self.is_data_iterable(call.positional[0].value, site, depth + 1)
            # `datamodule.test_dataloader()`, `get_loader(...)`
            if LOADER_NAME.search(name.rsplit(".", 1)[-1]):
                return True
            # A wrapper handed the loader yields its batches: `metric_logger.log_every(loader, 10)`,
            # `Prefetcher(train_loader)` (not a builtin such as `len(loader)`, nor a torch function).
            if call.qualname is None and name not in _NOT_WRAPPERS:
                return any(
                    isinstance(a.value, (cst.Name, cst.Attribute)) and self._names_loader(a.value, site)
                    for a in call.positional
                )
            return False
        if isinstance(expr, (cst.Name, cst.Attribute)):
            name = dotted_name(expr) or ""
            last = name.rsplit(".", 1)[-1]
            if isinstance(expr, cst.Name) and self._chunks(expr, site):
                return False  # `batches = get_minibatches(rays, chunksize=...)`: one tensor cut in pieces
            if (
                LOADER_NAME.search(last)
                or last.lower() in ("batches", "dataset")
                or last.lower().endswith(("_batches", "_dataset", "_ds", "_dl", "_iter"))
            ):
                return True
            if self.values.expr_kind(expr, site) in (LOADER, DATASET):
                return True
            # `progress_bar = tqdm(enumerate(loader))` ... `for i, b in progress_bar:`
            bindings = self.facts.reaching(expr.value, site) if isinstance(expr, cst.Name) else []
            return (
                len(bindings) == 1
                and bindings[0].kind == BindingKind.ASSIGN
                and bindings[0].index is None
                and isinstance(bindings[0].value, cst.Call)
                and self.is_data_iterable(bindings[0].value, bindings[0].site, depth + 1)
            )
        return False

    def _chunks(self, expr: cst.Name, site: Site) -> bool:
        """The name is bound only to pieces of one tensor: `x.split(n)`,
        `x.chunk(n)`, `torch.split(x, n)`, or a call given a chunk size
        (`get_minibatches(inputs, chunksize=1024)`)."""
        bindings = self.facts.reaching(expr.value, site)
        if not bindings:
            return False
        for b in bindings:
            value = b.value if b.kind == BindingKind.ASSIGN and b.index is None else None
            call = self.facts.call_for(value) if isinstance(value, cst.Call) else None
            if call is None:
                return False
            if call.method in ("split", "chunk", "tensor_split") or call.qualname in ("torch.split", "torch.chunk"):
                continue
            if not any(a.keyword is not None and "chunk" in a.keyword.value.lower() for a in call.node.args):
                return False
        return True

    def _names_loader(self, expr: cst.BaseExpression, site: Site) -> bool:
        """A name for a DataLoader (by its kind, or named like one)."""
        name = dotted_name(expr) or ""
        return bool(LOADER_NAME.search(name.rsplit(".", 1)[-1])) or self.values.expr_kind(expr, site) == LOADER

    def role(self, loop: Loop) -> Optional[LoopRole]:
        """TRAIN (it trains), INFER (it runs a model over data without training,
        or decodes step by step in an inference function), or None."""
        key = id(loop.node)
        if key not in self._roles:
            self._roles[key] = None
            self._roles[key] = self._role(loop)
        return self._roles[key]

    def runs_once(self, loop: Loop) -> bool:
        """The loop's body runs once (or a few times): it holds an unconditional
        `break` (a look at the first batch), it starts with `if <count> >= 1:
        break` (or `== 5`: up to ten) on a count of its iterations (the
        `enumerate` index, or a counter set to 0 before the loop and
        incremented in it), it walks a display of one element (`for npass in
        [1]:`, also through a name bound once to one that nothing grows), or
        it walks a loader built with `batch_size=len(...)` (one batch holds the
        whole dataset)."""
        return self._cached(("once", id(loop.node)), lambda: self._runs_once(loop))

    def _runs_once(self, loop: Loop) -> bool:
        body = loop.node.body
        if isinstance(body, cst.IndentedBlock) and body.body:
            if any(
                isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in stmt.body)
                for stmt in body.body
            ):
                return True
            if self._stops_after_first(loop, body.body[0]):
                return True
        expr = loop.iter
        while isinstance(expr, cst.Call) and expr.args and (dotted_name(expr.func) or "") in ITER_WRAPPERS:
            expr = expr.args[0].value
        if _one_element_literal(expr):
            return True  # `for npass in [1]:`
        if not isinstance(expr, cst.Name):
            return False
        site = self.facts.site_of_statement(loop.node)
        bindings = self.facts.visible_bindings(expr.value, loop.scope) if site is not None else []
        if len(bindings) == 1 and _one_element_literal(bindings[0].value) and not self._mutated(expr.value, loop):
            return True  # `pass_at = [1]` ... `for npass in pass_at:`
        if len(bindings) != 1 or not isinstance(bindings[0].value, cst.Call):
            return False
        call = self.facts.call_for(bindings[0].value)
        if call is None or self.values.call_kind(call) != LOADER:
            return False
        arg = call.keyword("batch_size") or (call.positional[1] if len(call.positional) > 1 else None)
        return arg is not None and isinstance(arg.value, cst.Call) and dotted_name(arg.value.func) == "len"

    def _mutated(self, name: str, loop: Loop) -> bool:
        """A method of `name` is called in the loop's scope (`.append(...)`): it may grow."""
        return any(
            isinstance(c.receiver, cst.Name) and c.receiver.value == name and c.site.scope is loop.scope
            for c in self.facts.calls
            if c.receiver is not None
        )

    def counter(self, loop: Loop, from_zero: bool = False) -> Optional[str]:
        """The name that counts the loop's iterations, taking each value once:
        the index of `for i, x in enumerate(...)` (also inside `tqdm(...)`), or
        the target of `for i in range(...)`; with `from_zero`, only one whose
        first value is 0 (no `start`). None for a `while` or a loop over data."""
        node = loop.node
        if not isinstance(node, cst.For):
            return None
        it: cst.BaseExpression = node.iter
        while (
            isinstance(it, cst.Call)
            and it.args
            and dotted_name(it.func) != "enumerate"
            and (dotted_name(it.func) or "") in ITER_WRAPPERS
        ):
            it = it.args[0].value
        if not isinstance(it, cst.Call):
            return None
        func = dotted_name(it.func)
        if from_zero and len(it.args) != 1:
            return None
        if func == "range" and isinstance(node.target, cst.Name):
            return node.target.value
        if func == "enumerate" and isinstance(node.target, cst.Tuple) and node.target.elements:
            index = node.target.elements[0].value
            return index.value if isinstance(index, cst.Name) else None
        return None

    def _one_iteration_test(self, test: cst.BaseExpression, loop: Loop) -> bool:
        """The test holds in one iteration of `loop` at most: it is (or, joined
        by `and`, includes) `i == <value>` where `i` is the loop's counter and
        `<value>` does not change in the loop (`if i == 0:`, `if step == len(loader) - 1:`)."""
        name = self.counter(loop)
        if name is None:
            return False
        tests = [test]
        while tests:
            current = tests.pop()
            if isinstance(current, cst.BooleanOperation) and isinstance(current.operator, cst.And):
                tests += [current.left, current.right]
                continue
            if not (
                isinstance(current, cst.Comparison)
                and len(current.comparisons) == 1
                and isinstance(current.comparisons[0].operator, cst.Equal)
            ):
                continue
            left, right = current.left, current.comparisons[0].comparator
            for side, other in ((left, right), (right, left)):
                if (
                    isinstance(side, cst.Name)
                    and side.value == name
                    and not any(
                        isinstance(n, cst.Name) and n.value in loop.targets for n in (other, *descendants(other))
                    )
                    and not any(
                        loop.contains(b.site.order)
                        for n in (other, *descendants(other))
                        if isinstance(n, cst.Name)
                        for b in self.facts.scoped_bindings(n.value, loop.scope)
                    )
                ):
                    return True
        return False

    def _stops_after_first(self, loop: Loop, first: cst.BaseStatement) -> bool:
        """`first` (the body's first statement) is `if n == 1: break` (also `>= 1`,
        `> 0`, or a few iterations: `if n == 5: break`, a look at the first
        batches) where `n` counts the iterations from 0: the loop's `counter`, or
        a name bound to 0 right before the loop whose only binding in it is
        `n += 1` at the top of its body."""
        if not (isinstance(first, cst.If) and first.orelse is None and _only_break(first.body)):
            return False
        test = first.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return False
        op, bound = test.comparisons[0].operator, test.comparisons[0].comparator
        if not (isinstance(test.left, cst.Name) and isinstance(bound, cst.Integer)):
            return False
        limit = int(bound.evaluated_value)
        if not (
            (isinstance(op, (cst.Equal, cst.GreaterThanEqual)) and 1 <= limit <= _FEW)
            or (isinstance(op, cst.GreaterThan) and 0 <= limit < _FEW)
        ):
            return False
        name = test.left.value
        node = loop.node
        if self.counter(loop, from_zero=True) == name:
            return True
        inside = [b for b in self.facts.scoped_bindings(name, loop.scope) if loop.contains(b.site.order)]
        before = [b for b in self.facts.scoped_bindings(name, loop.scope) if b.site.order < loop.order]
        if len(inside) != 1 or not before:
            return False
        step = inside[0]
        stmt = step.site.stmt
        parent = self.facts.parent_of(stmt) if stmt is not None else None
        return (
            before[-1].kind == BindingKind.ASSIGN
            and isinstance(before[-1].value, cst.Integer)
            and int(before[-1].value.evaluated_value) == 0
            and step.kind == BindingKind.AUGASSIGN
            and isinstance(stmt, cst.AugAssign)
            and isinstance(stmt.operator, cst.AddAssign)
            and isinstance(stmt.value, cst.Integer)
            and int(stmt.value.evaluated_value) == 1
            and isinstance(parent, cst.SimpleStatementLine)
            and self.facts.parent_of(parent) is node.body
        )

    def _role(self, loop: Loop) -> Optional[LoopRole]:
        if self.runs_once(loop):
            return None  # one iteration: a look at one batch, or one batch holding everything
        if self.trains(loop):
            return TRAIN
        if not self.forwards(loop):
            return None
        if self.is_data_loop(loop):
            return INFER
        fn = loop.scope.function
        if fn is not None and INFERENCE_NAME.match(fn.name):
            return INFER
        return INFER if self._feeds_back(loop) else None

    def decodes(self, loop: Loop) -> bool:
        """A generation/decoding loop: it does not train and either picks tokens
        from the model's output and feeds them back (`argmax`, `topk`,
        `multinomial`), or is a search that runs until a `break` (`while True:`
        in beam search). Each step needs the previous step's choice, usually on
        the host."""
        return self._cached(("decodes", id(loop.node)), lambda: self._decodes(loop))

    def _decodes(self, loop: Loop) -> bool:
        if self.trains(loop) or self.is_data_loop(loop):
            return False
        if isinstance(loop.node, cst.While) and _breaks(loop.node.body):
            return True
        picks = any(
            c.method in TOKEN_PICKS or (c.qualname or "").rsplit(".", 1)[-1] in TOKEN_PICKS for c in self.calls_in(loop)
        )
        return picks and self._feeds_back(loop)

    def _feeds_back(self, loop: Loop) -> bool:
        """An autoregressive loop: a model input is rebound in the loop from the
        model's own output (directly or through one more name)."""
        forwards = [c for c in self.calls_in(loop) if self.values.model_call(c) is not None]
        if not forwards:
            return False
        bindings = [
            b
            for b in self.facts.bindings
            if b.site.scope is loop.scope
            and loop.contains(b.site.order)
            and b.kind in (BindingKind.ASSIGN, BindingKind.AUGASSIGN, BindingKind.ANNASSIGN)
            and b.value is not None
        ]
        values = [(b.name, b.value) for b in bindings if b.value is not None]
        outputs = {name for name, value in values if any(contains(value, c.node) for c in forwards)}
        for _ in range(2):
            outputs |= {name for name, value in values if mentions(value, outputs)}
        for call in forwards:
            for arg in call.node.args:
                if isinstance(arg.value, cst.Name) and arg.value.value in outputs:
                    return True
        return False

    def direct_hot(self, loop: Loop) -> bool:
        """A data loop, or one whose own body (helpers included) trains or runs a
        model; not one whose body runs once."""
        return self._cached(
            ("direct", id(loop.node)),
            lambda: (
                not self.runs_once(loop)
                and (
                    self.is_data_loop(loop)
                    or any(self._call_trains(c) or self._call_forwards(c) for c in self.own_calls(loop))
                )
            ),
        )

    def is_epoch_loop(self, loop: Loop) -> bool:
        """A loop around a per-batch loop (`for epoch in range(n): for x in loader:`):
        its own statements run once per epoch."""
        if self.is_data_loop(loop):
            return False
        return self._cached(
            ("epoch", id(loop.node)),
            lambda: (
                any(
                    inner is not loop
                    and loop.contains(inner.order)
                    and self.direct_hot(inner)
                    and (self.is_data_loop(inner) or self.trains(inner))
                    for inner in self.facts.loops_in(loop.scope)
                )
                or any(self._walks_data(fn) for fn in self._own_helpers(loop))
            ),
        )

    def _own_helpers(self, loop: Loop) -> List[Function]:
        out = []
        for call in self.own_calls(loop):
            fn = self.helpers.function(call)
            if fn is not None:
                out.append(fn)
        return out

    def _walks_data(self, fn: Function, depth: int = 0) -> bool:
        """`fn` (or a same-file helper it calls) runs a whole pass itself: a loop
        over data, or a training loop (`train_one_epoch(model, loader)`,
        `evaluate(model, loader)`). A loop calling it runs once per pass."""
        return self._cached(
            ("walks", id(fn.node)),
            lambda: (
                any(
                    self.direct_hot(inner) and (self.is_data_loop(inner) or self.trains(inner))
                    for inner in self.facts.loops_in(fn.scope)
                )
                or (
                    depth < 3
                    and any(
                        self._walks_data(inner, depth + 1)
                        for call in self.helpers.calls_in(fn)
                        if (inner := self.helpers.function(call)) is not None and inner is not fn
                    )
                )
            ),
        )

    def step_loop(self, site: Site) -> Optional[Loop]:
        """The per-batch (or per-step) loop `site` runs in every iteration of, if
        any: the innermost enclosing hot loop, not crossing an epoch loop."""
        current = site.loop
        while current is not None and current.scope is site.scope:
            if self.is_epoch_loop(current):
                return None
            if self.direct_hot(current):
                return current
            current = current.parent
        return None

    def periodic_test(self, test: cst.BaseExpression) -> bool:
        """The test uses `%` (`step % 100 == 0`), directly or through a same-file
        helper every `return` of which does (`def divisible_by(n, d): return n % d == 0`)."""
        if _has_modulo(test):
            return True
        for node in descendants(test):
            call = self.facts.call_for(node) if isinstance(node, cst.Call) else None
            fn = self.helpers.function(call) if call is not None else None
            if fn is None:
                continue
            returns = self.facts.returns_of(fn)
            if returns and all(r.value is not None and _has_modulo(r.value) for r, _ in returns):
                return True
        return False

    def periodic_guard(self, site: Site, loop: Optional[Loop] = None) -> bool:
        """Under an `if` whose test uses `%` (`if step % 100 == 0:`) inside the loop,
        or after one that leaves otherwise (`if epoch % n != 0: return`)."""
        for if_node in site.ifs:
            if_site = self.facts.site_of_statement(if_node)
            if loop is not None and if_site is not None and not loop.contains(if_site.order):
                continue
            if self.periodic_test(if_node.test):
                return True
        return self._after_periodic_exit(site, loop)

    def _after_periodic_exit(self, site: Site, loop: Optional[Loop]) -> bool:
        """An earlier statement of a block around `site` (inside the loop, or in
        the function) is `if <test with %>: return/continue/break`."""
        node: Optional[cst.CSTNode] = site.stmt
        while node is not None:
            parent = self.facts.parent_of(node)
            if isinstance(parent, cst.IndentedBlock):
                for sibling in parent.body:
                    if sibling is node:
                        break
                    if isinstance(sibling, cst.If) and self.periodic_test(sibling.test) and _leaves(sibling.body):
                        if_site = self.facts.site_of_statement(sibling)
                        if loop is None or (if_site is not None and loop.contains(if_site.order)):
                            return True
            if loop is not None and node is loop.node:
                return False
            if isinstance(parent, (cst.FunctionDef, cst.Module)) or parent is None:
                return False
            node = parent
        return False

    def occasional_guard(self, site: Site, loop: Optional[Loop] = None) -> bool:
        """`site` runs only now and then in the loop: under a periodic guard, in
        the body of an `if` that then leaves the loop (`if done: x.item(); break`),
        in a branch bounded to a few runs (`if shown < 5: shown += 1`), or, given
        the loop, in a branch of one of its iterations (`if i == 0:` on its counter)."""
        if self.periodic_guard(site, loop):
            return True
        for owner, part in site.region:
            if not isinstance(owner, cst.If) or part is not Part.BODY:
                continue
            if_site = self.facts.site_of_statement(owner)
            if loop is not None and if_site is not None and not loop.contains(if_site.order):
                continue
            if _exits(owner.body) or _bounded_counter(owner):
                return True
            if loop is not None and if_site is not None and self._one_iteration_test(owner.test, loop):
                return True
        return False

    def control_exit(self, node: cst.CSTNode, site: Site) -> bool:
        """`node`, in the test of the statement at `site`, only decides whether
        its loop goes on: the test of a `while`, or of an `if` directly in the
        loop whose body leaves it (`if signal.item() == 0: break`), reading no
        name the loop binds (a flag filled in place or broadcast, not a loss the
        iteration computes). The host must read it every iteration to know
        whether to run the next one."""
        stmt = site.stmt
        if isinstance(stmt, cst.While):
            loop = self.loop_for(stmt)
        elif isinstance(stmt, cst.If) and _exits(stmt.body) and stmt.orelse is None:
            loop = site.loop
        else:
            return False
        if loop is None or not contains(stmt.test, node):
            return False
        nodes = list(descendants(stmt.test))
        attrs = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
        read = {n.value for n in nodes if isinstance(n, cst.Name) and id(n) not in attrs}
        if read & set(loop.targets):
            return False
        return not any(b.name in read and loop.contains(b.site.order) for b in self.facts.bindings_in(loop.scope))

    def branches_in(self, site: Site, loop: Loop) -> List[cst.If]:
        """The `if` statements inside `loop` that `site` sits under (in a branch
        or after an early exit of one): code that may not run every iteration."""
        out = []
        for owner, _ in site.region:
            if isinstance(owner, cst.If):
                owner_site = self.facts.site_of_statement(owner)
                if owner_site is not None and loop.contains(owner_site.order):
                    out.append(owner)
        return out

    def invariant(self, name: str, loop: Loop, read_elsewhere: bool = False) -> bool:
        """`name` holds the same object in every iteration of `loop`: bound
        before the loop (in its scope, or in an enclosing one), never bound in
        it nor through `global`/`nonlocal`, and (unless `read_elsewhere`) read
        in no other function, which the loop might call to change it in place."""
        scope = loop.scope
        visible = self.facts.visible_bindings(name, scope)
        if not visible or self.facts.declared_global(name):
            return False
        own = [b for b in visible if b.site.scope is scope]
        if any(loop.contains(b.site.order) for b in own):
            return False
        if own and not any(b.site.order < loop.order for b in own):
            return False
        if read_elsewhere:
            return True
        return all(
            u.site.scope is scope or u.site.scope.kind == ScopeKind.MODULE
            for u in self.facts.local_uses(name, visible[0].site.scope)
        )

    def is_training_loop(self, loop: Loop) -> bool:
        return self.trains(loop)

    def steps_environment(self, loop: Loop) -> bool:
        """The loop drives an environment (`env.step(action)`): online acting,
        where pulling the action to the host is inherent."""
        for call in self.calls_in(loop):
            if call.method == "step" and "env" in (dotted_name(call.receiver) or "").lower():
                return True
        return False

    # -- hot contexts ----------------------------------------------------------------------

    def hot_context(self, site: Site) -> Optional[HotContext]:
        """How `site` runs every iteration of a per-batch loop, or None."""
        loop = self.step_loop(site)
        if loop is not None:
            if self.occasional_guard(site, loop):
                return None
            return HotContext(loop, self.trains(loop))
        if site.loop is not None:
            outer = [lp for lp in site.loop.chain() if lp.scope is site.scope]
            if any(self.is_epoch_loop(lp) or self.is_data_loop(lp) or self.runs_once(lp) for lp in outer):
                return None  # in an epoch loop, a loop over files, a loop that runs once
            # A small loop (over parameters, loss terms) in a function that runs every step: every step.
        fn_scope = site.scope.function
        if fn_scope is None or site.scope is not fn_scope or self.occasional_guard(site):
            return None
        fn = self.facts.function_of(fn_scope)
        return self._helper_context(fn, 0) if fn is not None else None

    def _helper_context(self, fn: Function, depth: int) -> Optional[HotContext]:
        key = id(fn.node)
        if key in self._helper:
            return self._helper[key]
        self._helper[key] = None
        result = None
        if depth < MAX_HELPER_DEPTH:
            for call in self.values.callers(fn):
                loop = self.step_loop(call.site)
                if loop is not None:
                    if self.occasional_guard(call.site, loop):
                        continue
                    result = HotContext(loop, self.trains(loop), fn.name, call)
                    break
                if call.site.loop is not None:
                    continue
                outer_scope = call.site.scope
                outer = self.facts.function_of(outer_scope) if outer_scope.kind == ScopeKind.FUNCTION else None
                if outer is not None and not self.occasional_guard(call.site):
                    ctx = self._helper_context(outer, depth + 1)
                    if ctx is not None:
                        result = HotContext(ctx.loop, ctx.training, ctx.via, ctx.call)
                        break
        self._helper[key] = result
        return result


def _one_element_literal(expr: Optional[cst.BaseExpression]) -> bool:
    """A list, tuple or set display of at most one element, none starred."""
    return isinstance(expr, (cst.List, cst.Tuple, cst.Set)) and (
        len(expr.elements) <= 1 and not any(isinstance(e, cst.StarredElement) for e in expr.elements)
    )


def _only_break(block: cst.BaseSuite) -> bool:
    """The block is just `break`."""
    if isinstance(block, cst.SimpleStatementSuite):
        return len(block.body) == 1 and isinstance(block.body[0], cst.Break)
    body = block.body
    return (
        len(body) == 1
        and isinstance(body[0], cst.SimpleStatementLine)
        and len(body[0].body) == 1
        and isinstance(body[0].body[0], cst.Break)
    )


def _breaks(body: cst.CSTNode) -> bool:
    """A `break` of this loop in `body` (not of a nested loop)."""
    stack = children(body)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Break):
            return True
        if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(node.orelse) if isinstance(node, (cst.For, cst.While)) and node.orelse else [])
            continue
        stack.extend(children(node))
    return False
