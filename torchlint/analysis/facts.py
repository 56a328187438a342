"""The per-file facts every rule reads, collected in one syntax-only pass.

No LibCST metadata provider runs: import aliases, scopes, bindings, calls,
loops and `with` blocks are recorded by a single visitor, in source order
(collect.py). This module holds what it records and the indexes over it.
`order` numbers increase with source position, so "was X bound before Y" is a
comparison of two integers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import (
    AbstractSet,
    Any,
    Callable,
    Dict,
    Hashable,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
    overload,
)

import libcst as cst

LoopNode = Union[cst.For, cst.While]


T = TypeVar("T")


K = TypeVar("K", bound=Hashable)


# A statement as a module or an indented block holds it.
TopStatement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


class ScopeKind(enum.Enum):
    """What a scope's body is."""

    MODULE = "module"
    FUNCTION = "function"
    CLASS = "class"
    LAMBDA = "lambda"


class Part(enum.Enum):
    """Which block of a compound statement a node sits in (`Site.region`)."""

    BODY = "body"
    ELSE = "else"  # also an `elif`
    EXCEPT = "except"
    FINALLY = "finally"


class BindingKind(enum.Enum):
    """The statement or clause that binds a name."""

    ASSIGN = "assign"
    ANNASSIGN = "annassign"
    AUGASSIGN = "augassign"
    WALRUS = "walrus"
    FOR = "for"
    COMPREHENSION = "comprehension"
    WITH = "with"
    PARAM = "param"
    IMPORT = "import"
    DEF = "def"
    CLASS = "class"
    EXCEPT = "except"
    # Asked about (a name declared `global`/`nonlocal` is not a local), never
    # recorded yet: the walk does not bind `global`/`nonlocal` statements.
    GLOBAL = "global"
    NONLOCAL = "nonlocal"


@dataclass(eq=False)
class Scope:
    """A module, function, lambda or class body."""

    node: cst.CSTNode
    kind: ScopeKind
    name: str
    parent: Optional["Scope"]

    def __repr__(self) -> str:
        return f"Scope({self.kind.value} {self.name})"

    def chain(self) -> Iterator["Scope"]:
        scope: Optional[Scope] = self
        while scope is not None:
            yield scope
            scope = scope.parent

    @property
    def function(self) -> Optional["Scope"]:
        """The nearest enclosing function scope (itself included), if any."""
        for scope in self.chain():
            if scope.kind == ScopeKind.FUNCTION:
                return scope
        return None


@dataclass(eq=False)
class Loop:
    node: LoopNode
    scope: Scope
    parent: Optional["Loop"]
    order: int
    end_order: int = 0
    # Names bound by the `for` target, in order (empty for `while`).
    targets: Tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Loop({type(self.node).__name__} at {self.order}..{self.end_order})"

    @property
    def iter(self) -> Optional[cst.BaseExpression]:
        return self.node.iter if isinstance(self.node, cst.For) else None

    def chain(self) -> Iterator["Loop"]:
        loop: Optional[Loop] = self
        while loop is not None:
            yield loop
            loop = loop.parent

    def contains(self, order: int) -> bool:
        return self.order <= order <= self.end_order


class Site:
    """Where a node sits: its scope, innermost loop, enclosing `with` blocks and
    statement, its parent node, and its position in source order.

    - `ifs`: the enclosing `if` statements, outermost first.
    - `region`: the blocks between the scope and the node, outermost first:
      (statement, part), part a `Part` (body, else, except, finally). A
      site whose region is a prefix of another's, earlier in the same scope,
      runs on every path that reaches the other (see `dominates`).

    A plain class with `__slots__`: one is made for every statement, call and
    name of a file, so creating it must be cheap."""

    __slots__ = ("scope", "loop", "withs", "stmt", "parent", "order", "ifs", "region")

    def __init__(
        self,
        scope: Scope,
        loop: Optional[Loop],
        withs: Tuple[cst.With, ...],
        stmt: Optional[cst.CSTNode],
        parent: Optional[cst.CSTNode],
        order: int,
        ifs: Tuple[cst.If, ...] = (),
        region: Tuple[Tuple[cst.CSTNode, Part], ...] = (),
    ) -> None:
        self.scope = scope
        self.loop = loop
        self.withs = withs
        self.stmt = stmt
        self.parent = parent
        self.order = order
        self.ifs = ifs
        self.region = region

    def __repr__(self) -> str:
        return f"Site({self.scope!r}, order={self.order})"

    @property
    def in_main_guard(self) -> bool:
        """Under `if __name__ == "__main__":` (at module level)."""
        return any(is_main_guard(i) for i in self.ifs)


