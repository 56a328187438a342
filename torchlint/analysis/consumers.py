"""Who consumes a value, and whether each consumer works with it on a given device.

A fix that moves a value (`x.cuda()` made into `x = x.cuda()`, `y.cpu()` into
`y = y.cpu()`) changes where every later reader of the name finds it. Such a
fix keeps working code working only when every one of those readers works with
the value on its new device: a model on that device, a tensor it meets in
arithmetic, a comparison or a torch function on that device, code that is
indifferent to the place (`print`, `.shape`, `.item()`, a condition), or host
code for a value moved to the host. One reader we cannot see (a function from
another module, a value stored on an object, returned, put in a container)
makes the answer "no": report, offer no fix.

`all_on(name, site, target)`: every reader of `name` that a binding made at
`site` would reach (later in the scope, earlier in a loop around it on the
next iteration, in functions that read the name as a global) works with the
value on `target` (`places.ACCEL` or `places.HOST`; None: a device we cannot
tell, where only place-indifferent readers pass). Values computed from the
name (`y = x * 2`, `loss = F.mse_loss(x, t)`) are followed a few steps.
"""

from __future__ import annotations

from typing import Iterator, Optional, Set, Tuple, Union

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Facts, NameUse, Site, dominates
from torchlint.analysis.helpers import Helpers
from torchlint.analysis.knowledge import Effect, doing, is_move_call
from torchlint.analysis.place_kinds import ACCEL, CPU, DEVICE, HOST, WRAPPED, Device
from torchlint.analysis.places import Places
from torchlint.analysis.values import Values

_MAX_DEPTH = 3

# Attributes that read metadata, wherever the tensor lives.
_METADATA = frozenset(
    "shape device dtype ndim requires_grad is_cuda is_leaf layout names grad_fn is_sparse is_quantized "
    "is_meta itemsize nbytes".split()
)
# Attributes that are tensors in the same place.
_SAME_PLACE_ATTRS = frozenset("T mT H mH data grad real imag".split())
# Methods that work on a tensor wherever it lives and return no tensor (or a host one).
_INDIFFERENT_METHODS = frozenset(
    "item tolist size dim ndimension numel nelement data_ptr element_size is_contiguous is_floating_point "
    "is_complex get_device stride storage_offset backward register_hook retain_grad requires_grad_ "
    "cpu __len__ __repr__ __str__ __format__ is_pinned equal zero_ fill_ normal_ uniform_ random_ "
    "bernoulli_ exponential_ geometric_ cauchy_ log_normal_ clamp_ clip_".split()
)
# Methods that need host memory.
_HOST_METHODS = frozenset({"numpy", "pin_memory", "share_memory_", "__array__"})
# Methods whose result is not a tensor of the same place (or that store the value away).
_OPAQUE_METHODS = frozenset({"tolist", "storage", "untyped_storage", "apply_", "map_"})
# Builtins that read a value wherever it lives (a tensor on a device is printed, measured, tested).
_INDIFFERENT_BUILTINS = frozenset(
    {"print", "len", "str", "repr", "format", "isinstance", "type", "id", "float", "int", "bool", "hash", "callable"}
)
# torch functions that do not return a tensor where their inputs are, or that store them away.
_TORCH_OPAQUE = doing(Effect.OPAQUE)
_TORCH_INDIFFERENT = doing(Effect.READS_METADATA)
_HOST_LIBRARIES = ("numpy", "np", "matplotlib", "plt", "pandas", "pd", "sklearn", "scipy", "PIL", "cv2")

# (name, order) pairs already followed, against cycles.
_Seen = Set[Tuple[str, int]]


