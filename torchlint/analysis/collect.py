"""`collect_facts`: the one visitor that records a module's facts in source
order (import aliases, scopes, bindings, name reads, calls, loops, `with` and
`if` blocks, statements, parents) into a `Facts`.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple, Union

import libcst as cst

from torchlint.analysis.facts import (
    Binding,
    BindingKind,
    Call,
    ClassInfo,
    Facts,
    Function,
    Loop,
    NameUse,
    Part,
    Scope,
    ScopeKind,
    Site,
    dotted_name,
)
from torchlint.analysis.walk import own_method, walk


def _import_name(node: Union[cst.Attribute, cst.Name]) -> str:
    return dotted_name(node) or ""


def _target_names(target: cst.BaseExpression) -> List[Tuple[str, Optional[int], cst.CSTNode]]:
    """Names bound by an assignment target: [(name, tuple index or None, node)]."""
    if isinstance(target, (cst.Name, cst.Attribute)):
        name = dotted_name(target)
        return [(name, None, target)] if name else []
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[Tuple[str, Optional[int], cst.CSTNode]] = []
        for i, el in enumerate(target.elements):
            value = el.value
            if isinstance(el, cst.StarredElement):
                value = el.value
            for name, _, node in _target_names(value):
                out.append((name, i, node))
        return out
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


class _Collector(cst.CSTVisitor):
    """The single pass. Keeps stacks of scopes, loops, withs, ifs, statements and parents."""

    def __init__(self, facts: Facts) -> None:
        self.f = facts
        self.order = 0
        self.parents: List[cst.CSTNode] = []
        self.scopes: List[Scope] = []
        self.loops: List[Loop] = []
        self.withs: Tuple[cst.With, ...] = ()  # tuples: every Site shares them as they are
        self.if_stack: Tuple[cst.If, ...] = ()
        self.stmts: List[cst.CSTNode] = []
        self.region: Tuple[Tuple[cst.CSTNode, Part], ...] = ()
        self.region_owners: List[int] = []  # ids of the nodes that opened each region entry
        self.store_names: Set[int] = set()  # ids of Name nodes that are binding targets
        self._dispatch_cache: Dict[
            type, Tuple[bool, Optional[Callable[..., object]], Optional[Callable[..., object]]]
        ] = {}

    # -- plumbing --------------------------------------------------------

    def site(self) -> Site:
        parents = self.parents
        return Site(
            self.scopes[-1],
            self.loops[-1] if self.loops else None,
            self.withs,
            self.stmts[-1] if self.stmts else None,
            parents[-2] if len(parents) > 1 else None,
            self.order,
            self.if_stack,
            self.region,
        )

    def _dispatch(self, cls: type) -> Tuple[bool, Optional[Callable[..., object]], Optional[Callable[..., object]]]:
        # (is a statement, visit_<Type> or None, leave_<Type> or None), per node type:
        # CSTVisitor's own on_visit/on_leave build the method name on every node.
        visit = own_method(type(self), "visit_" + cls.__name__)
        leave = own_method(type(self), "leave_" + cls.__name__)
        entry = (
            issubclass(cls, (cst.BaseSmallStatement, cst.BaseCompoundStatement)),
            visit.__get__(self) if visit is not None else None,
            leave.__get__(self) if leave is not None else None,
        )
        self._dispatch_cache[cls] = entry
        return entry

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.order += 1
        if self.parents:
            self.f._parent[id(node)] = self.parents[-1]
        self.parents.append(node)
        is_stmt, visit, _ = self._dispatch_cache.get(type(node)) or self._dispatch(type(node))
        if is_stmt:
            self.stmts.append(node)
            site = self.site()
            self.f.statements.append((node, site))
            self.f._site_by_stmt[id(node)] = site
        return visit is None or visit(node) is not False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        is_stmt, _, leave = self._dispatch_cache.get(type(original_node)) or self._dispatch(type(original_node))
        if leave is not None:
            leave(original_node)
        if is_stmt:
            self.stmts.pop()
        self.parents.pop()

    def bind(
        self,
        name: str,
        value: Optional[cst.BaseExpression],
        target: cst.CSTNode,
        kind: BindingKind,
        index: Optional[int] = None,
    ) -> None:
        self.f.bindings.append(Binding(name, value, target, self.site(), kind, index))
        if (
            self.scopes[-1].kind == ScopeKind.MODULE
            and kind in (BindingKind.DEF, BindingKind.CLASS, BindingKind.ASSIGN)
            and name in self.f.aliases
        ):
            self.f.shadowed[name] = target

    def bind_target(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression], kind: BindingKind) -> None:
        names = _target_names(target)
        single = len(names) == 1 and names[0][1] is None
        for name, index, node in names:
            if isinstance(node, cst.Name):
                self.store_names.add(id(node))
            self.bind(name, value, node, kind, None if single else index)

    # -- scopes ----------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        scope = Scope(node, ScopeKind.MODULE, "<module>", None)
        self.f.module_scope = scope
        self.scopes.append(scope)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.store_names.add(id(node.name))
        self.bind(node.name.value, None, node, BindingKind.CLASS)
        self.f.classes[node.name.value] = ClassInfo(
            node, node.name.value, self.site(), tuple(a.value for a in node.bases)
        )
        self.scopes.append(Scope(node, ScopeKind.CLASS, node.name.value, self.scopes[-1]))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.store_names.add(id(node.name))
        self.bind(node.name.value, None, node, BindingKind.DEF)
        scope = Scope(node, ScopeKind.FUNCTION, node.name.value, self.scopes[-1])
        params = _param_names(node.params)
        fn = Function(node, node.name.value, scope, tuple(node.decorators), params)
        self.f.functions.append(fn)
        self.f._function_by_scope_node[id(node)] = fn
        self.scopes.append(scope)
        # Parameters are bound in the function's own scope.
        for p in _all_params(node.params):
            self.store_names.add(id(p.name))
            self.bind(p.name.value, p.default, p, BindingKind.PARAM)
        # A loop outside does not make the function body part of that loop.
        self._saved_loops = getattr(self, "_saved_loops", [])
        self._saved_loops.append((self.loops, self.withs, self.if_stack, self.region))
        self.loops, self.withs, self.if_stack, self.region = [], (), (), ()

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()
        self.loops, self.withs, self.if_stack, self.region = self._saved_loops.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        scope = Scope(node, ScopeKind.LAMBDA, "<lambda>", self.scopes[-1])
        fn = Function(node, "<lambda>", scope, (), _param_names(node.params))
        self.f.functions.append(fn)
        self.f._function_by_scope_node[id(node)] = fn
        self.scopes.append(scope)
        for p in _all_params(node.params):
            self.store_names.add(id(p.name))
            self.bind(p.name.value, p.default, p, BindingKind.PARAM)

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.scopes.pop()

    # -- imports ---------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _import_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
                self.f.aliases[local] = full
            else:
                local = full.split(".")[0]
                self.f.aliases[local] = local
            self.f.shadowed.pop(local, None)
            self.bind(local, None, alias, BindingKind.IMPORT)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self._import_from(node)
        return False  # its dotted module path holds no reads

    def _import_from(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        # A relative import keeps its leading dots (`from .base import Net`: ".base.Net");
        # the project index resolves it against this file's path.
        dots = "." * len(node.relative)
        base = dots + (_import_name(node.module) if node.module is not None else "")
        if not base:
            return
        for alias in node.names:
            name = _import_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            else:
                local = name
            self.f.aliases[local] = base + name if base.endswith(".") else f"{base}.{name}"
            self.f.shadowed.pop(local, None)
            self.bind(local, None, alias, BindingKind.IMPORT)

    # -- bindings --------------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self.bind_target(t.target, node.value, BindingKind.ASSIGN)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.bind_target(node.target, node.value, BindingKind.ANNASSIGN)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.bind_target(node.target, node.value, BindingKind.AUGASSIGN)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.bind_target(node.target, node.value, BindingKind.WALRUS)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self.bind_target(node.asname.name, node.item, BindingKind.WITH)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self.bind_target(node.target, node.iter, BindingKind.COMPREHENSION)

    # -- loops, withs, ifs -----------------------------------------------

    def visit_For(self, node: cst.For) -> None:
        loop = Loop(node, self.scopes[-1], self.loops[-1] if self.loops else None, self.order)
        loop.targets = tuple(n for n, _, _ in _target_names(node.target))
        self.f.loops.append(loop)
        # The target is bound inside the loop.
        self.loops.append(loop)
        self.bind_target(node.target, node.iter, BindingKind.FOR)

    def leave_For(self, original_node: cst.For) -> None:
        self.loops[-1].end_order = self.order
        self.loops.pop()

    def visit_While(self, node: cst.While) -> None:
        loop = Loop(node, self.scopes[-1], self.loops[-1] if self.loops else None, self.order)
        self.f.loops.append(loop)
        self.loops.append(loop)

    def leave_While(self, original_node: cst.While) -> None:
        self.loops[-1].end_order = self.order
        self.loops.pop()

    def visit_With(self, node: cst.With) -> None:
        self.f.withs.append((node, self.site()))
        self.withs = self.withs + (node,)

    def leave_With(self, original_node: cst.With) -> None:
        self.withs = self.withs[:-1]

    def visit_If(self, node: cst.If) -> None:
        self._enter_region(node)  # an `elif`: the else part of the `if` before it
        self.f.ifs.append((node, self.site()))
        self.if_stack = self.if_stack + (node,)

    def visit_Assert(self, node: cst.Assert) -> None:
        self.f.asserts.append((node, self.site()))

    def leave_If(self, original_node: cst.If) -> None:
        self.if_stack = self.if_stack[:-1]
        self._leave_region(original_node)

    # -- regions (which block of a compound statement a node sits in) ------

    _PARTS: Dict[Tuple[type, type], Part] = {
        (cst.IndentedBlock, cst.If): Part.BODY,
        (cst.SimpleStatementSuite, cst.If): Part.BODY,
        (cst.IndentedBlock, cst.For): Part.BODY,
        (cst.SimpleStatementSuite, cst.For): Part.BODY,
        (cst.IndentedBlock, cst.While): Part.BODY,
        (cst.SimpleStatementSuite, cst.While): Part.BODY,
        (cst.IndentedBlock, cst.With): Part.BODY,
        (cst.SimpleStatementSuite, cst.With): Part.BODY,
        (cst.IndentedBlock, cst.Try): Part.BODY,
        (cst.SimpleStatementSuite, cst.Try): Part.BODY,
        (cst.Else, cst.If): Part.ELSE,
        (cst.If, cst.If): Part.ELSE,
        (cst.Else, cst.For): Part.ELSE,
        (cst.Else, cst.While): Part.ELSE,
        (cst.Else, cst.Try): Part.ELSE,
        (cst.ExceptHandler, cst.Try): Part.EXCEPT,
        (cst.Finally, cst.Try): Part.FINALLY,
    }

    def _enter_region(self, node: cst.CSTNode) -> None:
        if len(self.parents) < 2:
            return
        owner = self.parents[-2]
        part = self._PARTS.get((type(node), type(owner)))
        if part is None:
            return
        if part is Part.BODY and isinstance(owner, cst.With):
            return  # a `with` body runs whenever the statement does
        self.region = self.region + ((owner, part),)
        self.region_owners.append(id(node))

    def _leave_region(self, node: cst.CSTNode) -> None:
        if self.region_owners and self.region_owners[-1] == id(node):
            self.region_owners.pop()
            self.region = self.region[:-1]

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._enter_region(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._leave_region(original_node)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._enter_region(node)

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite) -> None:
        self._leave_region(original_node)

    def visit_Else(self, node: cst.Else) -> None:
        self._enter_region(node)

    def leave_Else(self, original_node: cst.Else) -> None:
        self._leave_region(original_node)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._enter_region(node)
        if node.name is not None:
            self.bind_target(node.name.name, None, BindingKind.EXCEPT)

    def leave_ExceptHandler(self, original_node: cst.ExceptHandler) -> None:
        self._leave_region(original_node)

    def visit_Finally(self, node: cst.Finally) -> None:
        self._enter_region(node)

    def leave_Finally(self, original_node: cst.Finally) -> None:
        self._leave_region(original_node)

    # -- expressions -----------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = receiver = None
        if isinstance(func, cst.Attribute):
            method, receiver = func.attr.value, func.value
        call = Call(node, self.site(), self.f.qualname(func), method, receiver)
        self.f.calls.append(call)
        self.f._calls_by_node[id(node)] = call
        for arg in node.args:
            self.f._calls_by_arg[id(arg)] = call

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self.store_names:
            return
        parent = self.parents[-2] if len(self.parents) > 1 else None
        # `x.attr`: the attribute name is not a read of a variable called `attr`.
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            return
        # Keyword names in calls and parameters are not reads either.
        if isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is node:
            return
        self.f.uses.append(NameUse(node, self.site()))

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        return False  # dotted module paths in imports are not reads

    def visit_Return(self, node: cst.Return) -> None:
        site = self.site()
        self.f.returns.append((node, site))
        self.f._returns_by_scope.setdefault(id(site.scope.node), []).append((node, site))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.f.strings.append((node, self.site()))

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.f.fstrings.append((node, self.site()))


def _all_params(params: cst.Parameters) -> List[cst.Param]:
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg)
    if params.star_kwarg is not None:
        out.append(params.star_kwarg)
    return out


def _param_names(params: cst.Parameters) -> Tuple[str, ...]:
    return tuple(p.name.value for p in _all_params(params))


def collect_facts(module: cst.Module) -> Facts:
    """Walk `module` once and return its facts."""
    facts = Facts(module)
    walk(module, _Collector(facts))
    for b in facts.bindings:
        facts._bindings_by_name.setdefault(b.name, []).append(b)
    for u in facts.uses:
        facts._uses_by_name.setdefault(u.node.value, []).append(u)
    # Imports seen after a call was recorded (rare) still resolve: re-resolve.
    for call in facts.calls:
        if call.qualname is None:
            call.qualname = facts.qualname(call.node.func)
        elif _locally_rebound(facts, call):
            call.qualname = None  # `loss = loss_func(out, y)` then `loss.item()`: not the imported `loss`
    return facts


def _locally_rebound(facts: Facts, call: Call) -> bool:
    """The name the callee starts with is bound (assigned, a parameter, a loop
    variable) in a function around the call: it shadows the module's import."""
    head: cst.BaseExpression = call.node.func
    while isinstance(head, cst.Attribute):
        head = head.value
    if not isinstance(head, cst.Name):
        return False
    for scope in call.site.scope.chain():
        if scope.kind == ScopeKind.MODULE:
            return False
        if scope.kind == ScopeKind.CLASS and scope is not call.site.scope:
            continue  # a class body's names are not visible in its methods
        if any(b.kind != BindingKind.IMPORT for b in facts.scoped_bindings(head.value, scope)):
            return True
    return False