@dataclass(eq=False)
class Call:
    node: cst.Call
    site: Site
    # The callee resolved through the file's imports ("torch.randn"), or None.
    qualname: Optional[str]
    # For `x.attr(...)`: "attr", and the receiver `x`.
    method: Optional[str]
    receiver: Optional[cst.BaseExpression]

    def keyword(self, name: str) -> Optional[cst.Arg]:
        for arg in self.node.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg
        return None

    @property
    def positional(self) -> List[cst.Arg]:
        return [a for a in self.node.args if a.keyword is None and not a.star]

    def position_of(self, arg: cst.Arg) -> Optional[Union[int, str]]:
        """Where `arg` binds: its keyword, or its index among the positional
        arguments (None: a starred argument, or one at or after one)."""
        if arg.keyword is not None:
            return arg.keyword.value
        index = 0
        for a in self.node.args:
            if a.star:
                return None
            if a is arg:
                return index
            if a.keyword is None:
                index += 1
        return None

    @property
    def has_star_kwargs(self) -> bool:
        return any(a.star == "**" for a in self.node.args)


@dataclass(eq=False)
class Binding:
    """A name (or dotted attribute target such as `self.model`) bound to a value."""

    name: str
    value: Optional[cst.BaseExpression]
    target: cst.CSTNode
    site: Site
    kind: BindingKind
    # For tuple unpacking `a, b = f()`: the element index of this name.
    index: Optional[int] = None


@dataclass(eq=False)
class NameUse:
    """A `Name` node read (not bound) somewhere in the file."""

    node: cst.Name
    site: Site


@dataclass(eq=False)
class Function:
    node: Union[cst.FunctionDef, cst.Lambda]
    name: str
    scope: Scope  # the function's own scope
    decorators: Tuple[cst.Decorator, ...]
    params: Tuple[str, ...]


@dataclass(eq=False)
class ClassInfo:
    node: cst.ClassDef
    name: str
    site: Site
    bases: Tuple[cst.BaseExpression, ...]