class Consumers:
    def __init__(self, facts: Facts, values: Values, helpers: Helpers, places: Places) -> None:
        self.facts = facts
        self.values = values
        self.helpers = helpers
        self.places = places

    # -- the question -------------------------------------------------------------------------

    def all_on(self, name: str, site: Site, target: Optional[Device]) -> bool:
        """Every later reader of `name` (as bound at `site`) works with the value on `target`."""
        return self._all_on(name, site, target, 0, set())

    def _all_on(self, name: str, site: Site, target: Optional[Device], depth: int, seen: Set[Tuple[str, int]]) -> bool:
        key = (name, site.order)
        if key in seen:
            return True  # already being checked higher up
        if depth > _MAX_DEPTH:
            return False
        seen.add(key)
        for use in self.readers(name, site):
            if not self._works(use.node, use.site, target, depth, seen):
                return False
        for b in self._updates(name, site):
            # `x += other`: `other` meets the moved value.
            if b.value is None or not self._compatible(b.value, b.site, target):
                return False
        return True

    # -- who reads the value --------------------------------------------------------------

    def readers(self, name: str, site: Site) -> Iterator[NameUse]:
        """The reads of `name` that a binding made at `site` would reach: later in
        its scope until a rebinding that runs on every path (earlier in a loop
        around `site` too: the next iteration sees it), and reads in nested
        functions that see the name as a variable of that scope."""
        scope = site.scope
        rebinds = [
            b
            for b in self.facts.scoped_bindings(name, scope)
            if b.kind not in (BindingKind.GLOBAL, BindingKind.NONLOCAL)
        ]
        for use in self.facts.local_uses(name, scope):
            if use.site.stmt is site.stmt and use.site.scope is scope:
                continue  # the statement itself
            if use.site.scope is not scope:
                visible = self.facts.visible_bindings(name, use.site.scope)
                if visible and visible[0].site.scope is not scope:
                    continue  # another variable of the same name
                yield use  # a function reading it may run after the move
                continue
            if use.site.order > site.order:
                if not any(site.order < b.site.order < use.site.order and dominates(b.site, use.site) for b in rebinds):
                    yield use
                continue
            for loop in site.loop.chain() if site.loop is not None else ():
                if loop.scope is not scope:
                    break
                if not loop.contains(use.site.order):
                    continue
                killed = any(
                    (loop.contains(b.site.order) and b.site.order < use.site.order and dominates(b.site, use.site))
                    or (b.kind == BindingKind.FOR and b.site.loop is loop)
                    for b in rebinds
                )
                if not killed:
                    yield use
                break

    def _updates(self, name: str, site: Site) -> Iterator[Binding]:
        """`name += ...` after `site` in its scope, before a rebinding that kills it."""
        for b in self.facts.scoped_bindings(name, site.scope):
            if b.kind == BindingKind.AUGASSIGN and b.site.order > site.order:
                yield b

    # -- does this reader work with the value there? ----------------------------------------

    def _works(self, node: cst.CSTNode, site: Site, target: Optional[Device], depth: int, seen: _Seen) -> bool:
        """The value of `node` (on `target`) flows into its parent: does that work?"""
        parent = self.facts.parent_of(node)
        if parent is None:
            return False
        if isinstance(parent, cst.Attribute) and parent.value is node:
            grand = self.facts.parent_of(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                return self._method_works(parent.attr.value, grand, site, target, depth, seen)
            attr = parent.attr.value
            if attr in _METADATA:
                return True
            if attr in _SAME_PLACE_ATTRS:
                return self._works(parent, site, target, depth, seen)
            return False
        if isinstance(parent, cst.Arg):
            call = self.facts.call_of_arg(parent)
            return call is not None and self._argument_works(call, parent, site, target, depth, seen)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is node else parent.left
            return self._compatible(other, site, target) and self._works(parent, site, target, depth, seen)
        if isinstance(parent, cst.ComparisonTarget):
            comparison = self.facts.parent_of(parent)
            if not isinstance(comparison, cst.Comparison):
                return False
            return self._comparison_works(comparison, node, site, target, depth, seen)
        if isinstance(parent, cst.Comparison):
            return self._comparison_works(parent, node, site, target, depth, seen)
        if isinstance(parent, cst.UnaryOperation):
            if isinstance(parent.operator, cst.Not):
                return True  # a truth value
            return self._works(parent, site, target, depth, seen)
        if isinstance(parent, cst.BooleanOperation):
            return self._works(parent, site, target, depth, seen)
        if isinstance(parent, cst.Subscript):
            if parent.value is node:
                return self._works(parent, site, target, depth, seen)  # `x[i]`: in the same place
            return False
        if isinstance(parent, (cst.Index, cst.Slice, cst.SubscriptElement)):
            subscript = self._enclosing(parent, cst.Subscript)
            # `t[x]`: an index tensor must be where `t` is.
            return isinstance(subscript, cst.Subscript) and self._compatible(subscript.value, site, target)
        if isinstance(parent, (cst.If, cst.While)):
            return parent.test is node  # a condition: works anywhere
        if isinstance(parent, cst.IfExp):
            return parent.test is node or self._works(parent, site, target, depth, seen)
        if isinstance(parent, (cst.FormattedStringExpression, cst.Expr, cst.Assert)):
            return True  # shown, or evaluated and dropped
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            return self._assigned(parent, site, target, depth, seen)
        if isinstance(parent, cst.Element):
            container = self.facts.parent_of(parent)
            if not isinstance(container, (cst.List, cst.Tuple)):
                return False
            others = [e.value for e in container.elements if e is not parent]
            if any(isinstance(e, cst.StarredElement) for e in container.elements):
                return False
            return all(self._compatible(o, site, target) for o in others) and self._works(
                container, site, target, depth, seen
            )
        return False  # returned, yielded, stored, put in a dict...

    def _enclosing(self, node: cst.CSTNode, kind: type) -> Optional[cst.CSTNode]:
        for _ in range(4):
            node = self.facts.parent_of(node)  # type: ignore[assignment]
            if node is None or isinstance(node, kind):
                return node
        return None

    def _comparison_works(
        self,
        comparison: cst.Comparison,
        node: cst.CSTNode,
        site: Site,
        target: Optional[Device],
        depth: int,
        seen: _Seen,
    ) -> bool:
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in comparison.comparisons):
            return False
        operands = [comparison.left] + [c.comparator for c in comparison.comparisons]
        others = [o for o in operands if o is not node]
        return all(self._compatible(o, site, target) for o in others) and self._works(
            comparison, site, target, depth, seen
        )

    def _assigned(
        self, stmt: Union[cst.Assign, cst.AnnAssign], site: Site, target: Optional[Device], depth: int, seen: _Seen
    ) -> bool:
        """`y = <the value>`: y's readers see it on `target` too."""
        targets = [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [stmt.target]
        names = [t.value for t in targets if isinstance(t, cst.Name)]
        if len(names) != len(targets):
            return False  # stored on an object, unpacked: can't follow
        where = self.facts.site_of_statement(stmt)
        if where is None:
            return False
        return all(self._all_on(name, where, target, depth + 1, seen) for name in names)

    def _method_works(
        self, method: str, call_node: cst.Call, site: Site, target: Optional[Device], depth: int, seen: _Seen
    ) -> bool:
        call = self.facts.call_for(call_node)
        if call is None:
            return False
        if method in _HOST_METHODS:
            return target == HOST
        if method in _INDIFFERENT_METHODS:
            return True
        if method in _OPAQUE_METHODS:
            return False
        if method == "cuda" or (is_move_call(call) and self.places.move_device(call) is not None):
            return True  # moved on: where it goes is decided there
        args = [a.value for a in call_node.args if a.keyword is None or a.keyword.value not in ("dtype", "dim")]
        if not all(self._compatible(a, site, target) for a in args):
            return False  # `x.masked_fill(mask, 0)`, `x.index_select(0, idx)`: the operands meet x
        return self._works(call_node, site, target, depth, seen)  # the result is where x is

    def _argument_works(
        self, call: Call, arg: cst.Arg, site: Site, target: Optional[Device], depth: int, seen: _Seen
    ) -> bool:
        func = call.node.func
        if (
            isinstance(func, cst.Name)
            and func.value in _INDIFFERENT_BUILTINS
            and not self.facts.bindings_of(func.value)
        ):
            return True
        q = call.qualname or ""
        if q.split(".")[0] in _HOST_LIBRARIES:
            return target == HOST
        mc = self.values.model_call(call)
        if mc is not None:
            place = self.places.model_place(mc.model, call.site)
            if target == ACCEL:
                return place in (DEVICE, WRAPPED)  # DataParallel & co. move their inputs themselves
            return target == HOST and place == CPU
        others = [a.value for a in call.node.args if a is not arg and not a.star]
        if self.values.is_loss_call(call) or (
            q.startswith("torch.") and q not in _TORCH_OPAQUE and (q.count(".") == 1 or _functional(q))
        ):
            if q in _TORCH_INDIFFERENT:
                return True
            meets = [
                a.value
                for a in call.node.args
                if a is not arg and not a.star and (a.keyword is None or a.keyword.value not in ("dim", "dtype"))
            ]
            return all(self._compatible(o, site, target) for o in meets) and self._works(
                call.node, site, target, depth, seen
            )
        fn = self.helpers.function(call)
        if fn is not None:
            # A same-file helper: its parameter's readers, and what it hands back.
            params = [p for p in fn.params if self.values.argument_for(call, fn, p) is arg.value]
            if len(params) != 1:
                return False
            binding = next(
                (b for b in self.facts.scoped_bindings(params[0], fn.scope) if b.kind == BindingKind.PARAM), None
            )
            if binding is None or not self._all_on(params[0], binding.site, target, depth + 1, seen):
                return False
            if not all(self._compatible(o, site, target) for o in others):
                return False
            returns = [r for r, _ in self.facts.returns_of(fn) if r.value is not None]
            return not returns or self._works(call.node, site, target, depth + 1, seen)
        return False  # code we cannot see

    # -- the other operands ---------------------------------------------------------------------

    def _compatible(self, expr: cst.BaseExpression, site: Site, target: Optional[Device]) -> bool:
        """`expr`, met by the moved value, works with it on `target`: a number
        or other non-tensor, or a tensor known to be there."""
        if _literal(expr) or self.places.is_dtype_expr(expr):
            return True
        place = self.places.tensor_place(expr, site)
        if place is None:
            return self._not_a_tensor(expr, site)
        if target == ACCEL:
            return place == DEVICE
        if target == HOST:
            return place == CPU
        return False

    def _not_a_tensor(self, expr: cst.BaseExpression, site: Site) -> bool:
        """A number: a literal, a name bound only to numbers, a size or an item."""
        if _literal(expr):
            return True
        if isinstance(expr, cst.Name):
            bindings = self.places.reaching(expr.value, site)
            return bool(bindings) and all(
                b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
                and b.index is None
                and b.value is not None
                and _literal(b.value)
                for b in bindings
            )
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            if call is not None and call.method in ("item", "size", "dim", "numel", "__len__"):
                return True
            return isinstance(expr.func, cst.Name) and expr.func.value in ("len", "int", "float", "round", "min", "max")
        if isinstance(expr, cst.Subscript):
            value = expr.value
            return isinstance(value, cst.Attribute) and value.attr.value == "shape"
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in ("ndim", "itemsize")
        return False


def _literal(expr: cst.BaseExpression) -> bool:
    """A number, a string, `None`/`True`/`False`, or arithmetic of those."""
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("None", "True", "False")
    if isinstance(expr, cst.UnaryOperation):
        return _literal(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _literal(expr.left) and _literal(expr.right)
    return False


def _functional(q: str) -> bool:
    return q.startswith(("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special."))
