"""The cheap first pass: one file's text to its `ModuleSummary`, with Python's
`ast` (about ten times cheaper than LibCST, and no positions are needed).

What it records, syntax only, names as written (the index resolves them):

- imports (absolute and relative, at any level, as the facts do) and star imports;
- module-level classes: bases, whether they define `__init__`, whether they
  place anything, whether their own code builds parameters;
- module-level functions: how they guard grad (a decorator, a decorator
  factory, a `@contextmanager`, a function returning `torch.no_grad()`), what
  their returns evidently are (the callee of a returned call), which
  parameters they move to a device or hand on, whether they train;
- module-level assignments of a name or a call of one (`no_grad = torch.no_grad`).

Nothing is guessed: a return that is not a call (or a name bound once to
one) makes the function's returns unknown, a decorator that does anything
else is not a guard.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from torchlint.analysis.knowledge import (
    FRESH_KEEPING_METHODS,
    HOST_TENSOR_COPIES,
    HOST_VALUE_READS,
    MODULE_SAME_KIND_METHODS,
    TENSOR_WRAPPERS,
    allocates_on_cpu,
)
from torchlint.analysis.project.guarded_calls import guarded_calls
from torchlint.analysis.project.handoffs import dotted, name_uses
from torchlint.analysis.project.import_names import record_import
from torchlint.analysis.project.import_uses import import_uses
from torchlint.analysis.project.items import item_work
from torchlint.analysis.project.kinds import (
    AssignSummary,
    ClassSummary,
    FunctionSummary,
    GuardNeed,
    MethodBinding,
    MethodSummary,
    ModuleSummary,
    Pass,
)
from torchlint.analysis.project.result_passes import result_passes
from torchlint.analysis.project.tree_walk import all_nodes, push_children
from torchlint.analysis.vocabulary import (
    CLOCKS,
    CPU_STRING,
    DEVICE_CONTEXTS,
    DEVICE_NAME,
    DEVICE_STRING,
    GRAD_USERS,
    ITER_WRAPPERS,
    MOVE_METHODS,
    NN_CONTAINER_LAYERS,
    NN_NON_MODULES,
    NO_GRAD_CONTEXTS,
    SET_GRAD_ENABLED,
    STATELESS_LAYER,
)

# Methods that hand back the receiver's kind (`Net().to(device)` is still a Net).
SAME_KIND_METHODS = MODULE_SAME_KIND_METHODS - {"share_memory"}
CONTEXT_MANAGER_DECORATORS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})
_OPT_NAME = re.compile(r"^(opt|optimi[sz]er)(_\w+)?$|^\w+_opt$")
# Text that a class which places something must contain (a cheap pre-check of `_places`).
_PLACING_TEXT = re.compile(r"\.(" + "|".join(sorted(MOVE_METHODS)) + r")\b|\bdevice\s*=")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Text that a class whose methods read a tensor on the host must contain (a cheap pre-check).
_HOST_READ_TEXT = re.compile(r"\.(" + "|".join(sorted(HOST_VALUE_READS)) + r")\s*\(")
# Text that a class whose methods read a clock must contain (a cheap pre-check).
_CLOCK_TEXT = re.compile(r"\b(" + "|".join(sorted({c.rsplit(".", 1)[-1] for c in CLOCKS})) + r")\s*\(")
# Text that a module which moves something to an accelerator must contain (a cheap pre-check).
_ACCELERATOR_TEXT = re.compile(r"\.(cuda|to)\b|device\s*=")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
Needs = Tuple[GuardNeed, ...]


def summarize(text: str) -> ModuleSummary:
    """The summary of one module's source text (`parsed=False` if it does not parse)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return ModuleSummary(parsed=False)
    try:
        return _Module(tree, text).summary()
    except RecursionError:  # absurdly nested code: know nothing about it
        return ModuleSummary(parsed=False)


def _root(expr: Optional[ast.AST]) -> Optional[str]:
    """`x` for `x`, `x[0]`, `x.y`, `x.items()`, `x.to(d)` (as helpers.root_name)."""
    while expr is not None:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, (ast.Subscript, ast.Attribute, ast.Starred)):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            return None
    return None