@dataclass
class Facts:
    module: cst.Module
    # alias -> qualified name, from imports at any level ("nn" -> "torch.nn").
    aliases: Dict[str, str] = field(default_factory=dict)
    # Names bound by a module-level class/def/assignment after shadowing an import.
    shadowed: Dict[str, cst.CSTNode] = field(default_factory=dict)
    calls: List[Call] = field(default_factory=list)
    bindings: List[Binding] = field(default_factory=list)
    uses: List[NameUse] = field(default_factory=list)
    loops: List[Loop] = field(default_factory=list)
    functions: List[Function] = field(default_factory=list)
    classes: Dict[str, ClassInfo] = field(default_factory=dict)
    withs: List[Tuple[cst.With, Site]] = field(default_factory=list)
    strings: List[Tuple[cst.SimpleString, Site]] = field(default_factory=list)
    fstrings: List[Tuple[cst.FormattedString, Site]] = field(default_factory=list)
    ifs: List[Tuple[cst.If, Site]] = field(default_factory=list)
    asserts: List[Tuple[cst.Assert, Site]] = field(default_factory=list)
    # Statements (small and compound) with their site, in source order.
    statements: List[Tuple[cst.CSTNode, Site]] = field(default_factory=list)
    # `return` statements with their site, in source order.
    returns: List[Tuple[cst.Return, Site]] = field(default_factory=list)
    module_scope: Optional[Scope] = None
    # Lookup tables built once after the pass.
    _bindings_by_name: Dict[str, List[Binding]] = field(default_factory=dict, repr=False)
    _uses_by_name: Dict[str, List[NameUse]] = field(default_factory=dict, repr=False)
    _calls_by_node: Dict[int, Call] = field(default_factory=dict, repr=False)
    _calls_by_arg: Dict[int, Call] = field(default_factory=dict, repr=False)
    _parent: Dict[int, cst.CSTNode] = field(default_factory=dict, repr=False)
    _site_by_stmt: Dict[int, Site] = field(default_factory=dict, repr=False)
    _function_by_scope_node: Dict[int, Function] = field(default_factory=dict, repr=False)
    _returns_by_scope: Dict[int, List[Tuple[cst.Return, Site]]] = field(default_factory=dict, repr=False)
    # Lookup tables by name, scope or value, each built on first use (see `_index`).
    _indexes: Dict[str, Dict[Any, Any]] = field(default_factory=dict, repr=False)

    # -- name resolution -------------------------------------------------

    def qualname(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        """Resolve `T.nn.Linear` to "torch.nn.Linear" through the file's imports."""
        if isinstance(expr, cst.Name):
            if expr.value in self.shadowed:
                return None
            found = self.aliases.get(expr.value)
            if found is None and expr.value == "torch" and not self._bindings_by_name.get("torch"):
                return "torch"  # a notebook fragment or star import: `torch` is torch
            return found
        if isinstance(expr, cst.Attribute):
            base = self.qualname(expr.value)
            return f"{base}.{expr.attr.value}" if base else None
        return None

    def module_alias(self, qualified: str) -> Optional[str]:
        """The local name bound to module `qualified` ("torch" -> "T"), if any."""
        for alias, target in sorted(self.aliases.items()):
            if target == qualified and alias not in self.shadowed:
                return alias
        return None

    # -- lookups ---------------------------------------------------------

    def bindings_of(self, name: str) -> List[Binding]:
        return self._bindings_by_name.get(name, [])

    def uses_of(self, name: str) -> List[NameUse]:
        return self._uses_by_name.get(name, [])

    def _index(self, key: str, build: Callable[[], Dict[K, T]]) -> Dict[K, T]:
        """A lookup table built on first use and kept for the file."""
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = build()
        return index

    def scoped_bindings(self, name: str, scope: Scope) -> List[Binding]:
        """Bindings of `name` whose own scope is `scope`, in source order."""
        index = self._index("bindings by name, scope", lambda: group(self.bindings, _name_and_scope))
        return index.get((name, id(scope.node)), [])

    def scoped_uses(self, name: str, scope: Scope) -> List["NameUse"]:
        """Reads of `name` whose own scope is `scope`, in source order."""
        index = self._index("uses by name, scope", lambda: group(self.uses, _name_and_scope))
        return index.get((name, id(scope.node)), [])

    def bindings_in(self, scope: Scope) -> List[Binding]:
        """Every binding whose own scope is `scope`, in source order."""
        index = self._index("bindings by scope", lambda: group(self.bindings, _scope_key))
        return index.get(id(scope.node), [])

    def uses_in(self, scope: Scope) -> List["NameUse"]:
        """Every name read whose own scope is `scope`, in source order."""
        index = self._index("uses by scope", lambda: group(self.uses, _scope_key))
        return index.get(id(scope.node), [])

    def bindings_under(self, scope: Scope) -> List[Binding]:
        """Every binding in `scope` or in scopes nested in it, in source order."""
        index = self._index("bindings under scope", lambda: group_under_scopes(self.bindings))
        return index.get(id(scope.node), [])

    def uses_under(self, scope: Scope) -> List["NameUse"]:
        """Every name read in `scope` or in scopes nested in it, in source order."""
        index = self._index("uses under scope", lambda: group_under_scopes(self.uses))
        return index.get(id(scope.node), [])

    def local_bindings(self, name: str, scope: Scope) -> List[Binding]:
        """The bindings that can change a name bound in `scope` (see `local_uses`)."""
        if scope.kind != ScopeKind.FUNCTION:
            return self.bindings_of(name)
        return [b for b in self.bindings_under(scope) if b.name == name]

    def local_uses(self, name: str, scope: Scope) -> List["NameUse"]:
        """The reads that can see a binding of `name` made in `scope`: those in it
        and its nested scopes for a function's local, every read for a module's."""
        if scope.kind != ScopeKind.FUNCTION:
            return self.uses_of(name)
        return [u for u in self.uses_under(scope) if u.node.value == name]

    def bindings_at(self, stmt: Optional[cst.CSTNode]) -> List[Binding]:
        """The bindings made by statement `stmt`, in source order."""
        if stmt is None:
            return []
        index = self._index("bindings by statement", lambda: group(self.bindings, lambda b: id(b.site.stmt)))
        return index.get(id(stmt), [])

    def calls_with_method(self, method: str) -> List[Call]:
        """Calls of a method named `method` (`x.method(...)`), in source order."""
        index = self._index("calls by method", lambda: group(self.calls, lambda c: c.method))
        return index.get(method, [])

    def declared_global(self, name: str) -> bool:
        """`name` is declared `global` or `nonlocal` somewhere in the file."""
        kinds = (BindingKind.GLOBAL, BindingKind.NONLOCAL)
        index = self._index("declared global", lambda: {b.name: True for b in self.bindings if b.kind in kinds})
        return name in index

    def attribute_bindings(self, name: str, classes: Iterable[Optional[cst.ClassDef]]) -> List[Binding]:
        """Bindings of the dotted `name` (`self.fc`) made inside each of `classes`
        (None: outside every class), in source order."""
        index = self._index("attribute bindings by class", lambda: group(self.bindings, _name_and_class))
        found = [b for cls in classes for b in index.get((name, id(cls) if cls is not None else None), [])]
        return sorted(found, key=lambda b: b.site.order)

    def loops_in(self, scope: Scope) -> List[Loop]:
        """The loops whose own scope is `scope`, in source order."""
        index = self._index("loops by scope", lambda: group(self.loops, lambda loop: id(loop.scope.node)))
        return index.get(id(scope.node), [])

    def binding_of_value(self, value: cst.CSTNode) -> Optional[Binding]:
        """The plain binding (not an unpacked element) whose value is `value`."""

        def build() -> Dict[int, Binding]:
            index: Dict[int, Binding] = {}
            for b in self.bindings:
                if b.value is not None and b.index is None:
                    index.setdefault(id(b.value), b)
            return index

        return self._index("binding by value", build).get(id(value))

    def call_for(self, node: cst.CSTNode) -> Optional[Call]:
        return self._calls_by_node.get(id(node))

    def parent_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The node's parent (among the nodes the walk visits: not whitespace or
        operator tokens), recorded by the facts pass."""
        return self._parent.get(id(node))

    def call_of_arg(self, arg: cst.Arg) -> Optional[Call]:
        """The call an argument node belongs to."""
        return self._calls_by_arg.get(id(arg))

    def site_of_statement(self, stmt: cst.CSTNode) -> Optional[Site]:
        return self._site_by_stmt.get(id(stmt))

    def site_of_node(self, node: cst.CSTNode) -> Optional[Site]:
        """The site of the statement that holds `node` (any node the walk visits)."""
        current: Optional[cst.CSTNode] = node
        while current is not None:
            site = self._site_by_stmt.get(id(current))
            if site is not None:
                return site
            current = self.parent_of(current)
        return None

    def function_of(self, scope: Scope) -> Optional[Function]:
        return self._function_by_scope_node.get(id(scope.node))

    def returns_of(self, fn: "Function") -> List[Tuple[cst.Return, Site]]:
        """The `return` statements of `fn`'s own body (nested functions excluded)."""
        return self._returns_by_scope.get(id(fn.scope.node), [])

    def function_for_def(self, node: cst.CSTNode) -> Optional["Function"]:
        return self._function_by_scope_node.get(id(node))

    def functions_defined_in(self, node: Optional[cst.CSTNode]) -> List["Function"]:
        """Functions defined directly in the body of `node` (a class's methods), in source order."""

        def key(fn: Function) -> Optional[int]:
            return id(fn.scope.parent.node) if fn.scope.parent is not None else None

        index = self._index("functions by defining scope", lambda: group(self.functions, key))
        return index.get(id(node) if node is not None else None, [])

    def function_named_in(self, name: str, scope: Scope) -> Optional["Function"]:
        """The first function named `name` defined directly in `scope` (a method of a class body)."""
        return self.function_named_in_node(name, scope.node)

    def function_named_in_node(self, name: str, node: cst.CSTNode) -> Optional["Function"]:
        """The first function named `name` defined directly in `node` (a class body's methods)."""
        return next((fn for fn in self.functions_defined_in(node) if fn.name == name), None)

    def reaching(self, name: str, site: Site) -> List[Binding]:
        """Bindings of `name` that may reach `site`: in the same scope the latest
        ones back to the nearest that runs on every path (plus later ones in a
        loop around the site, which reach it on the next iteration); in an
        enclosing scope, all of its bindings."""
        visible = self.visible_bindings(name, site.scope)
        if not visible:
            return []
        if visible[0].site.scope is not site.scope:
            return list(visible)
        before = sorted(
            (
                b
                for b in visible
                if (b.site.order < site.order and not _binds_after(b, site))
                or b.kind == BindingKind.FOR
                and b.site.loop is not None
                and b.site.loop.contains(site.order)
                and b.site.order <= site.order
            ),
            key=lambda b: b.site.order,
            reverse=True,
        )
        out: List[Binding] = []
        killed_in_loop = False
        for b in before:
            out.append(b)
            if dominates(b.site, site) or b.site.order == site.order:
                killed_in_loop = site.loop is not None and site.loop.contains(b.site.order)
                break
        if site.loop is not None and not killed_in_loop:
            for loop in site.loop.chain():
                if loop.scope is not site.scope:
                    break
                out.extend(
                    b for b in visible if b.site.order > site.order and loop.contains(b.site.order) and b not in out
                )
        return out

    def calls_import(self, call: Call) -> bool:
        """The callee is a dotted name whose head (`metrics` of `metrics.accuracy(...)`)
        no binding but an import (or a star import: none) makes where the call is:
        the call runs what the import names, not a parameter or local of that name
        (`accuracy_fn` handed in)."""
        head = dotted_name(call.node.func)
        if head is None:
            return False
        return all(b.kind == BindingKind.IMPORT for b in self.visible_bindings(head.split(".")[0], call.site.scope))

    def visible_bindings(self, name: str, scope: Scope) -> List[Binding]:
        """Bindings of `name` in `scope` or, if it binds none there, the nearest
        enclosing scope that does (Python's lexical rule, class bodies skipped)."""
        if name not in self._bindings_by_name:
            return []
        for s in scope.chain():
            if s is not scope and s.kind == ScopeKind.CLASS:
                continue
            here = self.scoped_bindings(name, s)
            if here:
                return list(here)
        return []


