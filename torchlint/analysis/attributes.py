"""Tensors a module class keeps as plain attributes.

`self.bins = torch.arange(2, 22, step)` in an `nn.Module`'s `__init__` is
neither a parameter nor a buffer: `model.to(device)` leaves it on the CPU.
`Attributes.cpu_tensors()` answers the attributes where that breaks the
module on an accelerator, each a `CpuAttribute`, when all of these hold:

- the class subclasses `nn.Module` (`Values.module_classes`, project bases too)
  and builds parameters of its own (`FileView.has_parameters`: a module
  without any may be a transform run on the CPU while loading data), and no
  base of it is a torch layer (whose own buffers may have any name);
- `__init__` binds the attribute to an allocating factory without `device=`
  (`torch.arange`, `zeros`, `randn`..., or `torch.tensor` of a non-empty
  literal list), not a 0-dim one (`torch.zeros(())`: a CPU scalar tensor mixes
  with tensors on any device), and every other store of it is one too;
- no code of the class (or of a same-file base) moves or re-places it
  (`.to`, `.cuda`, `.type_as`, `register_buffer`, `nn.Parameter`, `setattr`:
  also by name in a base's code),
  and the class does not override `_apply`, `to` or `cuda`; a base of another
  project file places nothing (`FileView.places_itself`);
- a method other than `__init__` combines it (arithmetic, a comparison, an
  argument of a `torch.*` function) with a tensor made from the method's
  inputs: a tensor method or torch function of a parameter, a submodule's
  output, a parameter annotated `torch.Tensor`, or a name bound to one;
- the project runs the class on an accelerator: the file puts something on
  one (`Places.accelerator_in_play`), or a project file that imports it
  (transitively) moves something to one (`FileView.on_accelerator`).

`fixable` says the store can become `self.register_buffer(NAME, ...,
persistent=False)`: a statement directly in `__init__`, after
`super().__init__()`, the only store of that attribute name in the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call, ClassInfo, Facts, Function, dotted_name
from torchlint.analysis.knowledge import SAME_PLACE_TENSOR_METHODS, Effect, Receiver, Returns, method, symbol
from torchlint.analysis.value_kinds import Kind
from torchlint.analysis.vocabulary import ALLOCATING_FACTORIES, DATA_CONSTRUCTORS

if TYPE_CHECKING:
    from torchlint.analysis.places import Places
    from torchlint.analysis.project import FileView
    from torchlint.analysis.values import Values

# Methods a module overrides to place its own tensors.
_PLACING_OVERRIDES = frozenset({"_apply", "to", "cuda"})
_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# Calls that make a tensor a parameter or a buffer (moved with the module).
_REGISTERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer"})
# Methods of a tensor that keep its dimensions and place (`squeeze` may leave a 0-dim tensor).
_KEEPS = SAME_PLACE_TENSOR_METHODS - {"squeeze"}
_TENSOR_NAMES = frozenset({"torch.Tensor", "torch.FloatTensor", "torch.LongTensor"})
_MAX_DEPTH = 6
_ANY = "*"  # a name set by `setattr`/`register_buffer` that we cannot read


@dataclass(frozen=True)
class CpuAttribute:
    """`self.<name> = <creation>` in `cls.__init__`, used with the inputs in `method`."""

    cls: ClassInfo
    name: str
    creation: Call
    assign: cst.Assign
    method: str
    fixable: bool


@dataclass(eq=False)
class _Access:
    """One `self.<attr>` in a method: the attribute node, and the method."""

    node: cst.Attribute
    fn: Function
    store: bool


class Attributes:
    def __init__(self, facts: Facts, values: Values, places: Places, project: Optional[FileView]) -> None:
        self.facts = facts
        self.values = values
        self.places = places
        self.project = project
        self._found: Optional[List[CpuAttribute]] = None
        self._by_name: Dict[int, Set[str]] = {}

    def cpu_tensors(self) -> List[CpuAttribute]:
        """The CPU tensors kept as plain attributes of this file's module classes
        that their methods combine with the inputs, where the project runs them
        on an accelerator (see the module's docstring)."""
        if self._found is None:
            self._found = []
            if not self.places.silenced:
                for name in sorted(self.values.module_classes()):
                    self._found.extend(self._of_class(self.facts.classes[name]))
        return self._found

    # -- one class --------------------------------------------------------------------------

    def _of_class(self, cls: ClassInfo) -> List[CpuAttribute]:
        if self.project is None or self.project.has_parameters(self.project.local(cls.name)) is not True:
            return []  # no parameters of its own: it may be a transform run on the CPU (data loading)
        methods = self._methods(cls, set())
        if methods is None:
            return []
        init = next((fn for fn in methods if fn.name == "__init__" and self._owner(fn) is cls.node), None)
        if init is None:
            return []
        accesses: Dict[str, List[_Access]] = {}
        for fn in methods:
            for access in self._accesses(fn):
                accesses.setdefault(access.node.attr.value, []).append(access)
        out = []
        for name, found in sorted(accesses.items()):
            attribute = self._cpu_attribute(cls, init, name, found)
            if attribute is not None:
                out.append(attribute)
        if out and not self._on_accelerator(cls):
            return []
        return out

    def _methods(self, cls: ClassInfo, seen: Set[str]) -> Optional[List[Function]]:
        """The functions of the class and of its same-file bases; None when one
        of them places tensors itself, or a base of another file may."""
        seen.add(cls.name)
        own = list(self.facts.functions_defined_in(cls.node))
        if any(fn.name in _PLACING_OVERRIDES for fn in own):
            return None
        for base in cls.bases:
            if isinstance(base, cst.Name) and base.value in self.facts.classes and base.value not in seen:
                more = self._methods(self.facts.classes[base.value], seen)
                if more is None:
                    return None
                own.extend(more)
                continue
            q = self.facts.qualname(base) or ""
            if q in _MODULE_BASES:
                continue
            if q.startswith("torch.nn."):
                return None  # a torch layer's subclass: its own buffers may have any name
            if self.project is None or self.project.places_itself(q) is not False:
                return None
        return own

    def _owner(self, fn: Function) -> Optional[cst.CSTNode]:
        parent = fn.scope.parent
        return parent.node if parent is not None else None

    def _accesses(self, fn: Function) -> List[_Access]:
        if not fn.params or any(dotted_name(d.decorator) in ("staticmethod", "classmethod") for d in fn.decorators):
            return []
        me = fn.params[0]
        out = []
        for use in self.facts.uses_under(fn.scope):
            parent = use.site.parent
            if use.node.value != me or not isinstance(parent, cst.Attribute) or parent.value is not use.node:
                continue
            holder = self.facts.parent_of(parent)
            store = (
                isinstance(holder, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.AsName, cst.CompFor))
                and getattr(holder, "target", None) is parent
                or isinstance(holder, cst.Element)
                or isinstance(holder, cst.For)
                and holder.target is parent
            )
            out.append(_Access(parent, fn, store))
        return out

    def _cpu_attribute(self, cls: ClassInfo, init: Function, name: str, found: List[_Access]) -> Optional[CpuAttribute]:
        creation: Optional[Tuple[Call, cst.Assign]] = None
        stores = 0
        for access in found:
            if not access.store:
                continue
            stores += 1
            assign = self._assign_of(access.node)
            made = self._cpu_factory(assign.value) if assign is not None else None
            if made is None or assign is None:
                return None  # stored something else, or by a tuple or `+=`
            if creation is None and access.fn is init:
                creation = (made, assign)
        if creation is None or self._replaced(cls, name, found):
            return None
        used = next((a.fn.name for a in found if not a.store and a.fn is not init and self._meets_input(a)), None)
        if used is None:
            return None
        call, assign = creation
        return CpuAttribute(cls, name, call, assign, used, stores == 1 and self._fixable(init, assign, name))

    def _assign_of(self, node: cst.Attribute) -> Optional[cst.Assign]:
        target = self.facts.parent_of(node)
        assign = self.facts.parent_of(target) if isinstance(target, cst.AssignTarget) else None
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            return assign
        return None

    def _cpu_factory(self, expr: cst.BaseExpression) -> Optional[Call]:
        """The allocating factory (through shape/dtype methods) that builds
        `expr` on the CPU, not as a 0-dim tensor; None otherwise."""
        creation = self.places.cpu_creation(expr)
        if creation is None:
            return None
        q = creation.qualname or ""
        args = creation.node.args
        if q in DATA_CONSTRUCTORS:
            data = args[0].value if args and args[0].keyword is None else None
            return creation if isinstance(data, (cst.List, cst.Tuple)) and data.elements else None
        if q not in ALLOCATING_FACTORIES or q.endswith("_like") or creation.has_star_kwargs:
            return None
        sizes = [a.value for a in args if a.keyword is None or a.keyword.value == "size"]
        if q.endswith("randint"):  # `randint(low, high, size)`: the size is the sequence
            sizes = [v for v in sizes if isinstance(v, (cst.Tuple, cst.List))]
        if not sizes or isinstance(sizes[0], (cst.Tuple, cst.List)) and not sizes[0].elements:
            return None  # `torch.zeros(())`: a 0-dim tensor
        return creation

    def _replaced(self, cls: ClassInfo, name: str, found: List[_Access]) -> bool:
        """Code of the class moves the attribute, registers it, or sets
        attributes by name (`setattr`, `register_buffer` of a computed name)."""
        for access in found:
            holder = self.facts.parent_of(access.node)
            if isinstance(holder, cst.Attribute):
                m = method(holder.attr.value)
                if m is not None and m.effects & {Effect.MOVES, Effect.MAY_MOVE}:
                    return True
            if isinstance(holder, cst.Arg):
                call = self.facts.call_of_arg(holder)
                if call is not None and (call.qualname in _REGISTERS or call.method == "register_buffer"):
                    return True
        named = set().union(*(self._named(c) for c in self._chain(cls, set())))
        return name in named or _ANY in named

    def _chain(self, cls: ClassInfo, seen: Set[str]) -> List[ClassInfo]:
        """The class and its same-file bases (transitively)."""
        seen.add(cls.name)
        out = [cls]
        for base in cls.bases:
            if isinstance(base, cst.Name) and base.value in self.facts.classes and base.value not in seen:
                out.extend(self._chain(self.facts.classes[base.value], seen))
        return out

    def _named(self, cls: ClassInfo) -> Set[str]:
        """Attribute names the class's code registers or sets by name
        (`register_buffer`, `register_parameter`, `setattr`); `_ANY` for a
        name we cannot read."""
        found = self._by_name.get(id(cls.node))
        if found is None:
            found = self._by_name[id(cls.node)] = set()
            for call in self.facts.calls:
                setattr_ = isinstance(call.node.func, cst.Name) and call.node.func.value == "setattr"
                if not (setattr_ or call.method in ("register_buffer", "register_parameter")):
                    continue
                if not any(scope.node is cls.node for scope in call.site.scope.chain()):
                    continue
                args = call.node.args
                key = args[1 if setattr_ else 0].value if len(args) > (1 if setattr_ else 0) else None
                value = key.evaluated_value if isinstance(key, cst.SimpleString) else None
                found.add(value if isinstance(value, str) else _ANY)
        return found

    # -- the use with the inputs ----------------------------------------------------------------

    def _meets_input(self, access: _Access) -> bool:
        """`self.<name>` (through shape/dtype methods) is an operand of arithmetic
        or a comparison, or an argument of a torch function, beside a tensor
        made from the method's inputs."""
        node: cst.BaseExpression = access.node
        parent = self.facts.parent_of(node)
        for _ in range(_MAX_DEPTH):
            if not isinstance(parent, cst.Attribute) or parent.attr.value not in _KEEPS:
                break
            outer = self.facts.parent_of(parent)
            if not isinstance(outer, cst.Call) or outer.func is not parent:
                break
            node, parent = outer, self.facts.parent_of(outer)
        fn = access.fn
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is node else parent.left
            return self._from_input(other, fn, 0)
        if isinstance(parent, cst.ComparisonTarget):
            parent = self.facts.parent_of(parent)
        if isinstance(parent, cst.Comparison):
            operands = [parent.left] + [c.comparator for c in parent.comparisons]
            return any(o is not node and self._from_input(o, fn, 0) for o in operands)
        if isinstance(parent, cst.Arg) and parent.value is node:
            call = self.facts.call_of_arg(parent)
            if call is None or not (call.qualname or "").startswith("torch.") or call.qualname in _REGISTERS:
                return False
            return any(a is not parent and self._from_input(a.value, fn, 0) for a in call.node.args)
        return False

    def _from_input(self, expr: cst.BaseExpression, fn: Function, depth: int) -> bool:
        """A tensor made from `fn`'s inputs or a submodule's output (evidently
        a tensor: a bare parameter may be a Python number)."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, cst.Name):
            return self._name_from_input(expr, fn, depth)
        if isinstance(expr, (cst.BinaryOperation,)):
            return self._from_input(expr.left, fn, depth + 1) or self._from_input(expr.right, fn, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self._from_input(expr.expression, fn, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._from_input(expr.value, fn, depth + 1)
        if not isinstance(expr, cst.Call):
            return False
        call = self.facts.call_for(expr)
        if call is None:
            return False
        q = call.qualname or ""
        if q.startswith("torch."):
            s = symbol(q)
            if s is not None and s.returns is not Returns.TENSOR:
                return False
            return any(self._from_input(a.value, fn, depth + 1) or self._param(a.value, fn) for a in call.node.args)
        if call.method is not None and call.receiver is not None and call.qualname is None:
            m = method(call.method)
            if m is None or m.returns not in (Returns.TENSOR, Returns.SAME):
                return self._submodule_call(call, fn)
            if m.effects & {Effect.MOVES, Effect.TO_HOST, Effect.MAY_MOVE}:
                return False
            receiver = call.receiver
            if self._param(receiver, fn):
                return m.on == frozenset({Receiver.TENSOR})  # only tensors have it: the parameter is one
            return self._from_input(receiver, fn, depth + 1)
        return False

    def _param(self, expr: cst.BaseExpression, fn: Function) -> bool:
        return isinstance(expr, cst.Name) and expr.value in fn.params[1:]

    def _name_from_input(self, expr: cst.Name, fn: Function, depth: int) -> bool:
        site = self.facts.site_of_node(expr)
        if site is None:
            return False
        reaching = self.facts.reaching(expr.value, site)
        if not reaching:
            return False
        for b in reaching:
            if b.kind is BindingKind.PARAM:
                if b.site.scope is not fn.scope or not self._annotated_tensor(b.target):
                    return False
            elif b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.index is not None or b.value is None:
                return False
            elif not self._from_input(b.value, fn, depth + 1):
                return False
        return True

    def _annotated_tensor(self, node: Optional[cst.CSTNode]) -> bool:
        annotation = node.annotation if isinstance(node, cst.Param) else None
        return annotation is not None and self.facts.qualname(annotation.annotation) in _TENSOR_NAMES

    def _submodule_call(self, call: Call, fn: Function) -> bool:
        """`self.<sub>(...)` where `__init__` makes `sub` a module (a layer, a
        module class of this file or the project)."""
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and fn.params):
            return False
        if func.value.value != fn.params[0]:
            return False
        owner = self._owner(fn)
        sub = func.attr.value
        for other in self.facts.functions_defined_in(owner):
            if other.name != "__init__" or not other.params:
                continue
            for access in self._accesses(other):
                if access.store and access.node.attr.value == sub:
                    assign = self._assign_of(access.node)
                    made = self.facts.call_for(assign.value) if assign is not None else None
                    if made is not None and self.values.call_kind(made) is Kind.MODULE:
                        return True
        return False

    # -- where it runs, and the fix -------------------------------------------------------------

    def _on_accelerator(self, cls: ClassInfo) -> bool:
        if self.places.accelerator_in_play():
            return True
        return self.project is not None and self.project.on_accelerator(self.project.local(cls.name))

    def _fixable(self, init: Function, assign: cst.Assign, name: str) -> bool:
        """The store is a statement of `__init__`'s own body, after its
        `super().__init__()`, and nothing else in the file stores `.<name>`."""
        body = init.node.body
        if not isinstance(body, cst.IndentedBlock):
            return False
        seen_super = False
        for stmt in body.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                if any(_super_init(s) for s in stmt.body):
                    seen_super = True
                if assign in stmt.body:
                    if not seen_super or len(stmt.body) != 1:
                        return False
                    break
        else:
            return False
        stores = 0
        for node, _ in self.facts.statements:
            targets: List[cst.BaseExpression] = []
            if isinstance(node, cst.Assign):
                targets = [t.target for t in node.targets]
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                targets = [node.target]
            for t in targets:
                for sub in _flatten(t):
                    if isinstance(sub, cst.Attribute) and sub.attr.value == name:
                        stores += 1
        return stores == 1


def _super_init(stmt: cst.BaseSmallStatement) -> bool:
    """`super().__init__(...)` or `super(Cls, self).__init__(...)`."""
    if not isinstance(stmt, cst.Expr) or not isinstance(stmt.value, cst.Call):
        return False
    func = stmt.value.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value == "__init__"
        and isinstance(func.value, cst.Call)
        and isinstance(func.value.func, cst.Name)
        and func.value.func.value == "super"
    )


def _flatten(target: cst.BaseExpression) -> List[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[cst.BaseExpression] = []
        for el in target.elements:
            out.extend(_flatten(el.value))
        return out
    return [target]