def _accelerates(tree: ast.Module, text: str) -> bool:
    """The module's code moves something to an accelerator: `.cuda()`,
    `.to(<a device>)`, or `device=` an accelerator string (as
    `Places.accelerator_in_play` reads one file, from its text alone)."""
    if not _ACCELERATOR_TEXT.search(text):
        return False
    for node in all_nodes(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and dotted(func.value) != "torch":
            return True
        if isinstance(func, ast.Attribute) and func.attr == "to":
            if any(_names_accelerator(a) for a in node.args[:1]):
                return True
            if any(k.arg == "device" and _names_accelerator(k.value) for k in node.keywords):
                return True
        elif any(k.arg == "device" and _accelerator_string(k.value) for k in node.keywords):
            return True
    return False


def _accelerator_string(expr: ast.AST) -> bool:
    """`"cuda"`, `"cuda:0"`, `"mps"`, or `torch.device(...)` of one."""
    if isinstance(expr, ast.Call) and dotted(expr.func) == "torch.device" and expr.args:
        expr = expr.args[0]
    return (
        isinstance(expr, ast.Constant) and isinstance(expr.value, str) and bool(DEVICE_STRING.match(repr(expr.value)))
    )


def _names_accelerator(expr: ast.AST) -> bool:
    """A move's target that is an accelerator or a device variable: not
    `"cpu"`, not `x.device` of a tensor (only `self.device`), not a dtype."""
    if _accelerator_string(expr):
        return True
    if isinstance(expr, ast.Call) and dotted(expr.func) == "torch.device":
        return bool(expr.args) and not (
            isinstance(expr.args[0], ast.Constant) and CPU_STRING.match(repr(expr.args[0].value))
        )
    name = dotted(expr)
    if name is None:
        return False
    head, _, last = name.rpartition(".")
    if last == "device" and head not in ("", "self"):
        return False  # `.to(x.device)`: where a tensor already is
    return bool(DEVICE_NAME.search(last))


def _target_names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for el in target.elts:
            yield from _target_names(el)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


# Fields that never hold a node worth visiting (expression contexts, type comments).
def own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's (or lambda's) own body: nested functions,
    lambdas and classes are yielded but not entered."""
    stack: List[ast.AST] = [fn.body] if isinstance(fn, ast.Lambda) else list(fn.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            push_children(node, stack)


class _Module:
    def __init__(self, tree: ast.Module, text: str = "") -> None:
        self.tree = tree
        self.text = text
        self.lines = text.splitlines()
        self.imports: Dict[str, str] = {}
        self.stars: List[str] = []
        self.classes: List[ClassSummary] = []
        self.functions: List[ast.AST] = []
        self.assigns: List[AssignSummary] = []

    def summary(self) -> ModuleSummary:
        for stmt in self._module_statements(self.tree.body):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._import(stmt)
            elif isinstance(stmt, ast.ClassDef):
                self.classes.append(self._class(stmt))
            elif isinstance(stmt, _FUNCTIONS):
                self.functions.append(stmt)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                self._assign(stmt)
        functions = tuple(_Function(fn, self).summary() for fn in self.functions)
        return ModuleSummary(
            imports=tuple(sorted(self.imports.items())),
            star_imports=tuple(self.stars),
            classes=tuple(self.classes),
            functions=functions,
            assigns=tuple(self.assigns),
            uses=name_uses(self.tree, self.text, self.imports),
            import_uses=import_uses(self.tree),
            guarded_calls=guarded_calls(self.tree),
            result_passes=result_passes(self.tree, self.qualify),
            accelerates=_accelerates(self.tree, self.text),
        )

    def _module_statements(self, body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
        """Module-level statements, also inside module-level if/try/with blocks."""
        for stmt in body:
            yield stmt
            if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.AsyncWith)):
                yield from self._module_statements(stmt.body)
                yield from self._module_statements(getattr(stmt, "orelse", []))
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                yield from self._module_statements(stmt.body)  # type: ignore[attr-defined]
                for handler in stmt.handlers:  # type: ignore[attr-defined]
                    yield from self._module_statements(handler.body)
                yield from self._module_statements(stmt.orelse)  # type: ignore[attr-defined]
                yield from self._module_statements(stmt.finalbody)  # type: ignore[attr-defined]

    # -- imports -------------------------------------------------------------------------

    def _import(self, node: Union[ast.Import, ast.ImportFrom]) -> None:
        record_import(node, self.imports, self.stars)

    def qualify(self, name: Optional[str]) -> Optional[str]:
        """A dotted name through this module's absolute imports (`nn.Module` ->
        "torch.nn.Module"); None when its root is not imported so."""
        if not name:
            return None
        root, _, rest = name.partition(".")
        target = self.imports.get(root)
        if target is None or target.startswith("."):
            return None
        return f"{target}.{rest}" if rest else target

    # -- classes and assignments ---------------------------------------------------------------

    def _class(self, node: ast.ClassDef) -> ClassSummary:
        bases = []
        for base in node.bases:
            if isinstance(base, ast.Subscript):  # `Dataset[int]`: a generic alias of Dataset
                base = base.value
            name = dotted(base)
            if name:
                bases.append(name)
        defines_init = any(isinstance(s, _FUNCTIONS) and s.name == "__init__" for s in node.body)
        forward = next((s for s in node.body if isinstance(s, _FUNCTIONS) and s.name == "forward"), None)
        parameters, submodules = _Parameters(node, self).result()
        init = next((s for s in node.body if isinstance(s, _FUNCTIONS) and s.name == "__init__"), None)
        init_params = None
        if init is not None and init.args.vararg is None:
            init_params = tuple(a.arg for a in [*init.args.posonlyargs, *init.args.args][1:])
        return ClassSummary(
            node.name,
            tuple(bases),
            defines_init,
            self._places(node),
            forward_container=_returns_container(forward) if forward is not None else None,
            parameters=parameters,
            submodules=submodules,
            builds_layers=self._builds_layers(node),
            init_params=init_params,
            item_work=item_work(node, self.qualify),
            methods=self._methods(node),
        )

    def _methods(self, node: ast.ClassDef) -> Tuple[MethodSummary, ...]:
        """Its methods but `__init__`, each by name (an override hides its bases'
        method), summarised when the class's lines read a tensor on the host
        (`.item()`, `.tolist()`) or a clock: what the index asks of methods."""
        end = getattr(node, "end_lineno", None) or len(self.lines)
        text = "\n".join(self.lines[node.lineno - 1 : end]) if self.lines else None
        read = text is None or bool(_HOST_READ_TEXT.search(text) or _CLOCK_TEXT.search(text))
        return tuple(self._method(s, read) for s in node.body if isinstance(s, _FUNCTIONS) and s.name != "__init__")

    def _method(self, node: Union[ast.FunctionDef, ast.AsyncFunctionDef], summarise: bool) -> MethodSummary:
        """A method's summary (its host reads and what it hands on); only its name
        when not `summarise`d or when nothing is bound to its first parameter."""
        decorators = {dotted(d) for d in node.decorator_list}
        binding = (
            MethodBinding.STATIC
            if "staticmethod" in decorators
            else MethodBinding.CLASS
            if "classmethod" in decorators
            else MethodBinding.INSTANCE
        )
        positional = [*node.args.posonlyargs, *node.args.args]
        if not summarise or (binding is not MethodBinding.STATIC and not positional):
            return MethodSummary(binding, FunctionSummary(node.name, (), ()))
        bound = positional[0].arg if binding is not MethodBinding.STATIC else None
        function = _Function(node, self, bound, self_calls=binding is MethodBinding.INSTANCE)
        return MethodSummary(binding, function.calls_summary())

    def _builds_layers(self, node: ast.ClassDef) -> bool:
        """Its own code calls a torch.nn layer that has parameters, or `nn.Parameter`."""
        for n in all_nodes(node):
            if not isinstance(n, ast.Call):
                continue
            q = self.qualify(dotted(n.func)) or ""
            last = q.rsplit(".", 1)[-1]
            if q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                return True
            if (
                q.startswith("torch.nn.")
                and not q.startswith(NN_NON_MODULES)
                and last[:1].isupper()
                and last not in NN_CONTAINER_LAYERS
                and not STATELESS_LAYER.match(last)
            ):
                return True
        return False

    def _places(self, node: ast.ClassDef) -> bool:
        """Code in the class moves something or passes `device=` (walked only
        when its lines mention a move or a device keyword)."""
        end = getattr(node, "end_lineno", None) or len(self.lines)
        text = "\n".join(self.lines[node.lineno - 1 : end]) if self.lines else None
        if text is not None and not _PLACING_TEXT.search(text):
            return False
        return _places(node)

    def _assign(self, node: Union[ast.Assign, ast.AnnAssign]) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not names or len(names) != len(targets):
            return
        options = _value_options(node.value)
        if options is None:
            return
        for name in names:
            self.assigns.append(AssignSummary(name, options))


def _tensor_branch(test: ast.AST, params: Set[str]) -> Optional[bool]:
    """For `if isinstance(val, torch.Tensor):` on a parameter: True (its body is
    what a call handed a tensor runs), False for `if not isinstance(...)` (its
    `else`); None for any other test (which branch a call takes is not known)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _tensor_branch(test.operand, params)
        return None if inner is None else not inner
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0], ast.Name)
        and test.args[0].id in params
        and (dotted(test.args[1]) or "").rsplit(".", 1)[-1] == "Tensor"
    ):
        return True
    return None


