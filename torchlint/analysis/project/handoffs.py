"""Which classes a module uses, and which modules it builds and hands them
(`ModuleSummary.uses`): the calls of a project class with, per argument, a
module the calling code builds and leaves where it is. The index asks it of
every file (`ProjectIndex.unmoved_callers`): a trainer class that keeps a
module argument is told whether every project call hands it a module that no
one moved.

A use is recorded for every dotted name (outside annotations) of which a part
is capitalised, its root expanded through the module's imports (an import
alias `as make` of a class still counts); `self.x` and `cls.x` are not. An
argument counts as built unmoved (`Handed`) only when it is a name its scope
binds once, to a call not under a `with` and given nothing that says device,
and reads only as the receiver of methods that leave a module where it is
(`.parameters()`, `.train()`); no nested function may mention it, and the
module never sets a default device. Anything else is not recorded: unknown.
"""

from __future__ import annotations

import ast
import re
from typing import Dict, List, Mapping, Optional, Set, Tuple

from torchlint.analysis.project.kinds import Handed, NameUse
from torchlint.analysis.project.tree_walk import all_nodes

# Methods of a module that leave it (and its parameters) where they are.
KEEPING_METHODS = frozenset(
    {
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "state_dict",
        "load_state_dict",
        "train",
        "eval",
        "zero_grad",
        "requires_grad_",
    }
)
_DEVICE_WORD = re.compile(r"device|cuda|gpu|accelerat|map_location|quantiz|load_in_", re.IGNORECASE)
_DEFAULT_DEVICE = re.compile(r"set_default_device|set_default_tensor_type")
_ANNOTATIONS = frozenset({"annotation", "returns"})
_SKIP = frozenset({"ctx", "type_comment", "kind"})
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def name_uses(tree: ast.Module, text: str, imports: Mapping[str, str]) -> Tuple[NameUse, ...]:
    """Every use of a capitalised dotted name in `tree` (see the module's docstring)."""
    return _Uses(tree, text, imports).run()


