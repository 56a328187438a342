"""What a value is: the `Values` of a file.

In layers, each a class: what kind of value an expression holds, a module, a
tensor, a loader, a dataset, a device, an optimizer, a loss function,
tokenizer output (value_kinds.py); which calls are model forwards, losses,
optimizer steps and training calls (forwards.py); and here which values are
containers: what a comprehension builds (`converts_each`: a list of moved or
cast pieces; `yields_python`: Python data, never tensors) and whether a
module's `forward` returns a container (a list of feature maps, an `(out,
loss, stats)` triple), also through wrappers and into a helper's parameter
every same-file caller passes such a value.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, List, Optional, Set

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Site, dotted_name
from torchlint.analysis.knowledge import is_move_call
from torchlint.analysis.project.kinds import ClassKind
from torchlint.analysis.vocabulary import HOST_OUTPUT_PACKAGES, PLACERS, WRAPPER_CLASSES

if TYPE_CHECKING:
    pass
from torchlint.analysis.forwards import Forwards
from torchlint.analysis.value_kinds import _SAME_KIND_METHODS, LOADER, _last

# Methods that return a value of the receiver's kind.
# `_forward_container`'s answer where only bindings already asked about answer.
_CYCLE = object()


_CONTAINER_NODES = (cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)


_CONTAINER_BUILTINS = frozenset({"list", "tuple", "dict", "set", "zip", "sorted"})


# What builds a hashed container: membership in one hashes its key (a tensor
# hashes by identity), it never compares the key with each entry.
_HASHED_NODES = (cst.Dict, cst.Set, cst.DictComp, cst.SetComp)
_HASHED_BUILTINS = frozenset({"set", "dict", "frozenset", "defaultdict", "OrderedDict", "Counter"})


_LOADER_NAME = re.compile(r"loader", re.I)


# Methods that move or cast a tensor whole: the per-piece conversions of a list of tensors.
_CONVERSIONS = frozenset({"to", "cuda", "float", "half", "double", "bfloat16", "long", "int", "contiguous"})


class Values(Forwards):
    """Kinds of values in one file, memoised: value_kinds.py, forwards.py and the containers here."""

    # -- containers ----------------------------------------------------------------------

    def is_container(self, expr: Optional[cst.BaseExpression], site: Site, depth: int = 0) -> bool:
        """`expr` holds a list, tuple, dict or set (of tensors, typically), not a
        tensor: a literal or comprehension, `list(...)`/`tuple(...)`/`zip(...)`,
        what a same-file function returns when every return is one, the output
        of a module whose forward returns one, a name bound
        only to such values, or a loader's whole batch (`for batch in loader`)."""
        if expr is None or depth > 4:
            return False
        if isinstance(expr, _CONTAINER_NODES):
            return True
        if isinstance(expr, cst.Call):
            func = expr.func
            if (
                isinstance(func, cst.Name)
                and func.value in _CONTAINER_BUILTINS
                and not self.facts.bindings_of(func.value)
            ):
                return True
            call = self.facts.call_for(expr)
            mc = self.model_call(call) if call is not None else None
            if mc is not None and self.forward_returns_container(mc.model, mc.call.site):
                return True  # `feats = disc(x)` whose forward returns a list of feature maps
            fn = self.local_function(call) if call is not None and isinstance(func, cst.Name) else None
            if fn is None:
                return False
            returns = [r.value for r, _ in self.facts.returns_of(fn)]
            return bool(returns) and all(
                value is not None and self.is_container(value, s, depth + 1)
                for value, (_, s) in zip(returns, self.facts.returns_of(fn))
            )
        if isinstance(expr, cst.Name):
            # The bindings that reach this read (flow order), not every earlier one: a
            # training loop's `batch` must not decide what an evaluation loop's is.
            bindings = self.facts.reaching(expr.value, site)
            if bindings and all(self._binds_container(b, depth) for b in bindings):
                return True
            return self.elements_moved(expr.value, site)
        return False

    def elements_moved(self, name: str, site: Site) -> bool:
        """`name[i] = name[i].to(device)` (an integer index) in the scope of `site`: a
        tensor's elements cannot change device by item assignment, so `name` is a
        list (of tensors)."""
        for use in self.facts.uses_of(name):
            sub = use.site.parent
            if use.site.scope is not site.scope or not isinstance(sub, cst.Subscript) or sub.value is not use.node:
                continue
            index = sub.slice[0].slice if len(sub.slice) == 1 else None
            if not isinstance(index, cst.Index) or not isinstance(index.value, (cst.Name, cst.Integer)):
                continue  # `batch["x"] = ...`: a dict batch's entry (what else it holds stays where it was)
            target = self.facts.parent_of(sub)
            assign = self.facts.parent_of(target) if isinstance(target, cst.AssignTarget) else None
            if not isinstance(assign, cst.Assign) or not isinstance(assign.value, cst.Call):
                continue
            call = self.facts.call_for(assign.value)
            if call is not None and is_move_call(call):
                return True
        return False

    def is_hashed(self, expr: cst.BaseExpression, site: Site) -> bool:
        """`expr` is a set or dict (a literal, `set()`, `dict()`, a comprehension, or
        a name every reaching plain binding of which is one): `key in expr` hashes the
        key (a tensor by identity) rather than comparing it, so it reads nothing."""
        if isinstance(expr, _HASHED_NODES):
            return True
        if isinstance(expr, cst.Call):
            name = (dotted_name(expr.func) or "").rsplit(".", 1)[-1]
            return name in _HASHED_BUILTINS
        if isinstance(expr, cst.Name):
            bindings = self.facts.reaching(expr.value, site)
            return bool(bindings) and all(
                b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
                and b.index is None
                and b.value is not None
                and not isinstance(b.value, cst.Name)
                and self.is_hashed(b.value, b.site)
                for b in bindings
            )
        return False

    def writes_out(self, call: Call) -> bool:
        """`call` shows or writes something with a host output package (matplotlib,
        PIL, imageio...): by its qualified name, or as a method of an object one made
        (`draw = ImageDraw.Draw(img)` then `draw.rectangle(...)`; `fig, axes =
        plt.subplots()` then `axes[0].imshow(...)`)."""
        if (call.qualname or "").split(".")[0] in HOST_OUTPUT_PACKAGES:
            return True
        receiver = call.receiver
        while isinstance(receiver, (cst.Subscript, cst.Attribute)):
            receiver = receiver.value
        if not isinstance(receiver, cst.Name):
            return False
        bindings = self.facts.reaching(receiver.value, call.site)
        return bool(bindings) and all(
            b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            and isinstance(b.value, cst.Call)
            and (self.facts.qualname(b.value.func) or "").split(".")[0] in HOST_OUTPUT_PACKAGES
            for b in bindings
        )

    @staticmethod
    def converts_each(comp: cst.BaseComp, names: Set[str]) -> bool:
        """The comprehension's element only moves or casts its loop variable
        (`[x.to(device) for x in xs]`, `[p.float() for p in preds]`): code that
        converts each piece one by one holds a list of tensors (a collated batch,
        a detection head's per-level outputs), not a tensor whose rows it walks."""
        elt = getattr(comp, "elt", None)
        return (
            isinstance(elt, cst.Call)
            and isinstance(elt.func, cst.Attribute)
            and elt.func.attr.value in _CONVERSIONS
            and isinstance(elt.func.value, cst.Name)
            and elt.func.value.value in names
        )

    @staticmethod
    def yields_python(comp: cst.BaseComp, tensor_elements: Set[str]) -> bool:
        """Each value the comprehension builds is Python data, never a tensor: a
        row's selection copied out (`[r[k].tolist() for r, k in zip(ids, keep)]`,
        ragged token lists) or the partner of a zip that is not one of the walked
        tensor's elements (`[layer for layer, m in zip(layers, mask) if not m]`:
        modules picked by a mask). No tensor op produces such a list."""
        elt = getattr(comp, "elt", None)
        if isinstance(elt, cst.Call) and isinstance(elt.func, cst.Attribute) and elt.func.attr.value == "tolist":
            return not elt.args
        if not isinstance(elt, cst.Name) or elt.value in tensor_elements:
            return False
        comp_for = comp.for_in
        return (
            comp_for.inner_for_in is None
            and isinstance(comp_for.target, cst.Tuple)
            and any(isinstance(el.value, cst.Name) and el.value.value == elt.value for el in comp_for.target.elements)
        )

    def _binds_container(self, b: Binding, depth: int) -> bool:
        if b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and b.index is None:
            return self.is_container(b.value, b.site, depth + 1)
        if b.kind == BindingKind.PARAM:
            # `def loss(preds, ...)` where every caller passes a list (a forward's list of predictions)
            passed = self.passed_arguments(b)
            return passed is not None and all(self.is_container(arg, s, depth + 1) for arg, s in passed)
        if b.kind == BindingKind.FOR and b.value is not None:
            it, index = b.value, b.index
            if (
                isinstance(it, cst.Call)
                and isinstance(it.func, cst.Name)
                and it.func.value == "enumerate"
                and it.args
                and index == 1
                and self._direct_element(b)
            ):
                it, index = it.args[0].value, None  # `for i, batch in enumerate(loader)`
            while isinstance(it, cst.Call) and it.args and (dotted_name(it.func) or "").startswith("tqdm"):
                it = it.args[0].value
            if index is not None:
                return False
            kind = self.expr_kind(it, b.site) if isinstance(it, (cst.Name, cst.Attribute, cst.Call)) else None
            name = dotted_name(it) or ""
            return kind == LOADER or bool(_LOADER_NAME.search(name.rsplit(".", 1)[-1]))
        return False

    def _direct_element(self, b: Binding) -> bool:
        """The name is an element of the loop target itself (`for i, batch in ...`),
        not of a nested tuple (`for i, (x, y) in ...`)."""
        element = self.facts.parent_of(b.target)
        target = self.facts.parent_of(element) if element is not None else None
        loop = self.facts.parent_of(target) if target is not None else None
        return isinstance(loop, cst.For) and loop.target is target

    # -- what a module's forward returns ------------------------------------------------

    def forward_returns_container(self, model: cst.BaseExpression, site: Site) -> bool:
        """`model` is an instance of a module class whose `forward` returns a
        list, tuple or dict in every `return` (multi-scale feature maps, an
        `(output, loss, stats)` triple), not a tensor: a same-file class (or one
        of its same-file bases), or a class of another project file. Followed
        through names, `.to()`/`.eval()`, `DataParallel(m)` and a wrapper's
        `.module`."""
        return self._forward_container(model, site, set()) is True

    def forward_output_container(self, expr: cst.BaseExpression, site: Site, depth: int = 0) -> bool:
        """`expr` is the output of such a module (`feats = disc(x)`), or an element
        of one (`feats[i]`: it may be a container itself), or a parameter every
        same-file caller passes one to."""
        while isinstance(expr, cst.Subscript):
            expr = expr.value
        if depth > 4:
            return False
        if isinstance(expr, cst.Name):
            bindings = self.bindings_for(expr.value, site)
            return bool(bindings) and all(self._binds_forward_container(b, depth + 1) for b in bindings)
        call = self.facts.call_for(expr) if isinstance(expr, cst.Call) else None
        mc = self.model_call(call) if call is not None else None
        return mc is not None and self.forward_returns_container(mc.model, mc.call.site)

    def _binds_forward_container(self, b: Binding, depth: int) -> bool:
        if b.kind == BindingKind.PARAM:
            passed = self.passed_arguments(b)
            return passed is not None and all(self.forward_output_container(arg, s, depth) for arg, s in passed)
        value = bound_value(b)
        return value is not None and self.forward_output_container(value, b.site, depth)

    def _forward_container(self, expr: cst.BaseExpression, site: Site, seen: Set[int]) -> object:
        """True, None where the class cannot be told (or its forward returns a
        tensor), or `_CYCLE` where only bindings already asked about answer."""
        if isinstance(expr, cst.Attribute) and expr.attr.value == "module":
            return self._forward_container(expr.value, site, seen)  # `ddp_model.module`: the wrapped module
        if isinstance(expr, (cst.Name, cst.Attribute)):
            name = dotted_name(expr)
            bindings = self.bindings_for(name, site) if name else []
            answers: List[object] = []
            for b in bindings:
                if id(b) in seen:
                    continue  # `self.m = DataParallel(self.m)`: the other bindings answer
                seen.add(id(b))
                if b.kind == BindingKind.PARAM:
                    # `def validate(model, ...)`: what every same-file caller passes
                    passed = self.passed_arguments(b)
                    if not passed:
                        return None
                    given = [self._forward_container(arg, s, seen) for arg, s in passed]
                    if any(g is None for g in given):
                        return None
                    answers.extend(g for g in given if g is not _CYCLE)
                    continue
                if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.index is not None or b.value is None:
                    return None
                answer = self._forward_container(b.value, b.site, seen)
                if answer is None:
                    return None  # every caller up the chain answers None too
                if answer is not _CYCLE:
                    answers.append(answer)
            if not answers:
                return _CYCLE if bindings else None
            return True if all(a is True for a in answers) else None
        if not isinstance(expr, cst.Call):
            return None
        call = self.facts.call_for(expr)
        if call is None:
            return None
        func = expr.func
        if call.method in _SAME_KIND_METHODS and call.receiver is not None:
            return self._forward_container(call.receiver, call.site, seen)
        if (call.qualname in PLACERS or _last(call) in WRAPPER_CLASSES) and call.positional:
            return self._forward_container(call.positional[0].value, call.site, seen)
        if isinstance(func, cst.Name) and func.value in self.module_classes():
            if not self._shadowed_local(func.value, call.site):
                return self._class_forward_container(func.value, set())
        if call.qualname and self.project is not None and self.project.class_kind(call.qualname) is ClassKind.MODULE:
            return self.project.forward_returns_container(call.qualname)
        return None

    def _class_forward_container(self, name: str, seen: Set[str]) -> Optional[bool]:
        """The same-file class's `forward` (or its same-file base's) returns a container."""
        info = self.facts.classes.get(name)
        if info is None or name in seen:
            return None
        seen.add(name)
        body = info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "forward":
                fn = self.facts.function_for_def(stmt)
                returns = self.facts.returns_of(fn) if fn is not None else []
                return bool(returns) and all(r.value is not None and self.is_container(r.value, s) for r, s in returns)
        for base in info.bases:
            if isinstance(base, cst.Name) and base.value in self.facts.classes:
                return self._class_forward_container(base.value, seen)
        return None


def bound_value(b: Binding) -> Optional[cst.BaseExpression]:
    """What an assignment binds to the name: its value, or its element of a
    tuple assigned element by element (`a, b = f(x), f(y)`)."""
    if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.value is None:
        return None
    if b.index is None:
        return b.value
    if isinstance(b.value, (cst.Tuple, cst.List)) and b.index < len(b.value.elements):
        element = b.value.elements[b.index]
        return None if isinstance(element, cst.StarredElement) else element.value
    return None