_CONTAINERS = (ast.List, ast.Tuple, ast.Dict, ast.ListComp, ast.DictComp)


def _returns_container(fn: ast.AST) -> bool:
    """Every `return` of `fn` hands back a list, tuple or dict: a literal, a
    `list(...)`/`tuple(...)`/`dict(...)` call, or a name bound in `fn` only to one."""
    nodes = list(own_nodes(fn))
    bound: Dict[str, List[ast.AST]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
            if isinstance(node.target, ast.Name):
                bound.setdefault(node.target.id, []).append(node)

    def container(value: Optional[ast.AST], depth: int = 0) -> bool:
        if isinstance(value, _CONTAINERS):
            return True
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            return value.func.id in ("list", "tuple", "dict")
        if isinstance(value, ast.Name) and depth < 2:
            values = bound.get(value.id, [])
            return bool(values) and all(container(v, depth + 1) for v in values)
        return False

    returns = [n for n in nodes if isinstance(n, ast.Return)]
    return bool(returns) and all(container(r.value) for r in returns)


def _places(node: ast.ClassDef) -> bool:
    """Code in the class moves something (`.to(d)`, `.cuda()`) or passes
    `device=` (as places.class_places asks of a same-file class)."""
    for n in all_nodes(node):
        if not isinstance(n, ast.Call):
            continue
        func = n.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in MOVE_METHODS
            and (n.args or n.keywords or func.attr != "to")
        ):
            return True
        if any(kw.arg == "device" for kw in n.keywords):
            return True
    return False