class _Scope:
    """One function's (or the module's) own names: where each is bound and read."""

    def __init__(self, node: ast.AST, parents: Dict[int, ast.AST]) -> None:
        self.stores: Dict[str, List[ast.AST]] = {}
        self.loads: Dict[str, List[ast.Name]] = {}
        self.shared: Set[str] = set()  # global/nonlocal, or mentioned in a nested scope
        body = [node.body] if isinstance(node, ast.Lambda) else list(node.body)  # type: ignore[attr-defined]
        if isinstance(node, _FUNCTION_SCOPES):
            args = node.args
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None:
                    self.stores.setdefault(a.arg, []).append(a)
        stack: List[ast.AST] = body
        while stack:
            n = stack.pop()
            if isinstance(n, _NESTED):
                self.shared.update(x.id for x in all_nodes(n) if isinstance(x, ast.Name))
                if not isinstance(n, ast.Lambda):
                    self.stores.setdefault(n.name, []).append(n)
                continue
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    self.loads.setdefault(n.id, []).append(n)
                else:
                    self.stores.setdefault(n.id, []).append(n)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                self.shared.update(n.names)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for alias in n.names:
                    self.stores.setdefault((alias.asname or alias.name).split(".")[0], []).append(n)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                self.stores.setdefault(n.name, []).append(n)
            for field in n._fields:
                if field in _SKIP:
                    continue
                value = getattr(n, field, None)
                if type(value) is list:
                    stack.extend(v for v in value if isinstance(v, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append(value)


class _Uses:
    def __init__(self, tree: ast.Module, text: str, imports: Mapping[str, str]) -> None:
        self.tree = tree
        self.imports = imports
        self.default_device = bool(_DEFAULT_DEVICE.search(text))
        self.parents: Dict[int, ast.AST] = {}
        self.scopes: Dict[int, _Scope] = {}

    def run(self) -> Tuple[NameUse, ...]:
        found: List[ast.AST] = []
        out: List[NameUse] = []
        stack: List[ast.AST] = [self.tree]
        parents = self.parents
        AST = ast.AST
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                parent = parents.get(id(node))
                if not (isinstance(parent, ast.Attribute) and parent.value is node):
                    found.append(node)
            if isinstance(node, ast.ClassDef) and node.decorator_list:
                out.append(NameUse(node.name))  # registered or wrapped: used elsewhere
            for field in _fields(type(node)):
                value = getattr(node, field, None)
                if type(value) is list:
                    for v in value:
                        if isinstance(v, AST):
                            parents[id(v)] = node
                            stack.append(v)
                elif isinstance(value, AST):
                    parents[id(value)] = node
                    stack.append(value)
        for node in found:
            name = dotted(node)
            if name is None or not self._capitalised(name):
                continue
            parent = parents.get(id(node))
            if isinstance(parent, ast.Call) and parent.func is node:
                out.append(NameUse(name, self._handed(parent)))
            else:
                out.append(NameUse(name))
        return tuple(out)

    def _capitalised(self, name: str) -> bool:
        root, _, rest = name.partition(".")
        if root in ("self", "cls"):
            return False
        expanded = self.imports.get(root, root) + ("." + rest if rest else "")
        return any(p[:1].isupper() for p in expanded.split("."))

    def _scope_of(self, node: ast.AST) -> Optional[ast.AST]:
        """The function (or module) whose own code `node` is; None: a class body."""
        parent = self.parents.get(id(node))
        while parent is not None:
            if isinstance(parent, _FUNCTION_SCOPES):
                return parent
            if isinstance(parent, ast.ClassDef):
                return None
            parent = self.parents.get(id(parent))
        return self.tree

    def _scope(self, node: ast.AST) -> _Scope:
        found = self.scopes.get(id(node))
        if found is None:
            found = self.scopes[id(node)] = _Scope(node, self.parents)
        return found

    def _handed(self, call: ast.Call) -> Optional[Tuple[Handed, ...]]:
        """The arguments of `call` that are modules built unmoved; None when the
        call takes `*`/`**` or its result may go anywhere."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        node = self._scope_of(call)
        if node is None:
            return None
        scope = self._scope(node)
        if not self._result_kept(call, scope):
            return None
        out = []
        keyed = [(i, a) for i, a in enumerate(call.args)] + [(k.arg, k.value) for k in call.keywords if k.arg]
        for key, value in keyed:
            if isinstance(value, ast.Name):
                built = self._built(value, scope)
                if built is not None:
                    out.append(Handed(key, built))
        return tuple(out)

    def _result_kept(self, call: ast.Call, scope: _Scope) -> bool:
        """What `call` returns is dropped, or only its methods are called."""
        parent = self.parents.get(id(call))
        if isinstance(parent, ast.Expr):
            return True
        if isinstance(parent, ast.Attribute) and self._method_call(parent):
            return True
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            name = parent.targets[0].id
            if name in scope.shared or len(scope.stores.get(name, ())) != 1:
                return False
            return all(self._method_call(self.parents.get(id(r))) for r in scope.loads.get(name, ()))
        return False

    def _method_call(self, attr: Optional[ast.AST], methods: Optional[frozenset[str]] = None) -> bool:
        """`attr` is `x.m` called at once (`x.m(...)`), `m` one of `methods` if given."""
        if not isinstance(attr, ast.Attribute) or (methods is not None and attr.attr not in methods):
            return False
        call = self.parents.get(id(attr))
        return isinstance(call, ast.Call) and call.func is attr

    def _built(self, arg: ast.Name, scope: _Scope) -> Optional[str]:
        name = arg.id
        if self.default_device or name in scope.shared:
            return None
        stores = scope.stores.get(name, ())
        if len(stores) != 1:
            return None
        assign = self.parents.get(id(stores[0]))
        if not isinstance(assign, ast.Assign) or assign.targets != [stores[0]]:
            return None
        value = assign.value
        callee = dotted(value.func) if isinstance(value, ast.Call) else None
        if callee is None or not isinstance(value, ast.Call) or self._says_device(value) or self._under_with(assign):
            return None
        for load in scope.loads.get(name, ()):
            if load is not arg and not self._method_call(self.parents.get(id(load)), KEEPING_METHODS):
                return None
        return callee

    def _says_device(self, call: ast.Call) -> bool:
        """The construction is handed something that names a device (or unpacked arguments)."""
        for kw in call.keywords:
            if kw.arg is None or _DEVICE_WORD.search(kw.arg):
                return True
        for n in ast.walk(call):
            if n is call.func:
                continue
            word = (
                n.id
                if isinstance(n, ast.Name)
                else n.attr
                if isinstance(n, ast.Attribute)
                else n.value
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
                else None
            )
            if isinstance(n, ast.Starred) or (word is not None and _DEVICE_WORD.search(word)):
                return True
        return False

    def _under_with(self, node: ast.AST) -> bool:
        parent = self.parents.get(id(node))
        while parent is not None and not isinstance(parent, (*_FUNCTION_SCOPES, ast.Module)):
            if isinstance(parent, (ast.With, ast.AsyncWith)):
                return True
            parent = self.parents.get(id(parent))
        return False


_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _fields(cls: type) -> Tuple[str, ...]:
    """A node type's fields that may hold nodes worth visiting (no annotations)."""
    found = _FIELDS.get(cls)
    if found is None:
        names = cls._fields  # type: ignore[attr-defined]
        found = _FIELDS[cls] = tuple(f for f in names if f not in _SKIP and f not in _ANNOTATIONS)
    return found


def dotted(expr: Optional[ast.AST]) -> Optional[str]:
    """`a.b.c` for a chain of names and attributes; None otherwise."""
    parts: List[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))
