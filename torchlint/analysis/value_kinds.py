"""What kind of value an expression holds: a module, a tensor, a loader, a
dataset, a device, an optimizer, a loss function, tokenizer output.

Kinds come from where a value is made (`nn.Linear(...)`, `DataLoader(...)`, a
same-file `nn.Module` subclass, `X.from_pretrained(...)`) and, for modules,
also from how a name is used: a name that is `.eval()`'d, `.parameters()`'d,
given `load_state_dict`, annotated `nn.Module` or wrapped in `DataParallel` is
a module whatever its class (`model = MLP()` with `MLP` imported from another
file of the project). A function parameter takes the kind every same-file
caller passes to it. The base of `Values` (values.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import (
    Binding,
    BindingKind,
    Call,
    Facts,
    Function,
    Scope,
    ScopeKind,
    Site,
    class_of,
    dotted_name,
    strip_methods,
)
from torchlint.analysis.knowledge import MODULE_SAME_KIND_METHODS
from torchlint.analysis.project.kinds import ClassKind, ValueKind
from torchlint.analysis.vocabulary import (
    COPIES,
    CPU_TENSOR_SOURCES,
    DATALOADER,
    DATASET_BASES,
    ITERABLE_DATASET_BASES,
    LEGACY_TENSOR_TYPES,
    MODEL_NAME,
    MODULE_ONLY_METHODS,
    NN_MODULE,
    NN_NON_MODULES,
    NON_MODEL_PRETRAINED,
    OPTIMIZER_PREFIX,
    PLACERS,
    TENSOR_DATASET,
    VARIABLE,
    WRAPPER_CLASSES,
)

if TYPE_CHECKING:
    from torchlint.analysis.project import FileView


class Kind(enum.Enum):
    """What an expression holds (`Values.expr_kind`, `call_kind`, `binding_kind`)."""

    MODULE = "module"
    TENSOR = "tensor"
    LOADER = "loader"
    DATASET = "dataset"
    DEVICE = "device"
    TOKENS = "tokens"
    TOKENIZER = "tokenizer"
    OPTIMIZER = "optimizer"
    LOSS_FN = "loss_fn"


# The members under their own names, as the analysis modules import them.
MODULE, TENSOR, LOADER, DATASET, DEVICE = Kind.MODULE, Kind.TENSOR, Kind.LOADER, Kind.DATASET, Kind.DEVICE


TOKENS, TOKENIZER, OPTIMIZER, LOSS_FN = Kind.TOKENS, Kind.TOKENIZER, Kind.OPTIMIZER, Kind.LOSS_FN


_SAME_KIND_METHODS = MODULE_SAME_KIND_METHODS


# What a call of a project class or function gives, in this module's kinds.
_PROJECT_KINDS = {
    ValueKind.MODULE: MODULE,
    ValueKind.DATASET: DATASET,
    ValueKind.ITERABLE_DATASET: DATASET,
    ValueKind.LOADER: LOADER,
}


class ForwardMethod(enum.Enum):
    """The method a model forward calls by name (`ModelCall.method`)."""

    FORWARD = "forward"
    GENERATE = "generate"


@dataclass(frozen=True)
class ModelCall:
    """A model forward: `model(x)`, `model.forward(x)`, `model.generate(...)`."""

    call: Call
    model: cst.BaseExpression  # the model expression (`model`, `self.net`)
    method: Optional[ForwardMethod]  # None: `model(x)`
    known: bool  # the callee is known to be a module (not only named like one)


def is_nn_layer(qualname: str) -> bool:
    """`torch.nn.Linear` and friends (a class in torch.nn)."""
    if not qualname.startswith("torch.nn.") or qualname.startswith(NN_NON_MODULES):
        return False
    return qualname.rsplit(".", 1)[-1][:1].isupper()


class ValueKinds:
    """Kinds of values in one file, memoised. `project`: the project index as
    this file asks it (classes and functions of other files), or None."""

    def __init__(self, facts: Facts, project: Optional[FileView] = None) -> None:
        self.facts = facts
        self.project = project
        self._kind_cache: Dict[int, Optional[Kind]] = {}
        self._class_groups: Optional[Dict[int, List[Optional[cst.ClassDef]]]] = None
        self._module_classes: Optional[Set[str]] = None
        self._dataset_classes: Optional[Dict[str, ClassKind]] = None
        self._used_as_module: Optional[Set[int]] = None
        self._callers: Optional[Dict[int, List[Call]]] = None
        self._param_kinds: Dict[int, Optional[Kind]] = {}
        self._model_calls: Dict[int, Optional[ModelCall]] = {}
        self._loss_calls: Dict[int, bool] = {}

    # -- same-file classes -------------------------------------------------------

    def _subclasses(self, roots: FrozenSet[str], extra: Callable[[str], bool] = lambda q: False) -> Set[str]:
        found: Set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, info in self.facts.classes.items():
                if name in found:
                    continue
                for base in info.bases:
                    q = self.facts.qualname(base)
                    if (q and (q in roots or extra(q))) or (isinstance(base, cst.Name) and base.value in found):
                        found.add(name)
                        changed = True
                        break
        return found

    def module_classes(self) -> Set[str]:
        """Classes defined in this file that subclass torch.nn.Module (transitively,
        also through a base class of another project file)."""
        if self._module_classes is None:
            self._module_classes = self._subclasses(
                NN_MODULE, lambda q: is_nn_layer(q) or self.project_class(q) is ClassKind.MODULE
            )
        return self._module_classes

    def dataset_classes(self) -> Dict[str, ClassKind]:
        """Same-file Dataset subclasses: name -> DATASET (map-style) or
        ITERABLE_DATASET (also through a base class of another project file)."""
        if self._dataset_classes is None:
            iterable = self._subclasses(
                ITERABLE_DATASET_BASES, lambda q: self.project_class(q) is ClassKind.ITERABLE_DATASET
            )
            mapped = self._subclasses(
                DATASET_BASES, lambda q: self.project_class(q) in (ClassKind.DATASET, ClassKind.ITERABLE_DATASET)
            )
            out = {n: ClassKind.DATASET for n in mapped}
            out.update({n: ClassKind.ITERABLE_DATASET for n in iterable})
            self._dataset_classes = out
        return self._dataset_classes

    # -- classes and functions of other project files ----------------------------------

    def project_class(self, qualname: str) -> Optional[ClassKind]:
        """What the project index says class `qualname` (as this file names it) is."""
        return self.project.class_kind(qualname) if self.project is not None else None

    def project_call_kind(self, qualname: str) -> Optional[Kind]:
        """The kind of a call of a project class or function (`Net()` with `Net`
        imported from another file, `build_model(cfg)`, `get_loader(...)`)."""
        if self.project is None:
            return None
        cls = self.project.class_kind(qualname)
        value = ValueKind.of_class(cls) if cls is not None else self.project.returns(qualname)
        return _PROJECT_KINDS.get(value) if value is not None else None

    def project_function(self, call: Call) -> bool:
        """A call of a function of another project file whose return kind the
        index knows: what it returns is known, not how it was built."""
        q = call.qualname
        return (
            self.project is not None
            and q is not None
            and self.project.class_kind(q) is None
            and self.project.returns(q) is not None
        )

    def opaque_call(self, call: Call) -> bool:
        """A call whose kind comes from the project index but whose result cannot
        be read from the call itself (where it lives, what its arguments do): a
        project function's return, an instance of a project class whose code
        (or a base's) may place it or that wraps a model it is handed, or of a
        loader class with its own `__init__`.
        Read such a result as a same-file helper's: its place is unknown."""
        q = call.qualname
        if self.project is None or q is None:
            return False
        cls = self.project.class_kind(q)
        if cls is None:
            return self.project.returns(q) is not None
        if cls is ClassKind.LOADER:
            return not self.project.builds_loader(q)
        return self.project.places_itself(q) is not False or self._wraps_model(call)

    def _wraps_model(self, call: Call) -> bool:
        """`Wrapper(model, ...)`: handed a module (or a value named like a model),
        whose place the instance may take."""
        for arg in call.node.args:
            name = dotted_name(arg.value)
            if name is None:
                continue
            if MODEL_NAME.search(name.rsplit(".", 1)[-1]) or self.expr_kind(arg.value, call.site) == MODULE:
                return True
        return False

    # -- kinds -------------------------------------------------------------------

    def call_kind(self, call: Call) -> Optional[Kind]:
        q = call.qualname
        if (q in VARIABLE or q in COPIES) and call.positional:
            return self.expr_kind(call.positional[0].value, call.site)
        if q:
            if q in CPU_TENSOR_SOURCES or q.rsplit(".", 1)[-1] in LEGACY_TENSOR_TYPES and q.startswith("torch."):
                return TENSOR
            if q in DATALOADER:
                return LOADER
            if q in TENSOR_DATASET:
                return DATASET
            if q == "torch.device":
                return DEVICE
            if q.startswith(OPTIMIZER_PREFIX) and q.rsplit(".", 1)[-1][:1].isupper() and ".lr_scheduler" not in q:
                return OPTIMIZER
            if is_nn_layer(q):
                return LOSS_FN if q.endswith("Loss") else MODULE
            if q.startswith("torchvision.models.") and q.rsplit(".", 1)[-1][:1].islower():
                return MODULE
            if q == "timm.create_model":
                return MODULE
            if q.startswith("torchvision.datasets."):
                return DATASET
            project = self.project_call_kind(q)
            if project is not None:
                return project
        func = call.node.func
        if isinstance(func, cst.Name) and not self._shadowed_local(func.value, call.site):
            if func.value in self.module_classes():
                return MODULE
            if func.value in self.dataset_classes():
                return DATASET
        if call.method == "from_pretrained":
            recv = dotted_name(call.receiver) or ""
            return TOKENIZER if NON_MODEL_PRETRAINED.search(recv) else MODULE
        if call.method in _SAME_KIND_METHODS and call.receiver is not None:
            inner = self.expr_kind(call.receiver, call.site)
            if inner in (MODULE, TENSOR, TOKENS):
                return inner
        if call.method is None and isinstance(func, cst.Name) and self.is_tokenizer_call(call):
            return TOKENS
        if isinstance(func, cst.Name) and call.qualname is None:
            fn = self.local_function(call)
            if fn is not None:
                return self._returns_kind(fn)  # `model = build(cfg)`, `loader = make_loader(ds)`
        return None

    def _shadowed_local(self, name: str, site: Site) -> bool:
        """A class name rebound in the calling scope (not the class any more)."""
        return (
            any(
                b.kind not in (BindingKind.CLASS, BindingKind.IMPORT)
                for b in self.facts.scoped_bindings(name, site.scope)
            )
            and name not in self.facts.classes
        )

    def is_tokenizer_call(self, call: Call) -> bool:
        """`tokenizer(..., return_tensors="pt")` on a name bound to a tokenizer."""
        arg = call.keyword("return_tensors")
        if arg is None or not isinstance(arg.value, cst.SimpleString) or arg.value.evaluated_value != "pt":
            return False
        func = call.node.func
        if isinstance(func, cst.Name):
            return (
                any(self.binding_kind(b) == TOKENIZER for b in self.facts.visible_bindings(func.value, call.site.scope))
                or "tokenizer" in func.value.lower()
            )
        return "tokenizer" in (dotted_name(func) or "").lower()

    def binding_kind(self, b: Binding) -> Optional[Kind]:
        if b.kind == BindingKind.PARAM:
            return self.param_kind(b)
        if b.kind in (
            BindingKind.CLASS,
            BindingKind.DEF,
            BindingKind.IMPORT,
            BindingKind.FOR,
            BindingKind.COMPREHENSION,
            BindingKind.EXCEPT,
            BindingKind.WITH,
        ):
            return MODULE if id(b) in self.used_as_module() else None
        if id(b) in self.used_as_module():
            return MODULE
        if b.value is None:
            return None
        if b.index is not None:
            return None
        return self.expr_kind(b.value, b.site)

    def expr_kind(self, expr: cst.BaseExpression, site: Site) -> Optional[Kind]:
        key = id(expr)
        if key in self._kind_cache:
            return self._kind_cache[key]
        self._kind_cache[key] = None  # cycle guard
        kind: Optional[Kind] = None
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            kind = self.call_kind(call) if call else None
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            kind = self._name_kind(expr, site)
        self._kind_cache[key] = kind
        return kind

    def _attribute_owners(self, site: Site) -> Optional[List[Optional[cst.ClassDef]]]:
        """Where the `self.x` a method at `site` reads may be bound: in its class or a
        same-file class related to it by inheritance (either way, or through a
        common base), or outside every class (None). None: `site` is in no class."""
        cls = class_of(site.scope)
        if cls is None:
            return None
        if self._class_groups is None:
            self._class_groups = _inheritance_groups(self.facts)
        return [*self._class_groups.get(id(cls), [cls]), None]

    def _name_kind(self, expr: cst.BaseExpression, site: Site) -> Optional[Kind]:
        name = dotted_name(expr)
        if not name:
            return None
        bindings = self.bindings_for(name, site)
        kinds = {self.binding_kind(b) for b in bindings}
        kinds.discard(None)
        if len(kinds) == 1:
            return kinds.pop()
        return None

    def bindings_for(self, name: str, site: Site) -> List[Binding]:
        """The bindings a read of `name` at `site` may see: earlier ones of its
        scope (any, for an enclosing scope), every one of a dotted attribute."""
        if "." in name:
            owners = self._attribute_owners(site) if name.startswith("self.") else None
            if owners is not None:
                return self.facts.attribute_bindings(name, owners)
            return list(self.facts.bindings_of(name))
        return [
            b
            for b in self.facts.visible_bindings(name, site.scope)
            if (
                b.site.order <= site.order
                and not (b.site.stmt is site.stmt and b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN))
            )
            or b.site.scope is not site.scope
            or _in_same_loop(b.site, site)
        ]

    # -- modules by use ------------------------------------------------------------

    def used_as_module(self) -> Set[int]:
        """ids of bindings whose name is used as only an nn.Module can be."""
        if self._used_as_module is None:
            found: Set[int] = set()
            for call in self.facts.calls:
                target = None
                if call.method in MODULE_ONLY_METHODS and call.receiver is not None:
                    if (
                        call.method in ("train", "eval")
                        and call.node.args
                        and not _bool_literal(call.node.args[0].value)
                    ):
                        continue  # `trainer.train(dataset)`: not nn.Module.train
                    target = call.receiver
                elif (call.qualname in PLACERS or _last(call) in WRAPPER_CLASSES) and call.positional:
                    target = call.positional[0].value
                name = dotted_name(target) if target is not None else None
                if name:
                    for b in self.bindings_for(name, call.site):
                        found.add(id(b))
            for b in self.facts.bindings:
                if self._annotated_module(b):
                    found.add(id(b))
            found -= self._constructors(found)
            self._used_as_module = found
        return self._used_as_module

    def _constructors(self, modules: Set[int]) -> Set[int]:
        """ids of bindings whose call builds a module: `model = Net(envs)` (or
        `Net(envs).to(device)`) where `model` is then used as a module. `Net` is a
        class (or factory) handed in, even when annotated `nn.Module`: calling it
        is a construction, not a forward."""
        built: Set[int] = set()
        for b in self.facts.bindings:
            if b.kind != BindingKind.ASSIGN or b.index is not None or id(b) not in modules:
                continue
            value = strip_methods(b.value, _SAME_KIND_METHODS)
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                built.add(id(value))
        out: Set[int] = set()
        for call in self.facts.calls:
            if id(call.node) in built and isinstance(call.node.func, cst.Name):
                out.update(id(c) for c in self.bindings_for(call.node.func.value, call.site))
        return out

    def _annotated_module(self, b: Binding) -> bool:
        """`model: nn.Module` (or a same-file module class) as a parameter or an
        annotated assignment."""
        annotation = None
        if b.kind == BindingKind.PARAM and isinstance(b.target, cst.Param):
            annotation = b.target.annotation
        elif b.kind == BindingKind.ANNASSIGN and isinstance(b.site.stmt, cst.AnnAssign):
            annotation = b.site.stmt.annotation
        if annotation is None:
            return False
        ann = annotation.annotation
        q = self.facts.qualname(ann)
        if q and (q in NN_MODULE or is_nn_layer(q)):
            return True
        if isinstance(ann, cst.SimpleString):  # `model: "ReservoirSNN"`, a forward reference
            return ann.evaluated_value in self.module_classes()
        return isinstance(ann, cst.Name) and ann.value in self.module_classes()

    # -- parameters and same-file functions ---------------------------------------------

    def local_function(self, call: Call) -> Optional[Function]:
        """The same-file function a call runs: `f(...)` for a def visible by name,
        `self.f(...)` for a method of the enclosing class."""
        func = call.node.func
        if isinstance(func, cst.Name):
            bs = self.facts.visible_bindings(func.value, call.site.scope)
            if len(bs) != 1 or bs[0].kind != BindingKind.DEF:
                return None
            return self.facts.function_for_def(bs[0].target)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = next((s for s in call.site.scope.chain() if s.kind == ScopeKind.CLASS), None)
            if cls is None:
                return None
            return self.facts.function_named_in(func.attr.value, cls)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            # `diffusion.sample_timesteps(n)` where `diffusion = Diffusion(...)` of a same-file class
            cls_node = self.instance_class(func.value.value, call.site)
            if cls_node is not None:
                return self.facts.function_named_in_node(func.attr.value, cls_node)
        return None

    def instance_qualname(self, name: str, site: Site) -> Optional[str]:
        """The qualified name of what every binding of `name` reaching `site` calls
        to make it (`meter = metrics.DiceAverage(n)`: `utils.metrics.DiceAverage`):
        for a class of another file, what its methods run on; None when a binding
        is something else, or they differ."""
        found: Optional[str] = None
        bindings = self.facts.reaching(name, site)
        for b in bindings:
            if b.kind != BindingKind.ASSIGN or b.index is not None or not isinstance(b.value, cst.Call):
                return None
            made = self.facts.call_for(b.value)
            q = made.qualname if made is not None else None
            if q is None or (found is not None and q != found):
                return None
            found = q
        return found

    def instance_class(self, name: str, site: Site) -> Optional[cst.ClassDef]:
        """The same-file class every binding of `name` reaching `site` instantiates
        (`name = Diffusion(...)`); None when any binding is something else."""
        found: Optional[cst.ClassDef] = None
        bindings = self.facts.reaching(name, site)
        for b in bindings:
            if b.kind != BindingKind.ASSIGN or b.index is not None or not isinstance(b.value, cst.Call):
                return None
            target = self.constructed_class(b.value, b.site.scope)
            if target is None or (found is not None and target is not found):
                return None
            found = target
        return found

    def constructed_class(self, node: cst.Call, scope: Scope) -> Optional[cst.ClassDef]:
        """The same-file class a call in `scope` constructs (`Trainer(...)`), if any."""
        if not isinstance(node.func, cst.Name):
            return None
        classes = self.facts.visible_bindings(node.func.value, scope)
        if len(classes) != 1 or classes[0].kind != BindingKind.CLASS:
            return None
        target = classes[0].target
        return target if isinstance(target, cst.ClassDef) else None

    def callers(self, fn: Function) -> List[Call]:
        """Same-file calls that run `fn`."""
        if self._callers is None:
            self._callers = {}
            for call in self.facts.calls:
                if isinstance(call.node.func, (cst.Name, cst.Attribute)):
                    found = self.local_function(call)
                    if found is not None:
                        self._callers.setdefault(id(found), []).append(call)
        return list(self._callers.get(id(fn), []))

    def argument_for(self, call: Call, fn: Function, param: str) -> Optional[cst.BaseExpression]:
        """The expression `call` passes for `fn`'s parameter `param` (None: not
        passed, or hidden behind *args/**kwargs)."""
        node = fn.node
        if not isinstance(node, cst.FunctionDef):
            return None
        kw = call.keyword(param)
        if kw is not None:
            return kw.value
        if any(a.star for a in call.node.args):
            return None
        params = [p.name.value for p in list(node.params.posonly_params) + list(node.params.params)]
        if (
            params
            and params[0] in ("self", "cls")
            and fn.scope.parent is not None
            and fn.scope.parent.kind == ScopeKind.CLASS
        ):
            params = params[1:]
        if param not in params:
            return None
        i = params.index(param)
        pos = call.positional
        return pos[i].value if i < len(pos) else None

    def passed_arguments(self, b: Binding) -> Optional[List[Tuple[cst.BaseExpression, Site]]]:
        """For a parameter: what every same-file caller passes for it (and where);
        None when it has no caller or one passes nothing we can read."""
        fn = self.facts.function_of(b.site.scope) if b.kind == BindingKind.PARAM else None
        callers = self.callers(fn) if fn is not None else []
        passed = []
        for c in callers:
            arg = self.argument_for(c, fn, b.name) if fn is not None else None
            if arg is None:
                return None
            passed.append((arg, c.site))
        return passed or None

    def param_kind(self, b: Binding) -> Optional[Kind]:
        """A parameter's kind: annotated `nn.Module`, used as a module, or the
        kind every same-file caller passes."""
        key = id(b)
        if key in self._param_kinds:
            return self._param_kinds[key]
        self._param_kinds[key] = None
        kind: Optional[Kind] = MODULE if id(b) in self.used_as_module() else None
        if kind is None:
            fn = self.facts.function_of(b.site.scope)
            if fn is not None:
                kinds = set()
                callers = self.callers(fn)
                for c in callers:
                    arg = self.argument_for(c, fn, b.name)
                    kinds.add(self.expr_kind(arg, c.site) if arg is not None else None)
                if callers and len(kinds) == 1:
                    kind = kinds.pop()
        self._param_kinds[key] = kind
        return kind

    def _returns_kind(self, fn: Function) -> Optional[Kind]:
        returns = self.facts.returns_of(fn)
        kinds = {self.expr_kind(r.value, s) if r.value is not None else None for r, s in returns}
        return kinds.pop() if len(kinds) == 1 else None