class _Parameters:
    """Does a class's own code build parameters? `nn.Parameter(...)` or
    `register_parameter` does, and so does a torch.nn layer other than a
    parameter-free one (activations, pooling, dropout, losses); buffers and
    tensors do not. An attribute the class calls (`self.block(x)`), iterates
    or hands to code other than a torch op holds whatever it was given:
    another class's instance is recorded for the index to ask about, anything
    else makes the answer unknown."""

    def __init__(self, node: ast.ClassDef, module: "_Module") -> None:
        self.node = node
        self.module = module
        self.called: Set[str] = set()
        self.submodules: List[str] = []

    def result(self) -> Tuple[Optional[bool], Tuple[str, ...]]:
        stores: List[Tuple[str, ast.AST]] = []
        for n in ast.walk(self.node):
            if isinstance(n, ast.Call):
                callee = dotted(n.func) or ""
                last = callee.rsplit(".", 1)[-1]
                if last in ("Parameter", "UninitializedParameter", "register_parameter"):
                    return True, ()
                if last in ("add_module", "register_module", "setattr", "__setattr__"):
                    return None, ()
                self._note_called(n.func)
                q = self.module.qualify(callee) or callee
                if not q.startswith("torch.") or "checkpoint" in q:  # torch ops take tensors and sizes
                    for arg in n.args:
                        self._note_called(arg.value if isinstance(arg, ast.Starred) else arg)
            elif isinstance(n, (ast.For, ast.comprehension)):
                self._note_called(n.iter)
            elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for target in targets:
                    for attr in _self_attributes(target):
                        stores.append((attr, n.value))
        unknown = False
        for attr, value in stores:
            answer = self._value(value, attr in self.called)
            if answer is True:
                return True, ()
            unknown = unknown or answer is None
        return (None, ()) if unknown else (False, tuple(self.submodules))

    def _note_called(self, expr: ast.AST) -> None:
        while isinstance(expr, (ast.Subscript, ast.Starred)):
            expr = expr.value
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Attribute):
            expr = expr.value  # `self.block.forward(x)`
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            self.called.add(expr.attr)

    def _value(self, value: ast.AST, called: bool) -> Optional[bool]:
        """True: a layer with parameters; False: none (or a value never called); None: unknown."""
        if isinstance(value, ast.IfExp):
            answers = {self._value(value.body, called), self._value(value.orelse, called)}
            return True if True in answers else (None if None in answers else False)
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in SAME_KIND_METHODS
        ):
            value = value.func.value
        if not isinstance(value, ast.Call):
            return None if called else False
        callee = dotted(value.func)
        q = self.module.qualify(callee) or callee or ""
        if q.startswith("torch.nn.") and not q.startswith(NN_NON_MODULES) and q.rsplit(".", 1)[-1][:1].isupper():
            return False if STATELESS_LAYER.match(q.rsplit(".", 1)[-1]) else True
        if q.startswith("torch.") or not called:
            return False  # a tensor, or a value the class never calls
        if callee is None:
            return None
        self.submodules.append(callee)
        return False