def class_of(scope: Scope) -> Optional[cst.ClassDef]:
    """The class whose body holds `scope` (its own, or the nearest around it)."""
    for s in scope.chain():
        if s.kind == ScopeKind.CLASS and isinstance(s.node, cst.ClassDef):
            return s.node
    return None


def _name_and_class(b: Binding) -> Tuple[str, Optional[int]]:
    cls = class_of(b.site.scope)
    return b.name, id(cls) if cls is not None else None


def group(items: Iterable[T], key: Callable[[T], Hashable]) -> Dict[Hashable, List[T]]:
    """`items` in lists by `key`, each list in the items' order."""
    out: Dict[Hashable, List[T]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


def group_under_scopes(items: Iterable[T]) -> Dict[int, List[T]]:
    """Items that have a `site`, listed under the id of the node of their own scope
    and of every scope around it (a function's list holds its nested scopes' too)."""
    out: Dict[int, List[T]] = {}
    for item in items:
        for scope in item.site.scope.chain():  # type: ignore[attr-defined]
            out.setdefault(id(scope.node), []).append(item)
    return out


def _scope_key(item: Union[Binding, NameUse]) -> int:
    return id(item.site.scope.node)


def _name_and_scope(item: Union[Binding, NameUse]) -> Tuple[str, int]:
    name = item.name if isinstance(item, Binding) else item.node.value
    return name, id(item.site.scope.node)


def dotted_name(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """`self.model` -> "self.model"; anything but names and attributes -> None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted_name(expr.value)
        return f"{base}.{expr.attr.value}" if base else None
    return None


@overload
def strip_methods(expr: cst.BaseExpression, names: AbstractSet[str]) -> cst.BaseExpression: ...


@overload
def strip_methods(expr: Optional[cst.BaseExpression], names: AbstractSet[str]) -> Optional[cst.BaseExpression]: ...


def strip_methods(expr: Optional[cst.BaseExpression], names: AbstractSet[str]) -> Optional[cst.BaseExpression]:
    """The receiver under a chain of calls of the methods `names`: `Net()` for
    `Net().to(d).eval()` (names: to, eval); `expr` itself when it is no such call."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in names:
        expr = expr.func.value
    return expr


def is_main_guard(node: cst.If) -> bool:
    """`if __name__ == "__main__":` (either operand order, either quote)."""
    test = node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comp = test.comparisons[0]
    if not isinstance(comp.operator, cst.Equal):
        return False
    sides = [test.left, comp.comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return len(names) == 1 and len(strings) == 1


def _binds_after(b: Binding, site: Site) -> bool:
    """`x = f(x)`: the binding happens after its own right-hand side is read."""
    return b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN, BindingKind.AUGASSIGN) and b.site.stmt is site.stmt


def dominates(first: Site, later: Site) -> bool:
    """`first` runs on every path that reaches `later`, earlier in the same scope:
    its enclosing blocks are a prefix of `later`'s (a statement in a branch, a
    loop body or an `except` does not dominate what follows that block)."""
    if first.scope is not later.scope or first.order >= later.order:
        return False
    n = len(first.region)
    return later.region[:n] == first.region