def _in_same_loop(binding: Site, use: Site) -> bool:
    """A later binding inside a loop that also holds the use reaches it on the next iteration."""
    if binding.scope is not use.scope or use.loop is None:
        return False
    return any(loop.contains(binding.order) for loop in use.loop.chain())


def _bool_literal(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value in ("True", "False")


def _last(call: Call) -> str:
    return (call.qualname or dotted_name(call.node.func) or "").rsplit(".", 1)[-1]


def _inheritance_groups(facts: Facts) -> Dict[int, List[Optional[cst.ClassDef]]]:
    """Each same-file class (by node id) with every class connected to it through
    same-file bases: the classes whose instances may share `self` attributes."""
    parent: Dict[int, int] = {}
    nodes: Dict[int, cst.ClassDef] = {}

    def root(key: int) -> int:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for info in facts.classes.values():
        nodes[id(info.node)] = info.node
        parent.setdefault(id(info.node), id(info.node))
        for base in info.bases:
            found = facts.classes.get(base.value) if isinstance(base, cst.Name) else None
            if found is not None:
                parent.setdefault(id(found.node), id(found.node))
                parent[root(id(info.node))] = root(id(found.node))
    members: Dict[int, List[Optional[cst.ClassDef]]] = {}
    for key, node in nodes.items():
        members.setdefault(root(key), []).append(node)
    return {key: members[root(key)] for key in nodes}