def _self_attributes(target: ast.AST) -> Iterator[str]:
    """`x` for a `self.x = ...` target (also inside a tuple)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for el in target.elts:
            yield from _self_attributes(el)
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        yield target.attr


def _value_options(expr: Optional[ast.AST]) -> Optional[Tuple[Tuple[str, bool], ...]]:
    """(dotted, called) for `a.b`, `a.b(...)`, and each branch of `x if c else y`."""
    if isinstance(expr, ast.IfExp):
        body, orelse = _value_options(expr.body), _value_options(expr.orelse)
        return body + orelse if body is not None and orelse is not None else None
    if isinstance(expr, ast.Call):
        name = dotted(expr.func)
        return ((name, True),) if name else None
    name = dotted(expr)
    return ((name, False),) if name else None


class _Function:
    """One module-level function's summary (or a method's, with `bound` the
    name of its `self` or `cls`: left out of its parameters)."""

    def __init__(self, node: ast.AST, module: _Module, bound: Optional[str] = None, self_calls: bool = False) -> None:
        self.node = node
        self.module = module
        self.bound = bound
        self.self_calls = self_calls  # `self.m(...)` calls a method of the instance's class
        self._occasional_ids: Optional[Set[int]] = None
        args = node.args  # type: ignore[attr-defined]
        self.params = tuple(a.arg for a in list(args.posonlyargs) + list(args.args))
        if bound is not None:
            self.params = self.params[1:]
        self.keywords = self.params + tuple(a.arg for a in args.kwonlyargs)
        self.returns: List[ast.Return] = []
        self.yields = False
        self.calls: List[ast.Call] = []
        self.withs: List[Union[ast.With, ast.AsyncWith]] = []
        self.bindings: Dict[str, List[Optional[ast.AST]]] = {}  # name -> values bound to it
        self.derived_from: List[Tuple[List[str], Optional[ast.AST]]] = []  # (targets, value)
        self.assigned: Set[int] = set()  # ids of the values of plain assignments (`x = v`)
        self.nested: Dict[str, ast.AST] = {}
        self.locals: Set[str] = set(self.keywords)
        self.when_grad_off: Set[int] = set()  # ids of returns under `if torch.is_inference_mode_enabled():`
        self.branches: List[ast.AST] = []  # `if` statements and expressions, `try` statements
        self.fors: List[Union[ast.For, ast.AsyncFor]] = []
        for n in own_nodes(node):
            handle = _HANDLERS.get(type(n))
            if handle is not None:
                handle(self, n)

    def _return(self, n: ast.Return) -> None:
        self.returns.append(n)

    def _yield(self, n: ast.AST) -> None:
        self.yields = True

    def _call(self, n: ast.Call) -> None:
        self.calls.append(n)

    def _with(self, n: Union[ast.With, ast.AsyncWith]) -> None:
        self.withs.append(n)
        for item in n.items:
            if item.optional_vars is not None:
                self._bind(item.optional_vars, item.context_expr)

    def _assign(self, n: ast.Assign) -> None:
        self.assigned.add(id(n.value))
        for t in n.targets:
            self._bind(t, n.value)

    def _annassign(self, n: Union[ast.AnnAssign, ast.NamedExpr]) -> None:
        if n.value is not None:
            self.assigned.add(id(n.value))
            self._bind(n.target, n.value)

    def _loop(self, n: Union[ast.For, ast.AsyncFor, ast.comprehension]) -> None:
        self._bind(n.target, n.iter)
        if not isinstance(n, ast.comprehension):
            self.fors.append(n)

    def _def(self, n: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> None:
        self.nested[n.name] = n
        self.locals.add(n.name)

    def _import(self, n: Union[ast.Import, ast.ImportFrom]) -> None:
        self.module._import(n)  # a function-level import binds as the facts record it

    def _branch(self, n: ast.AST) -> None:
        self.branches.append(n)

    def _if(self, n: ast.If) -> None:
        self.branches.append(n)
        if self._grad_already_off(n.test):
            self.when_grad_off.update(id(r) for b in n.body for r in ast.walk(b) if isinstance(r, ast.Return))

    def _grad_already_off(self, test: ast.AST) -> bool:
        """`if torch.is_inference_mode_enabled():` (possibly `and`-ed with more)."""
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        return any(
            isinstance(p, ast.Call) and self.module.qualify(dotted(p.func)) == "torch.is_inference_mode_enabled"
            for p in parts
        )

    def _bind(self, target: ast.AST, value: Optional[ast.AST]) -> None:
        names = list(_target_names(target))
        self.locals.update(names)
        single = isinstance(target, ast.Name)
        for name in names:
            self.bindings.setdefault(name, []).append(value if single else None)
        self.derived_from.append((names, value))

    def summary(self) -> FunctionSummary:
        return replace(
            self.calls_summary(),
            guard_called=self._guard_called(),
            guard_bare=_bare_guard(self.node, self),
            returns=self._returns(),
            allocates=self._allocates(),
            iterates=self._iterates(),
        )

    def _iterates(self) -> Tuple[str, ...]:
        """The parameters a `for` of the body iterates on every call: `for x in loader:`,
        through `enumerate(...)`/`tqdm(...)` (their first argument)."""
        occasional = self._occasional()
        found = set()
        for loop in self.fors:
            expr: ast.AST = loop.iter
            while isinstance(expr, ast.Call) and expr.args and self._wraps_iterable(expr):
                expr = expr.args[0]
            if not isinstance(expr, ast.Name) or id(loop) in occasional:
                continue
            if expr.id in self.keywords and expr.id not in self.bindings:
                found.add(expr.id)  # (a parameter bound again, `loader = DataLoader(...)`, is another value)
        return tuple(sorted(found))

    def _wraps_iterable(self, call: ast.Call) -> bool:
        name = dotted(call.func)
        if name is None or name.split(".")[0] in self.locals:
            return False
        return name in ITER_WRAPPERS or (self.module.qualify(name) or "") in ITER_WRAPPERS

    def calls_summary(self) -> FunctionSummary:
        """What its calls do: moves, passes, training, host reads (no guards,
        returns or allocations)."""
        name = self.node.name  # type: ignore[attr-defined]
        derived = self._derived()
        computed = self._computed(derived)
        occasional = self._occasional()
        moves: Set[str] = set()
        passes: Set[Pass] = set()
        callees: Set[str] = set()
        trains = times = False
        syncs: Set[Tuple[str, str]] = set()
        for call in self.calls:
            func = call.func
            callee = dotted(func)
            always = id(call) not in occasional
            times = times or (callee is not None and self.module.qualify(callee) in CLOCKS)
            if (
                always
                and isinstance(func, ast.Attribute)
                and func.attr in _HOST_READS
                and not call.args
                and not call.keywords
            ):
                for param in self._read_params(func.value, computed):
                    syncs.add((param, func.attr))
            if isinstance(func, ast.Attribute):
                if func.attr in MOVE_METHODS and not (func.attr == "to" and not call.args and not call.keywords):
                    root = _root(func.value)
                    if root in derived:
                        moves.add(derived[root])
                if func.attr == "backward" or (func.attr == "step" and _optimizer_name(dotted(func.value))):
                    trains = True
            if callee is None:
                continue
            if self.module.qualify(callee) in GRAD_USERS:
                trains = True
            head, _, attr = callee.partition(".")
            if head == self.bound and attr and self.self_calls:
                callee = "self." + attr  # a method of the instance's class (or of what `self.x` holds)
            elif head in self.locals or head in ("self", self.bound):
                continue  # a local value or its method: nothing the index can name
            else:
                callees.add(callee)
            for i, arg in enumerate(call.args):
                if isinstance(arg, ast.Starred):
                    break
                root = _root(arg)
                if root in derived:
                    passes.add(Pass(callee, i, derived[root], always))
            for kw in call.keywords:
                root = _root(kw.value)
                if kw.arg is not None and root in derived:
                    passes.add(Pass(callee, kw.arg, derived[root], always))
        return FunctionSummary(
            name=name,
            params=self.params,
            keywords=self.keywords,
            moves=tuple(sorted(moves)),
            passes=tuple(sorted(passes, key=lambda p: (p.callee, str(p.position), p.param, p.always))),
            trains=trains,
            callees=tuple(sorted(callees)),
            syncs=tuple(sorted(syncs)),
            times=times,
        )

    def _occasional(self) -> Set[int]:
        """Ids of the nodes that run only on some calls: in a branch of an `if`
        (statement or expression), in a `try` statement's handlers, or after a
        top-level `if` that may return or raise (`if not verbose: return`). The
        branch of `if isinstance(val, torch.Tensor):` that a tensor takes runs on
        every call handed one. Computed once per function."""
        if self._occasional_ids is not None:
            return self._occasional_ids
        found: Set[int] = set()
        params = set(self.keywords)
        for n in self.branches:
            parts: List[ast.AST]
            if isinstance(n, (ast.If, ast.IfExp)):
                body: List[ast.AST] = list(n.body) if isinstance(n.body, list) else [n.body]
                orelse: List[ast.AST] = list(n.orelse) if isinstance(n.orelse, list) else [n.orelse]
                taken = _tensor_branch(n.test, params)
                parts = orelse if taken is True else body if taken is False else body + orelse
            else:
                parts = list(getattr(n, "handlers", []))
            for part in parts:
                found.update(id(x) for x in all_nodes(part))
        body = getattr(self.node, "body", [])
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.If) and any(isinstance(x, (ast.Return, ast.Raise)) for x in all_nodes(stmt)):
                for later in body[i + 1 :]:
                    found.update(id(x) for x in all_nodes(later))
                break
        self._occasional_ids = found
        return found

    def _computed(self, derived: Dict[str, str]) -> Dict[str, str]:
        """`derived`, plus names computed from those with tensor operations
        (`inter = torch.sum(a * b)`, `dice = (2 * inter + 1) / (union + 1)`): name ->
        the parameter. Only for host reads: a value computed from an argument is
        not the argument, so a move of it moves nothing."""
        computed = dict(derived)
        for _ in range(3):
            changed = False
            for names, value in self.derived_from:
                if len(names) != 1 or names[0] in computed or value is None:
                    continue
                param = next(self._read_params(value, computed), None)
                if param is not None:
                    computed[names[0]] = param
                    changed = True
            if not changed:
                break
        return computed

    def _read_params(self, expr: ast.AST, derived: Dict[str, str]) -> Iterator[str]:
        """The parameters whose values `expr` computes with tensor operations
        (`torch.eq(y_true, y_pred).sum()`), so that a host read of `expr` reads them.
        The result of any other function (`assd(a, b)`, a project helper) is not
        followed: what it returns is not known to be the argument's tensor."""
        if isinstance(expr, ast.Name):
            if expr.id in derived:
                yield derived[expr.id]
        elif isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
            yield from self._read_params(expr.value, derived)
        elif isinstance(expr, ast.BinOp):
            yield from self._read_params(expr.left, derived)
            yield from self._read_params(expr.right, derived)
        elif isinstance(expr, ast.UnaryOp):
            yield from self._read_params(expr.operand, derived)
        elif isinstance(expr, ast.Compare):
            for part in [expr.left, *expr.comparators]:
                yield from self._read_params(part, derived)
        elif isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr not in _HOST_COPIES:
                yield from self._read_params(func.value, derived)
            if (self.module.qualify(dotted(func)) or "").startswith("torch."):
                for arg in [*expr.args, *(kw.value for kw in expr.keywords)]:
                    yield from self._read_params(arg, derived)

    def _derived(self) -> Dict[str, str]:
        """Names holding a parameter or a part of it: name -> the parameter. A host
        copy (`y = y.cpu().numpy()`) holds no part of the device value."""
        derived = {p: p for p in self.keywords}
        for _ in range(3):
            changed = False
            for names, value in self.derived_from:
                root = _root(value)
                if root not in derived or _host_copy(value):
                    continue
                for n in names:
                    if n not in derived:
                        derived[n] = derived[root]
                        changed = True
            if not changed:
                break
        return derived

    # -- returns -------------------------------------------------------------------------------

    def _returns(self) -> Optional[Tuple[str, ...]]:
        if self.yields or not self.returns:
            return None
        out = []
        for r in self.returns:
            source = self._source(r.value, 0)
            if source is None:
                return None
            out.append(source)
        return tuple(out)

    def _source(self, expr: Optional[ast.AST], depth: int) -> Optional[str]:
        while (
            isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_KIND_METHODS
        ):
            expr = expr.func.value
        if isinstance(expr, ast.Call):
            return dotted(expr.func)
        if isinstance(expr, ast.Name) and depth < 3 and expr.id not in self.keywords:
            values = self.bindings.get(expr.id, [])
            if len(values) == 1 and values[0] is not None:
                return self._source(values[0], depth + 1)
        return None

    # -- fresh CPU allocations --------------------------------------------------------------------

    def _allocates(self) -> Optional[Tuple[str, ...]]:
        """Each return's factory when every `return` hands back a tensor freshly
        allocated on the CPU (as TL104 reads a same-file helper's returns); None
        otherwise, or when a decorator other than torch's or functools' may change
        what it returns."""
        if self.yields or not self.returns or not self._plain_decorators():
            return None
        placed = self._under_device_context()
        out = []
        for r in sorted(self.returns, key=lambda r: (r.lineno, r.col_offset)):
            value: Optional[ast.AST] = r.value
            if isinstance(value, ast.Name):
                values = self.bindings.get(value.id, [])
                if value.id in self.keywords or len(values) != 1 or id(values[0]) not in self.assigned:
                    return None
                value = values[0]
            factory = self._fresh_factory(value, placed)
            if factory is None:
                return None
            out.append(factory)
        return tuple(out)

    def _fresh_factory(self, expr: Optional[ast.AST], placed: Set[int]) -> Optional[str]:
        """The allocating factory `expr` is, through shape/dtype methods, wrappers
        (`nn.Parameter(t)`) and torch ops on a fresh tensor (`torch.tril(torch.ones(n, n))`)."""
        for _ in range(8):
            if not isinstance(expr, ast.Call) or id(expr) in placed:
                return None
            func = expr.func
            name = dotted(func)
            q = None if name is None or name.split(".")[0] in self.locals else self.module.qualify(name)
            if q in TENSOR_WRAPPERS and expr.args:
                expr = expr.args[0]
                continue
            if (
                isinstance(func, ast.Attribute)
                and func.attr in FRESH_KEEPING_METHODS
                and isinstance(func.value, ast.Call)
            ):
                expr = func.value
                continue
            if allocates_on_cpu(q, [k.arg for k in expr.keywords]):
                return q
            if (
                q is not None
                and q.startswith("torch.")
                and q.count(".") == 1
                and expr.args
                and isinstance(expr.args[0], ast.Call)
                and not any(k.arg == "device" for k in expr.keywords)
            ):
                expr = expr.args[0]
                continue
            return None
        return None

    def _under_device_context(self) -> Set[int]:
        """Ids of the nodes inside `with torch.device(...):` (factories there allocate on it)."""
        placed: Set[int] = set()
        for w in self.withs:
            if any(
                isinstance(item.context_expr, ast.Call)
                and self.module.qualify(dotted(item.context_expr.func)) in DEVICE_CONTEXTS
                for item in w.items
            ):
                placed.update(id(n) for stmt in w.body for n in ast.walk(stmt))
        return placed

    def _plain_decorators(self) -> bool:
        """Every decorator is torch's or functools' (`@torch.no_grad()`, `@lru_cache`)."""
        for d in self.node.decorator_list:  # type: ignore[attr-defined]
            name = self.module.qualify(dotted(d.func if isinstance(d, ast.Call) else d)) or ""
            if not name.startswith(("torch.", "functools.")):
                return False
        return True

    # -- guards ---------------------------------------------------------------------------------

    def _guard_called(self) -> Optional[Needs]:
        """`f(...)` guards: a @contextmanager whose every yield is inside a
        guarding `with`, a factory returning a guard, or one returning a
        decorator that guards."""
        decorators = self.node.decorator_list  # type: ignore[attr-defined]
        if any(self.module.qualify(dotted(d)) in CONTEXT_MANAGER_DECORATORS for d in decorators):
            return _guarded_yields(self.node.body, self.module)  # type: ignore[attr-defined]
        if self.yields or not self.returns:
            return None
        needs: List[GuardNeed] = []
        for r in self.returns:
            # `return torch.no_grad()`: a guard object (a returned name is one only
            # when it is a nested decorator: `return decorate`).
            found = guard_needs(r.value, self.module) if isinstance(r.value, (ast.Call, ast.IfExp)) else None
            if found is None:
                found = self._returned_decorator(r.value)
            if found is None or any(n.ref.split(".")[0] in self.locals for n in found):
                return None  # a local value (`return make(x)`, `fn(...)`): not a module-level name
            needs.extend(found)
        return tuple(needs)

    def _returned_decorator(self, value: Optional[ast.AST]) -> Optional[Needs]:
        """`return decorate` (a nested def that guards what it decorates) or
        `return lambda fn: torch.no_grad()(fn)`."""
        if isinstance(value, ast.Lambda):
            return _bare_guard(value, None, self.module)
        if isinstance(value, ast.Name) and value.id in self.nested:
            inner = self.nested[value.id]
            return _bare_guard(inner, _Function(inner, self.module))
        return None


_HANDLERS: Dict[type, Callable[[_Function, Any], None]] = {
    ast.Return: _Function._return,
    ast.Yield: _Function._yield,
    ast.YieldFrom: _Function._yield,
    ast.Call: _Function._call,
    ast.With: _Function._with,
    ast.AsyncWith: _Function._with,
    ast.Assign: _Function._assign,
    ast.AnnAssign: _Function._annassign,
    ast.NamedExpr: _Function._annassign,
    ast.For: _Function._loop,
    ast.AsyncFor: _Function._loop,
    ast.comprehension: _Function._loop,
    ast.FunctionDef: _Function._def,
    ast.AsyncFunctionDef: _Function._def,
    ast.Import: _Function._import,
    ast.ImportFrom: _Function._import,
    ast.If: _Function._if,
    ast.IfExp: _Function._branch,
    ast.Try: _Function._branch,
}


# Tensor methods that read a value on the host (a device tensor's read waits for the device).
_HOST_READS = frozenset({"item", "tolist"})
_HOST_COPIES = HOST_TENSOR_COPIES | HOST_VALUE_READS  # cpu, numpy, item, tolist


def _host_copy(expr: Optional[ast.AST]) -> bool:
    """`x.detach().cpu().numpy()`, `x.tolist()`: the chain copies its receiver to the host."""
    while isinstance(expr, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in _HOST_COPIES:
                return True
            expr = expr.func
        else:
            expr = expr.value
    return False


def _optimizer_name(name: Optional[str]) -> bool:
    last = (name or "").rsplit(".", 1)[-1].lower()
    return bool(last) and ("optim" in last or bool(_OPT_NAME.match(last)))


def guard_needs(expr: Optional[ast.AST], module: _Module) -> Optional[Needs]:
    """An expression that is a grad guard object (usable as `with e:` or `@e`)
    on conditions: `torch.no_grad()` and `torch.set_grad_enabled(False)` on
    none (`()`), `(A if c else B)()` on both branches, a project name (`ctx`,
    `helpers.no_grad()`) on that name being one (the index decides)."""
    if isinstance(expr, ast.IfExp):
        body, orelse = guard_needs(expr.body, module), guard_needs(expr.orelse, module)
        return body + orelse if body is not None and orelse is not None else None
    if isinstance(expr, ast.Call):
        if module.qualify(dotted(expr.func)) in SET_GRAD_ENABLED:
            first = expr.args[0] if expr.args else None
            return () if isinstance(first, ast.Constant) and first.value is False else None
        return _callable_needs(expr.func, module)
    name = dotted(expr)
    if name is None:
        return None
    return () if module.qualify(name) in NO_GRAD_CONTEXTS else (GuardNeed(name, False),)


def _callable_needs(func: ast.AST, module: _Module) -> Optional[Needs]:
    """`torch.no_grad` (called), or each branch of `a if c else b` (called)."""
    if isinstance(func, ast.IfExp):
        body, orelse = _callable_needs(func.body, module), _callable_needs(func.orelse, module)
        return body + orelse if body is not None and orelse is not None else None
    name = dotted(func)
    if name is None:
        return None
    return () if module.qualify(name) in NO_GRAD_CONTEXTS else (GuardNeed(name, True),)


def _applier_needs(func: ast.AST, module: _Module) -> Optional[Needs]:
    """What applied to a function guards it: a guard object (`torch.no_grad()`)
    or a name used bare as a decorator (`torch.no_grad(fn)`)."""
    if isinstance(func, ast.Call):
        return guard_needs(func, module)
    name = dotted(func)
    if name is None:
        return None
    return () if module.qualify(name) in NO_GRAD_CONTEXTS else (GuardNeed(name, False),)


def _strongest(found: Sequence[Optional[Needs]]) -> Optional[Needs]:
    """Of several candidate guards (the items of one `with`, nested `with`s),
    one that holds unconditionally, else the first one (if it does not hold,
    the code counts as unguarded: never a guard by mistake)."""
    candidates = [f for f in found if f is not None]
    if not candidates:
        return None
    return () if any(f == () for f in candidates) else candidates[0]


def _bare_guard(node: ast.AST, fn: Optional[_Function], module: Optional[_Module] = None) -> Optional[Needs]:
    """`node` (a def or lambda) used as a decorator guards the function it is
    given: it returns `guard(f)`, or a wrapper that calls `f` inside a guarding
    `with` (or is itself decorated with a guard)."""
    module = module or (fn.module if fn is not None else None)
    if module is None:
        return None
    args = node.args  # type: ignore[attr-defined]
    positional = list(args.posonlyargs) + list(args.args)
    if not positional:
        return None
    param = positional[0].arg
    if isinstance(node, ast.Lambda):
        return _guarded_result(node.body, param, None, module)
    assert fn is not None
    if fn.yields or not fn.returns:
        return None
    needs: List[GuardNeed] = []
    guarded = False
    for r in fn.returns:
        if id(r) in fn.when_grad_off and isinstance(r.value, ast.Name) and r.value.id == param:
            continue  # already in inference mode: handed back as it is, still guarded
        found = _guarded_result(r.value, param, fn, module)
        if found is None:
            return None
        guarded = True
        needs.extend(found)
    return tuple(needs) if guarded else None


def _guarded_result(value: Optional[ast.AST], param: str, fn: Optional[_Function], module: _Module) -> Optional[Needs]:
    if (
        isinstance(value, ast.Call)
        and len(value.args) == 1
        and not value.keywords
        and isinstance(value.args[0], ast.Name)
        and value.args[0].id == param
    ):
        return _applier_needs(value.func, module)
    if fn is not None and isinstance(value, ast.Name) and value.id in fn.nested:
        return _guarded_wrapper(fn.nested[value.id], param, module)
    return None


def _guarded_wrapper(wrapper: ast.AST, param: str, module: _Module) -> Optional[Needs]:
    """A nested def whose every call of `param` sits inside a guarding `with`,
    or that is itself decorated with a guard (`@torch.no_grad()`)."""
    decorators = [
        guard_needs(d, module)
        for d in wrapper.decorator_list  # type: ignore[attr-defined]
        if isinstance(d, ast.Call) and module.qualify(dotted(d.func)) != "functools.wraps"
    ]
    calls = _guarded_calls(wrapper.body, param, module)  # type: ignore[attr-defined]
    return _strongest([calls] + decorators)


def _with_needs(node: Union[ast.With, ast.AsyncWith], module: _Module) -> Optional[Needs]:
    return _strongest([guard_needs(item.context_expr, module) for item in node.items])


def _walk_guarded(body: Sequence[ast.stmt], module: _Module) -> Iterator[Tuple[ast.AST, Optional[Needs]]]:
    """Every node of a body (nested scopes not entered) with the needs of the
    guarding `with` around it (None: none)."""
    stack: List[Tuple[ast.AST, Optional[Needs]]] = [(s, None) for s in reversed(body)]
    while stack:
        node, needs = stack.pop()
        yield node, needs
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, (ast.With, ast.AsyncWith)):
            inner = _strongest([needs, _with_needs(node, module)])
            stack.extend((item, needs) for item in reversed(node.items))
            stack.extend((s, inner) for s in reversed(node.body))
            continue
        stack.extend((c, needs) for c in reversed(list(ast.iter_child_nodes(node))))


def _guarded_calls(body: Sequence[ast.stmt], param: str, module: _Module) -> Optional[Needs]:
    """Every call of `param` in `body` is inside a guarding `with`: their needs."""
    needs: List[GuardNeed] = []
    seen = False
    for node, around in _walk_guarded(body, module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == param:
            if around is None:
                return None
            seen = True
            needs.extend(around)
    return tuple(needs) if seen else None


def _guarded_yields(body: Sequence[ast.stmt], module: _Module) -> Optional[Needs]:
    """Every `yield` in `body` is inside a guarding `with`: their needs."""
    needs: List[GuardNeed] = []
    seen = False
    for node, around in _walk_guarded(body, module):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            if around is None:
                return None
            seen = True
            needs.extend(around)
    return tuple(needs) if seen else None
