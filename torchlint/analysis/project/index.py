"""The project index: every file's summary, and one function per question.

    index = ProjectIndex({path: summarize(text), ...}, roots)
    view = index.view("train.py")           # the questions as train.py asks them
    view.class_kind("models.base.Backbone")  # ClassKind.MODULE, or None
    view.guards_grad("utils.torch_utils.smart_inference_mode", called=True)
    view.returns("models.build_model")       # ValueKind.MODULE, or None
    view.moves_argument("utils.to_device", 0)

Names are asked the way the asking file's facts spell them: `qualname()`
resolved through its imports, relative imports with their leading dots
(".base.Backbone"), and the file's own top-level names as `view.local(name)`.
A name is resolved to a library name (nothing in the project matches it) or
to a definition in a project file (modules.py says which file), following
re-exports (`from .base import Backbone` in a package's `__init__.py`), star
imports and module-level aliases (`no_grad = torch.no_grad`). Anything that
does not resolve, or resolves ambiguously, is unknown: None or False.

Each view records the questions its file asked and the answers it got
(`Dependency`); a cached result of that file is valid while the current index
gives the same answers (`still_answers`).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

import torchlint.analysis.project.library as library
from torchlint.analysis.knowledge import DATA_PARALLEL
from torchlint.analysis.project.import_uses import WHOLE
from torchlint.analysis.project.kinds import (
    AssignSummary,
    ClassKind,
    ClassSummary,
    Dependency,
    FunctionSummary,
    GuardNeed,
    ItemWork,
    MethodBinding,
    MethodSummary,
    ModuleSummary,
    Question,
    ValueKind,
)
from torchlint.analysis.project.modules import AMBIGUOUS, ModuleTable, module_name, root_of
from torchlint.analysis.vocabulary import NN_CONTAINER_LAYERS, NO_GRAD_CONTEXTS, STATELESS_LAYER

# `view.local("Net")`: a top-level name of the asking file itself.
LOCAL = "<local>."
MAX_DEPTH = 8  # re-exports, aliases and helpers followed at most this deep
_SAYS_LOADER = re.compile("loader", re.IGNORECASE)
# torch.nn classes that only hold what they are given.

Definition = Union[ClassSummary, FunctionSummary, AssignSummary]
# Questions answered None when unknown (the others: False).
_OPTIONAL = frozenset(
    {
        Question.CLASS_KIND,
        Question.RETURNS,
        Question.PLACES_ITSELF,
        Question.HAS_PARAMETERS,
        Question.ALLOCATES,
        Question.DATASET_ITEMS,
    }
)
# Questions about a method: asked of "<class>.<method>".
_METHOD_QUESTIONS = frozenset({Question.METHOD_SYNCS_ARGUMENT, Question.METHOD_TIMES})
Answer = Union[None, bool, str, ClassKind, ValueKind, Tuple[str, ...]]
Arg = Union[None, int, str, bool]  # a question's argument besides the name


@dataclass(frozen=True)
class Library:
    """A name no project file defines: a library's (or unknown)."""

    name: str


@dataclass(frozen=True)
class Defined:
    """Top-level name `name` of the project file `path`."""

    path: str
    name: str


Target = Union[Library, Defined]


@dataclass
class _Reach:
    """What the imports of one root's files reach: (module file, name or `*`) ->
    the importing files; the absolute imports (`import pkg`: any module under
    `pkg` may be reached through it); the names in imports of packages that are
    not the project's files (the project itself installed under another name?);
    whether some file did not parse."""

    files: int = 0
    unknown: bool = False
    names: Dict[Tuple[str, str], Set[str]] = field(default_factory=dict)
    packages: Set[str] = field(default_factory=set)
    foreign: Set[str] = field(default_factory=set)


class ProjectIndex:
    """Summaries of a run's files (or a workspace's), and the questions about them.

    `summaries` maps each file's path to its summary; `load`, when given
    instead, builds that mapping on first need (a single text's index costs
    nothing unless a question needs its summary)."""

    def __init__(
        self,
        summaries: Optional[Mapping[str, ModuleSummary]] = None,
        roots: Sequence[str] = (),
        paths: Optional[Sequence[str]] = None,
        load: Optional[Callable[[], Mapping[str, ModuleSummary]]] = None,
        whole: Sequence[str] = (),
    ) -> None:
        self._summaries = dict(summaries) if summaries is not None else None
        self._load = load
        self.roots = tuple(roots)
        # Project roots every file of which is in the index (a run over a folder that holds
        # them): only there can the index say that no file uses a definition.
        self.whole = tuple(whole)
        self.paths: Tuple[str, ...] = tuple(sorted(paths if paths is not None else (summaries or {})))
        self.table = ModuleTable(self.paths)
        self._defs: Dict[str, Dict[str, Definition]] = {}
        self._imports: Dict[str, Dict[str, str]] = {}
        self._lookups: Dict[Tuple[str, str], Optional[Target]] = {}
        self._memo: Dict[Tuple[Question, Target, object], Answer] = {}
        self._busy: Set[Tuple[Question, Target, object]] = set()
        self._asked: Dict[str, Dict[Tuple[Question, str, Arg], Answer]] = {}
        self._lock = threading.RLock()
        self._loader_names: Optional[Tuple[str, ...]] = None
        self._importers: Optional[Dict[str, Set[str]]] = None
        self._reached: Optional[Dict[Optional[Tuple[str, ...]], _Reach]] = None
        self._calls: Optional[Dict[Tuple[str, ...], Optional[Dict[str, List[Tuple[str, int, int, bool]]]]]] = None

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def of_text(cls, path: str, text: str) -> "ProjectIndex":
        """An index of one text (an editor's buffer, `lint_source`): summarised
        only when a question needs it."""
        from torchlint.analysis.project.summary import summarize

        return cls(paths=[path], load=lambda: {path: summarize(text)})

    @classmethod
    def empty(cls) -> "ProjectIndex":
        return cls({})

    def summaries(self) -> Mapping[str, ModuleSummary]:
        if self._summaries is None:
            with self._lock:
                if self._summaries is None:
                    self._summaries = dict(self._load() if self._load is not None else {})
        return self._summaries

    def summary(self, path: str) -> Optional[ModuleSummary]:
        return self.summaries().get(path)

    def module_name(self, path: str) -> Optional[str]:
        """`path`'s dotted module name relative to the nearest of the run's roots."""
        return module_name(path, self.roots)

    def view(self, path: str) -> "FileView":
        """The questions as file `path` asks them, recorded for its cache entry."""
        return FileView(self, path)

    def __getstate__(self) -> Dict[str, object]:
        # Sent once to each worker process: the summaries, not the memos or the lock.
        return {"summaries": dict(self.summaries()), "roots": self.roots, "paths": self.paths, "whole": self.whole}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["summaries"], state["roots"], state["paths"], whole=state["whole"])  # type: ignore[misc]

    # -- what a file asked ------------------------------------------------------------------------

    def take_dependencies(self, path: str) -> Tuple[Dependency, ...]:
        """The questions file `path` asked since the last call, with their answers (sorted)."""
        with self._lock:
            asked = self._asked.pop(path, {})
        deps = [Dependency(q, name, arg, answer) for (q, name, arg), answer in asked.items()]
        return tuple(sorted(deps, key=Dependency.sort_key))

    def still_answers(self, path: str, dependencies: Iterable[Dependency]) -> bool:
        """Every question file `path` asked gets the same answer from this index."""
        for dep in dependencies:
            if self.answer(path, dep.question, dep.qualname, dep.arg) != dep.answer:
                return False
        return True

    def answer(self, path: str, question: Question, qualname: str, arg: Arg = None) -> Answer:
        """One question, asked by file `path` (not recorded)."""
        if question is Question.LOADER_NAMES:
            return self.loader_names()
        with self._lock:
            if question in _METHOD_QUESTIONS:  # `qualname`: the class, then the method
                owner, _, method = qualname.rpartition(".")
                found = self._lookup(path, owner) if owner else None
                if found is None:
                    return False
                on_instance = (method, arg, False) if question is Question.METHOD_SYNCS_ARGUMENT else method
                return self._ask(question, found, on_instance)
            target = self._lookup(path, qualname)
            if target is None:
                return None if question in _OPTIONAL else False
            return self._ask(question, target, arg)

    def _record(self, path: str, question: Question, qualname: str, arg: Arg) -> Answer:
        key = (question, qualname, arg)
        with self._lock:
            asked = self._asked.setdefault(path, {})
            if key in asked:
                return asked[key]
            answer = asked[key] = self.answer(path, question, qualname, arg)
            return answer

    # -- names --------------------------------------------------------------------------------------

    def _definitions(self, path: str) -> Dict[str, Definition]:
        found = self._defs.get(path)
        if found is None:
            s = self.summary(path) or ModuleSummary()
            found = {}
            defs: Tuple[Definition, ...] = (*s.assigns, *s.functions, *s.classes)
            for d in defs:  # a def or class wins over an assignment
                found[d.name] = d
            self._defs[path] = found
            self._imports[path] = dict(s.imports)
        return found

    def _lookup(self, importer: str, qualname: str, depth: int = 0) -> Optional[Target]:
        """What `qualname`, as file `importer` spells it, names."""
        key = (importer, qualname)
        if key in self._lookups:
            return self._lookups[key]
        self._lookups[key] = None  # a cycle of re-exports resolves to nothing
        found = self._find(importer, qualname, depth)
        self._lookups[key] = found
        return found

    def _find(self, importer: str, qualname: str, depth: int) -> Optional[Target]:
        if depth > MAX_DEPTH or not qualname:
            return None
        if qualname.startswith(LOCAL):
            return self._attribute(importer, qualname[len(LOCAL) :].split("."), depth)
        if qualname.startswith("."):
            level = len(qualname) - len(qualname.lstrip("."))
            parts = [p for p in qualname[level:].split(".") if p]
            for k in range(len(parts), -1, -1):
                module = self.table.relative(importer, level, parts[:k])
                if module is AMBIGUOUS:
                    return None
                if isinstance(module, str):
                    return self._attribute(module, parts[k:], depth) if k < len(parts) else None
            return None
        parts = qualname.split(".")
        for k in range(len(parts), 0, -1):
            module = self.table.absolute(importer, parts[:k])
            if module is AMBIGUOUS:
                return None
            if isinstance(module, str):
                return self._attribute(module, parts[k:], depth) if k < len(parts) else None
        return Library(qualname)

    def _attribute(self, path: str, attrs: Sequence[str], depth: int) -> Optional[Target]:
        """Attribute `attrs` (a top-level name, then nothing) of project file `path`."""
        if depth > MAX_DEPTH or not attrs or len(attrs) > 1 and attrs[0] in self._definitions(path):
            return None  # a module itself, or an attribute of a class or function: not followed
        name, rest = attrs[0], list(attrs[1:])
        found = self._definitions(path).get(name)
        if found is not None:
            if isinstance(found, AssignSummary) and len(found.options) == 1 and not found.options[0][1]:
                return self._resolve_in(path, found.options[0][0], depth + 1)  # `Backbone = ResNet`
            return Defined(path, name)
        imported = self._imports[path].get(name)
        if imported is not None:
            return self._lookup(path, ".".join([imported] + rest), depth + 1)
        return self._star(path, name, rest, depth)

    def _star(self, path: str, name: str, rest: List[str], depth: int) -> Optional[Target]:
        """`name` from a star import of file `path` (a project module that binds
        it, else the one library module star-imported)."""
        stars = (self.summary(path) or ModuleSummary()).star_imports
        libraries = []
        for star in stars:
            module = self._star_module(path, star)
            if module is None:
                libraries.append(star)
            elif name in self._definitions(module) or name in self._imports[module]:
                return self._attribute(module, [name] + rest, depth + 1)
        if len(stars) == 1 and len(libraries) == 1 and not libraries[0].startswith("."):
            return Library(".".join([libraries[0], name] + rest))
        return None

    def _star_module(self, importer: str, star: str) -> Optional[str]:
        if star.startswith("."):
            level = len(star) - len(star.lstrip("."))
            found = self.table.relative(importer, level, [p for p in star[level:].split(".") if p])
        else:
            found = self.table.absolute(importer, star.split("."))
        return found if isinstance(found, str) else None

    def _resolve_in(self, path: str, dotted: str, depth: int = 0) -> Optional[Target]:
        """A dotted name as written in project file `path`."""
        if depth > MAX_DEPTH:
            return None
        root, _, rest = dotted.partition(".")
        if root in self._definitions(path):
            return self._attribute(path, dotted.split("."), depth)
        imported = self._imports[path].get(root)
        if imported is not None:
            return self._lookup(path, imported + ("." + rest if rest else ""), depth + 1)
        return self._star(path, root, rest.split(".") if rest else [], depth)

    def _definition(self, target: Optional[Target]) -> Optional[Definition]:
        if isinstance(target, Defined):
            return self._definitions(target.path).get(target.name)
        return None

    # -- questions ----------------------------------------------------------------------------------

    def _ask(self, question: Question, target: Target, arg: object = None) -> Answer:
        key = (question, target, arg)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy or len(self._busy) > 4 * MAX_DEPTH:
            return None if question in _OPTIONAL else False
        self._busy.add(key)
        try:
            answer = _QUESTIONS[question](self, target, arg)
        finally:
            self._busy.discard(key)
        self._memo[key] = answer
        return answer

    def _class_kind(self, target: Target, _: object) -> Optional[ClassKind]:
        if isinstance(target, Library):
            return library.class_kind(target.name)
        found = self._definition(target)
        if not isinstance(found, ClassSummary):
            return None
        assert isinstance(target, Defined)
        for base in found.bases:
            resolved = self._resolve_in(target.path, base)
            kind = self._ask(Question.CLASS_KIND, resolved) if resolved is not None else None
            if isinstance(kind, ClassKind):
                return kind
        return None

    def loader_names(self) -> Tuple[str, ...]:
        """The top-level names, in any project file, that resolve to a class
        building a torch DataLoader (`builds_loader`), less those that say
        "loader" themselves (sorted). A call of a loader spells, in its file,
        "loader" or the name its lookup lands on first (an attribute, an
        imported or local name), which is one of these."""
        if self._loader_names is None:
            with self._lock:
                found = set()
                for path in self.paths:
                    names = self._definitions(path).keys() | self._imports[path].keys()
                    for name in names:
                        if _SAYS_LOADER.search(name) or name in found:
                            continue
                        target = self._attribute(path, [name], 0)
                        if target is not None and self._ask(Question.BUILDS_LOADER, target):
                            found.add(name)
                self._loader_names = tuple(sorted(found))
        return self._loader_names

    def _builds_loader(self, target: Target, _: object) -> bool:
        if isinstance(target, Library):
            return library.builds_loader(target.name)
        found = self._definition(target)
        if not isinstance(found, ClassSummary) or found.defines_init:
            return False  # its own __init__ may take other arguments
        assert isinstance(target, Defined)
        for base in found.bases:
            resolved = self._resolve_in(target.path, base)
            if resolved is not None and self._ask(Question.BUILDS_LOADER, resolved):
                return True
        return False

    def _guards_grad(self, target: Target, called: object) -> bool:
        if isinstance(target, Library):
            return target.name in NO_GRAD_CONTEXTS
        found = self._definition(target)
        assert isinstance(target, Defined)
        if isinstance(found, FunctionSummary):
            needs = found.guard_called if called else found.guard_bare
            return needs is not None and all(self._holds(target.path, n) for n in needs)
        if isinstance(found, AssignSummary):
            for ref, was_called in found.options:
                resolved = self._resolve_in(target.path, ref)
                if resolved is None:
                    return False
                if was_called:  # `ctx = torch.no_grad()`: a guard object, used bare
                    if called or not self._ask(Question.GUARDS_GRAD, resolved, True):
                        return False
                elif not self._ask(Question.GUARDS_GRAD, resolved, bool(called)):
                    return False
            return True
        return False

    def _holds(self, path: str, need: GuardNeed) -> bool:
        resolved = self._resolve_in(path, need.ref)
        return resolved is not None and bool(self._ask(Question.GUARDS_GRAD, resolved, need.called))

    def _returns(self, target: Target, _: object) -> Optional[ValueKind]:
        found = self._definition(target)
        if not isinstance(found, FunctionSummary) or not found.returns:
            return None
        assert isinstance(target, Defined)
        kinds = {self._call_kind(target.path, ref) for ref in found.returns}
        kind = kinds.pop() if len(kinds) == 1 else None
        return kind

    def _call_kind(self, path: str, callee: str) -> Optional[ValueKind]:
        """What calling `callee` (as written in file `path`) evidently returns."""
        resolved = self._resolve_in(path, callee)
        if resolved is None:
            return None
        if isinstance(resolved, Library):
            return library.call_kind(resolved.name)
        found = self._definition(resolved)
        if isinstance(found, ClassSummary):
            kind = self._ask(Question.CLASS_KIND, resolved)
            return ValueKind.of_class(kind) if isinstance(kind, ClassKind) else None
        answer = self._ask(Question.RETURNS, resolved)
        return answer if isinstance(answer, ValueKind) else None

    def _iterates_argument(self, target: Target, position: object) -> bool:
        """Function `target` iterates its argument at `position` with a `for` of
        its own on every call (what it hands on may be a part of the argument)."""
        found = self._definition(target)
        if not isinstance(found, FunctionSummary):
            return False
        assert isinstance(target, Defined)
        param = _parameter(found, position)
        return param is not None and param in found.iterates

    def _result_iterated_again(self, target: Target, element: object) -> bool:
        """A project file other than the definition's that names function
        `target` iterates its result (`element` of it; -1: the whole) in a loop
        that repeats (`ModuleSummary.result_passes`): a loader it returns is
        passed over again and again. A root not held whole: False."""
        for path in sorted(self._namers(target) or ()):
            s = self.summary(path)
            if s is None or not s.parsed:
                continue
            for callee, index in s.result_passes:
                if index == element and self._resolve_in(path, callee) == target:
                    return True
        return False

    def _builds_data_parallel(self, target: Target, _: object) -> bool:
        """A call of `target` builds a torch DataParallel: it is one, a project class
        subclassing one, or a project function some `return` of which calls one
        (`def DataParallel(module, ...): return torch.nn.DataParallel(module, ...)`)."""
        if isinstance(target, Library):
            return target.name in DATA_PARALLEL
        found = self._definition(target)
        assert isinstance(target, Defined)
        if isinstance(found, ClassSummary):
            refs: Tuple[str, ...] = found.bases
        elif isinstance(found, FunctionSummary):
            refs = found.returns or ()
        else:
            return False
        for ref in refs:
            resolved = self._resolve_in(target.path, ref)
            if resolved is not None and self._ask(Question.BUILDS_DATA_PARALLEL, resolved) is True:
                return True
        return False

    def _moves_argument(self, target: Target, position: object) -> bool:
        found = self._definition(target)
        if not isinstance(found, FunctionSummary):
            return False
        assert isinstance(target, Defined)
        param = _parameter(found, position)
        if param is None:
            return False
        if param in found.moves:
            return True
        for p in found.passes:
            if p.param == param:
                resolved = self._resolve_in(target.path, p.callee)
                if resolved is not None and self._ask(Question.MOVES_ARGUMENT, resolved, p.position):
                    return True
        return False

    def _syncs_argument(self, target: Target, position: object) -> Optional[str]:
        found = self._definition(target)
        if not isinstance(found, FunctionSummary):
            return None
        assert isinstance(target, Defined)
        return self._function_syncs(target.path, found, position, None)

    def _method_syncs_argument(self, target: Target, arg: object) -> Optional[str]:
        """Method `name` of class `target` (or of a project base) reads its argument at
        `position` on the host every call; `on_class`: called on the class itself
        (`Metrics.dice(a, b)`), where an instance method's first argument is the instance."""
        assert isinstance(arg, tuple)
        name: str = arg[0]
        position: object = arg[1]
        on_class: bool = arg[2]
        found = self._method(target, name, 0)
        if found is None:
            return None
        owner, method = found
        if on_class and method.binding is MethodBinding.INSTANCE:
            if not isinstance(position, int) or isinstance(position, bool) or position < 1:
                return None
            position -= 1
        # names in the method resolve in its own file, `self.m` on the class the call named
        assert isinstance(target, Defined)
        return self._function_syncs(owner.path, method.function, position, target)

    def _method_times(self, target: Target, name: object) -> bool:
        """Method `name` of class `target` (or of a project base) reads a clock."""
        found = self._method(target, name, 0) if isinstance(name, str) else None
        return found is not None and found[1].function.times

    def _method(self, target: Target, name: str, depth: int) -> Optional[Tuple[Defined, MethodSummary]]:
        """Method `name` as an instance of class `target` finds it: its own, else
        its project bases' (first found, in order)."""
        found = self._definition(target)
        if not isinstance(found, ClassSummary) or depth > MAX_DEPTH:
            return None
        assert isinstance(target, Defined)
        for method in found.methods:
            if method.function.name == name:
                return target, method
        for base in found.bases:
            resolved = self._resolve_in(target.path, base)
            inherited = self._method(resolved, name, depth + 1) if isinstance(resolved, Defined) else None
            if inherited is not None:
                return inherited
        return None

    def _function_syncs(
        self, path: str, found: FunctionSummary, position: object, owner: Optional[Defined]
    ) -> Optional[str]:
        """`found` (of file `path`; a method run on an instance of class `owner`)
        reads the argument at `position` on the host every call: itself, or in a
        project function or a method it hands the argument to on every call."""
        param = _parameter(found, position)
        if param is None:
            return None
        for p, method in found.syncs:
            if p == param:
                return method
        for handed in found.passes:
            if handed.param != param or not handed.always:
                continue
            answer = self._callee_syncs(path, handed.callee, handed.position, owner)
            if isinstance(answer, str):
                return answer
        return None

    def _callee_syncs(self, path: str, callee: str, position: object, owner: Optional[Defined]) -> Answer:
        """What `callee` (as file `path` writes it) reads on the host of the argument
        at `position`: a function, `self.method` of class `owner`, or a method called
        on a project class (`Metrics.dice`)."""
        head, _, name = callee.partition(".")
        if head == "self":
            if owner is None or "." in name:
                return None  # a method of what an attribute holds: not followed
            return self._ask(Question.METHOD_SYNCS_ARGUMENT, owner, (name, position, False))
        resolved = self._resolve_in(path, callee)
        if isinstance(resolved, Defined):
            return self._ask(Question.SYNCS_ARGUMENT, resolved, position)
        cls, _, name = callee.rpartition(".")
        resolved = self._resolve_in(path, cls) if cls else None
        if isinstance(resolved, Defined):
            return self._ask(Question.METHOD_SYNCS_ARGUMENT, resolved, (name, position, True))
        return None

    def _allocates(self, target: Target, _: object) -> Optional[Tuple[str, ...]]:
        found = self._definition(target)
        return found.allocates if isinstance(found, FunctionSummary) else None

    def _trains(self, target: Target, _: object) -> bool:
        found = self._definition(target)
        if not isinstance(found, FunctionSummary):
            return False
        assert isinstance(target, Defined)
        if found.trains:
            return True
        for callee in found.callees:
            resolved = self._resolve_in(target.path, callee)
            if isinstance(resolved, Defined) and self._ask(Question.TRAINS, resolved):
                return True
        return False

    def _places_itself(self, target: Target, _: object) -> Optional[bool]:
        if isinstance(target, Library):
            return False if library.class_kind(target.name) is not None else None
        found = self._definition(target)
        if not isinstance(found, ClassSummary):
            return None
        assert isinstance(target, Defined)
        if found.places:
            return True
        for base in found.bases:
            resolved = self._resolve_in(target.path, base)
            if isinstance(resolved, Defined) and self._ask(Question.PLACES_ITSELF, resolved):
                return True
        return False

    def _dataset_items(self, target: Target, _: object) -> Optional[str]:
        """What class `target`'s own `__getitem__` does per item: an `ItemWork`
        value, or None."""
        found = self._definition(target)
        if not isinstance(found, ClassSummary) or found.item_work is None:
            return None
        return found.item_work.value

    def _forward_container(self, target: Target, _: object) -> bool:
        found = self._definition(target)
        if not isinstance(found, ClassSummary):
            return False
        assert isinstance(target, Defined)
        if found.forward_container is not None:
            return found.forward_container
        for base in found.bases:  # no `forward` of its own: its project base's
            resolved = self._resolve_in(target.path, base)
            if isinstance(resolved, Defined):
                return bool(self._ask(Question.FORWARD_CONTAINER, resolved))
        return False

    def _imported(self, target: Target, _: object) -> bool:
        """Another project file imports the definition, or its whole module (by
        name or `*`): it may be used there. A library name: True (can't tell)."""
        if not isinstance(target, Defined):
            return True
        module = self.module_name(target.path) or ""
        for path in self.summaries():
            if path == target.path:
                continue
            s = self.summary(path) or ModuleSummary()
            if not s.parsed:
                return True
            self._definitions(path)
            if any(self._star_module(path, star) == target.path for star in s.star_imports):
                return True
            for _local, imported in s.imports:
                if (module + ".").startswith(imported + "."):
                    return True  # `import pkg`: `pkg.sub.fn` may be reached through it
                if self._star_module(path, imported) == target.path or self._lookup(path, imported) == target:
                    return True
        return False

    def _used_elsewhere(self, target: Target, _: object) -> bool:
        """Code outside the definition's file may use it: another project file
        imports it by name (at any level: an import inside a function counts),
        star-imports its module, or imports its module whole and reads it off
        (`bleu.score`) or hands the module on; or the project is that file
        alone. Only a project root the index holds whole (`whole`) can tell:
        elsewhere (a run over some of its files, which reads only the importers
        it finds) the answer is True; and only that root's files count (another
        project's imports are not this one's). A library name: True."""
        if not isinstance(target, Defined):
            return True
        reach = self._reach_of(target)
        if reach is None or reach.unknown or reach.files < 2:
            return True
        module = self.module_name(target.path) or ""
        if any(module != prefix and (module + ".").startswith(prefix + ".") for prefix in reach.packages):
            return True  # `import pkg`: `pkg.sub.fn` may be reached through it
        if target.name in reach.foreign or module.rpartition(".")[2] in reach.foreign:
            return True
        return bool(self._namers(target))

    def _called_guarded(self, target: Target, method: object) -> bool:
        """Every call of function `target` (or, given `method`, of that method of
        class `target`: any `x.<method>(...)`, by name) in the files of its
        project root runs with autograd off, and there is one. Only a project
        root the index holds whole can tell."""
        if not isinstance(target, Defined):
            return False
        root = root_of(target.path, self.whole)
        if root is None:
            return False
        name = method if isinstance(method, str) else target.name
        calls = self._calls_by_root().get(root)
        if calls is None:
            return False  # a file of the root did not parse
        inside = outside = 0
        for path, g, u, defines in calls.get(name, ()):
            if defines and path != target.path:
                continue  # another file's calls of its own function or method of that name
            inside, outside = inside + g, outside + u
        return inside > 0 and outside == 0

    def _calls_by_root(self) -> Dict[Tuple[str, ...], Optional[Dict[str, List[Tuple[str, int, int, bool]]]]]:
        """Per project root held whole: each called name's calls inside and
        outside no-grad regions, per file, with whether that file defines the
        name itself (None: a file did not parse), computed once for the whole
        index."""
        if self._calls is None:
            found: Dict[Tuple[str, ...], Optional[Dict[str, List[Tuple[str, int, int, bool]]]]] = {}
            for path, s in self.summaries().items():
                root = root_of(path, self.whole)
                if root is None or (root in found and found[root] is None):
                    continue
                if not s.parsed:
                    found[root] = None
                    continue
                totals = found.setdefault(root, {})
                assert totals is not None
                for called, inside, outside, defines in s.guarded_calls:
                    totals.setdefault(called, []).append((path, inside, outside, defines))
            self._calls = found
        return self._calls

    def _reach_of(self, target: Defined) -> Optional["_Reach"]:
        """What the imports of the files of `target`'s project root reach (None:
        a root the index does not hold whole)."""
        root = root_of(target.path, self.whole)
        return self._reach().get(root) if root is not None else None

    def _reach(self) -> Dict[Optional[Tuple[str, ...]], "_Reach"]:
        """Per project root held whole, what its files' imports reach
        (`_used_elsewhere`), computed once for the whole index."""
        if self._reached is None:
            found: Dict[Optional[Tuple[str, ...]], _Reach] = {}
            for path, s in sorted(self.summaries().items()):
                root = root_of(path, self.whole)
                if root is None:
                    continue
                reach = found.setdefault(root, _Reach())
                reach.files += 1
                if not s.parsed:
                    reach.unknown = True
                    continue
                self._definitions(path)
                for star in s.star_imports:
                    module = self._star_module(path, star)
                    if module is not None:
                        reach.names.setdefault((module, WHOLE), set()).add(path)
                for imported, attrs in s.import_uses:
                    self._note_import(reach, path, imported, attrs)
            self._reached = found
        return self._reached

    def _note_import(self, reach: "_Reach", path: str, imported: str, attrs: Tuple[str, ...]) -> None:
        target = self._lookup(path, imported)
        if isinstance(target, Defined):
            reach.names.setdefault((target.path, target.name), set()).add(path)
        module = self._module_of(path, imported)
        if module is not None and self._names_module(path, imported, module):
            for attr in attrs:
                reach.names.setdefault((module, attr), set()).add(path)
        if not imported.startswith("."):
            reach.packages.add(imported)
            if (
                module is None
                and self._module_of(path, imported.split(".")[0]) is None
                and self._could_be_installed_project(path, imported)
            ):
                # A package the project installs under another name (`facenet_pytorch` for
                # `models/`): what it names may be any project module or definition.
                reach.foreign.update(imported.split("."))
                reach.foreign.update(a for a in attrs if a != WHOLE)

    def _could_be_installed_project(self, importer: str, imported: str) -> bool:
        """`imported` (`pkg.sub.Name`, its package not a project module) could
        name the project installed as `pkg`: nothing follows the package
        (`from facenet_pytorch import MTCNN`), or what follows names a project
        module and, after it, a definition of that module (`pkg.models.mtcnn.MTCNN`).
        `pycocoevalcap.bleu.bleu.Bleu` in a project with a `bleu.py` that
        defines no `bleu` is a library's own module."""
        tail = imported.split(".")[1:]
        if not tail:
            return True
        for k in range(len(tail), 0, -1):
            module = self.table.absolute(importer, tail[:k])
            if module is AMBIGUOUS:
                return True
            if isinstance(module, str):
                return k == len(tail) or tail[k] in self._definitions(module)
        return False

    def _names_module(self, importer: str, imported: str, module_path: str) -> bool:
        """The import names module `module_path` itself (`import bleu`, `from . import bleu`),
        not a name inside it (`from bleu import score`)."""
        head = imported.rpartition(".")[0]
        return not head.strip(".") or self._module_of(importer, head) != module_path

    def _on_accelerator(self, target: Target, _: object) -> bool:
        """The file defining `target`, or a project file that imports it
        (directly or through files that import it), moves something to an
        accelerator (`ModuleSummary.accelerates`): the project runs its code
        on one. A library name, or a project that never does: False."""
        if not isinstance(target, Defined):
            return False
        importers = self.importers()
        seen = {target.path}
        todo = [target.path]
        while todo:
            path = todo.pop()
            if (self.summary(path) or ModuleSummary()).accelerates:
                return True
            for other in sorted(importers.get(path, ())):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return False

    def _named_on_accelerator(self, target: Target, _: object) -> bool:
        """A project file other than the definition's names `target` (imports it
        by name, or imports its module and reads it off or hands the module on)
        and runs on an accelerator (`_on_accelerator` of that file). A file that
        imports the module for another of its names does not count; a file that
        did not parse, a root not held whole or a library name: False."""
        importers = self._namers(target)
        return any(self._on_accelerator(Defined(path, ""), None) for path in sorted(importers or ()))

    def _named_elsewhere(self, target: Target, _: object) -> bool:
        """A project file other than the definition's may name `target` itself
        (as `_named_on_accelerator` reads it; a star import of its module
        counts): unlike `_used_elsewhere`, a file importing the module for
        another of its names does not. Unknown (a root not held whole, a file
        that did not parse, a library name): True."""
        if not isinstance(target, Defined):
            return True
        reach = self._reach_of(target)
        if reach is None or reach.unknown:
            return True
        module = self.module_name(target.path) or ""
        if module.rpartition(".")[2] in reach.foreign:
            return True  # the module imported as a package the project installs
        return bool(self._namers(target))

    def _namers(self, target: Target) -> Optional[Set[str]]:
        """The project files other than the definition's that name `target`
        (None: a library name, or a root not held whole)."""
        if not isinstance(target, Defined):
            return None
        reach = self._reach_of(target)
        if reach is None:
            return None
        importers = reach.names.get((target.path, WHOLE), set()) | reach.names.get((target.path, target.name), set())
        return importers - {target.path}

    def importers(self) -> Mapping[str, Set[str]]:
        """Project file -> the project files whose module-level imports name it
        (a module, a name in it, or a star import of it)."""
        if self._importers is None:
            found: Dict[str, Set[str]] = {}
            for path in self.paths:
                s = self.summary(path) or ModuleSummary()
                self._definitions(path)
                for imported in [i for _, i in s.imports] + list(s.star_imports):
                    module = self._module_of(path, imported)
                    if module is not None and module != path:
                        found.setdefault(module, set()).add(path)
            self._importers = found
        return self._importers

    def _module_of(self, importer: str, dotted: str) -> Optional[str]:
        """The project file a dotted import (`pkg.mod`, `pkg.mod.Name`, `.base`)
        names: the longest prefix that is a project module."""
        level = len(dotted) - len(dotted.lstrip("."))
        parts = [p for p in dotted[level:].split(".") if p]
        for k in range(len(parts), -1 if level else 0, -1):
            module = (
                self.table.relative(importer, level, parts[:k]) if level else self.table.absolute(importer, parts[:k])
            )
            if module is AMBIGUOUS:
                return None
            if isinstance(module, str):
                return module
        return None

    def _has_parameters(self, target: Target, _: object) -> Optional[bool]:
        """True when class `target` builds parameters (its own code, a base's, a
        submodule's), False when it certainly builds none (only buffers, plain
        values and parameter-free layers), None when we can't tell."""
        found = self._definition(target)
        if not isinstance(found, ClassSummary):
            return None
        assert isinstance(target, Defined)
        if found.parameters is not False:
            return found.parameters
        answers = set()
        for base in found.bases:
            resolved = self._resolve_in(target.path, base)
            if isinstance(resolved, Library) and resolved.name == "torch.nn.Module":
                continue
            answers.add(self._ask(Question.HAS_PARAMETERS, resolved) if isinstance(resolved, Defined) else None)
        for callee in found.submodules:
            resolved = self._resolve_in(target.path, callee)
            answers.add(self._ask(Question.HAS_PARAMETERS, resolved) if isinstance(resolved, Defined) else None)
        if True in answers:
            return True
        return None if None in answers else False

    def _unmoved_callers(self, target: Target, param: object) -> Tuple[str, ...]:
        """For a plain class (no bases) whose `__init__` takes `param`: the module
        constructions its calls hand it there ("`Net(...)` in train"), when the
        project calls it at least once, only directly, and every call hands over
        a module built unmoved (handoffs.py) of a class that certainly holds
        parameters on the CPU; () otherwise."""
        found = self._definition(target)
        if not isinstance(found, ClassSummary) or found.init_params is None or not isinstance(param, str):
            return ()
        if any(base != "object" for base in found.bases):
            return ()
        position = found.init_params.index(param) if param in found.init_params else None
        out: Set[str] = set()
        for path in self.paths:
            s = self.summary(path) or ModuleSummary()
            if not s.parsed:
                continue  # Python cannot run it either: it calls nothing
            self._definitions(path)
            imports = self._imports[path]
            for use in s.uses:
                root, _, rest = use.name.partition(".")
                expanded = imports.get(root, root) + ("." + rest if rest else "")
                if found.name not in use.name.split(".") and found.name not in expanded.split("."):
                    continue
                parts = use.name.split(".")
                k = next(
                    (k for k in range(1, len(parts) + 1) if self._resolve_in(path, ".".join(parts[:k])) == target), 0
                )
                if not k:
                    continue
                if k < len(parts) or use.args is None:
                    return ()  # `Trainer.from_config(...)`, a subclass, a value handed on
                handed = [h for h in use.args if h.key == param or (position is not None and h.key == position)]
                if len(handed) != 1 or not self._unmoved_module(path, handed[0].built):
                    return ()
                where = os.path.relpath(path, os.path.dirname(target.path)) if isinstance(target, Defined) else path
                out.add(f"`{handed[0].built}(...)` in {where}")
        return tuple(sorted(out))

    def _unmoved_module(self, path: str, callee: str) -> bool:
        """A call of `callee` (as written in file `path`) builds a module that
        holds parameters on the CPU: a torch.nn layer that has some, a
        torchvision or timm model, or a project module class whose own code (or
        a project base's) builds layers and places nothing."""
        resolved = self._resolve_in(path, callee)
        if isinstance(resolved, Library):
            name = resolved.name
            last = name.rsplit(".", 1)[-1]
            if library.class_kind(name) is ClassKind.MODULE:
                return not STATELESS_LAYER.match(last) and last not in NN_CONTAINER_LAYERS
            return name == "timm.create_model" or (name.startswith("torchvision.models.") and last[:1].islower())
        if resolved is None or self._ask(Question.CLASS_KIND, resolved) is not ClassKind.MODULE:
            return False
        return self._ask(Question.PLACES_ITSELF, resolved) is False and self._builds_layers(resolved, 0)

    def _builds_layers(self, target: Target, depth: int) -> bool:
        found = self._definition(target)
        if not isinstance(found, ClassSummary) or depth > MAX_DEPTH:
            return False
        assert isinstance(target, Defined)
        if found.builds_layers:
            return True
        for base in found.bases:
            resolved = self._resolve_in(target.path, base)
            if isinstance(resolved, Defined) and self._builds_layers(resolved, depth + 1):
                return True
        return False


def _parameter(found: FunctionSummary, position: object) -> Optional[str]:
    """The parameter of `found` an argument at `position` (an index, or a keyword) binds."""
    if isinstance(position, int) and not isinstance(position, bool):
        return found.params[position] if 0 <= position < len(found.params) else None
    return position if isinstance(position, str) and position in found.keywords else None


_QUESTIONS: Dict[Question, Callable[[ProjectIndex, Target, object], Answer]] = {
    Question.CLASS_KIND: ProjectIndex._class_kind,
    Question.BUILDS_LOADER: ProjectIndex._builds_loader,
    Question.GUARDS_GRAD: ProjectIndex._guards_grad,
    Question.RETURNS: ProjectIndex._returns,
    Question.MOVES_ARGUMENT: ProjectIndex._moves_argument,
    Question.TRAINS: ProjectIndex._trains,
    Question.PLACES_ITSELF: ProjectIndex._places_itself,
    Question.FORWARD_CONTAINER: ProjectIndex._forward_container,
    Question.HAS_PARAMETERS: ProjectIndex._has_parameters,
    Question.IMPORTED: ProjectIndex._imported,
    Question.USED_ELSEWHERE: ProjectIndex._used_elsewhere,
    Question.CALLED_GUARDED: ProjectIndex._called_guarded,
    Question.SYNCS_ARGUMENT: ProjectIndex._syncs_argument,
    Question.METHOD_SYNCS_ARGUMENT: ProjectIndex._method_syncs_argument,
    Question.METHOD_TIMES: ProjectIndex._method_times,
    Question.BUILDS_DATA_PARALLEL: ProjectIndex._builds_data_parallel,
    Question.ITERATES_ARGUMENT: ProjectIndex._iterates_argument,
    Question.UNMOVED_CALLERS: ProjectIndex._unmoved_callers,
    Question.ON_ACCELERATOR: ProjectIndex._on_accelerator,
    Question.NAMED_ON_ACCELERATOR: ProjectIndex._named_on_accelerator,
    Question.NAMED_ELSEWHERE: ProjectIndex._named_elsewhere,
    Question.ALLOCATES: ProjectIndex._allocates,
    Question.DATASET_ITEMS: ProjectIndex._dataset_items,
    Question.RESULT_ITERATED_AGAIN: ProjectIndex._result_iterated_again,
}


class FileView:
    """The index as one file asks it: names resolve from that file, and every
    question is recorded with its answer (`ProjectIndex.take_dependencies`)."""

    def __init__(self, index: ProjectIndex, path: str) -> None:
        self.index = index
        self.path = path

    @staticmethod
    def local(name: str) -> str:
        """How to ask about top-level name `name` of this file itself."""
        return LOCAL + name

    def class_kind(self, qualname: str) -> Optional[ClassKind]:
        """What the class `qualname` subclasses: MODULE, DATASET, LOADER... (None: unknown)."""
        answer = self.index._record(self.path, Question.CLASS_KIND, qualname, None)
        return answer if isinstance(answer, ClassKind) else None

    def loader_names(self) -> Tuple[str, ...]:
        """`ProjectIndex.loader_names` (recorded: a new loader class anywhere
        invalidates the cached results that relied on the list)."""
        answer = self.index._record(self.path, Question.LOADER_NAMES, "", None)
        return answer if isinstance(answer, tuple) else ()

    def builds_loader(self, qualname: str) -> bool:
        """A call of class `qualname` builds a torch DataLoader with DataLoader's
        own arguments (a subclass that defines no `__init__` of its own)."""
        return bool(self.index._record(self.path, Question.BUILDS_LOADER, qualname, None))

    def guards_grad(self, qualname: str, called: bool = True) -> bool:
        """`qualname(...)` (called) or bare `qualname`, as a decorator or `with`
        item, turns autograd off."""
        return bool(self.index._record(self.path, Question.GUARDS_GRAD, qualname, called))

    def returns(self, qualname: str) -> Optional[ValueKind]:
        """What calling function `qualname` evidently returns (None: unknown)."""
        answer = self.index._record(self.path, Question.RETURNS, qualname, None)
        return answer if isinstance(answer, ValueKind) else None

    def moves_argument(self, qualname: str, index: Union[int, str]) -> bool:
        """Function `qualname` moves (a part of) its argument at position `index`
        (or keyword `index`) to a device."""
        return bool(self.index._record(self.path, Question.MOVES_ARGUMENT, qualname, index))

    def syncs_argument(self, qualname: str, index: Union[int, str]) -> Optional[str]:
        """Function `qualname` reads its argument at position `index` (or keyword
        `index`) on the host every call: the method (`item`, `tolist`), or None."""
        answer = self.index._record(self.path, Question.SYNCS_ARGUMENT, qualname, index)
        return answer if isinstance(answer, str) else None

    def method_syncs_argument(self, cls: str, method: str, index: Union[int, str]) -> Optional[str]:
        """Method `method` of class `cls`, called on an instance, reads its argument at
        position `index` (or keyword `index`; `self` not counted) on the host every
        call: the method (`item`, `tolist`), or None."""
        answer = self.index._record(self.path, Question.METHOD_SYNCS_ARGUMENT, f"{cls}.{method}", index)
        return answer if isinstance(answer, str) else None

    def method_times(self, cls: str, method: str) -> bool:
        """Method `method` of class `cls` reads a clock (`MetricLogger.log_every`,
        which times each step it yields)."""
        return bool(self.index._record(self.path, Question.METHOD_TIMES, f"{cls}.{method}", None))

    def iterates_argument(self, qualname: str, index: Union[int, str]) -> bool:
        """Function `qualname` iterates its argument at position `index` (or keyword
        `index`) with a `for` of its own on every call."""
        return bool(self.index._record(self.path, Question.ITERATES_ARGUMENT, qualname, index))

    def builds_data_parallel(self, qualname: str) -> bool:
        """A call of `qualname` builds a `torch.nn.DataParallel`: a project subclass
        of it, or a project function that returns one (on some path)."""
        return bool(self.index._record(self.path, Question.BUILDS_DATA_PARALLEL, qualname, None))

    def allocates(self, qualname: str) -> Optional[Tuple[str, ...]]:
        """Function `qualname` returns, in every `return`, a tensor it allocates
        fresh on the CPU: each return's factory (`torch.rand`); None: not evidently."""
        answer = self.index._record(self.path, Question.ALLOCATES, qualname, None)
        return answer if isinstance(answer, tuple) else None

    def places_itself(self, qualname: str) -> Optional[bool]:
        """Code in class `qualname` (or a project base class) moves something or
        passes `device=`: its instances may be built on a device. None: not a
        class the index knows."""
        answer = self.index._record(self.path, Question.PLACES_ITSELF, qualname, None)
        return answer if isinstance(answer, bool) else None

    def dataset_items(self, qualname: str) -> Optional[ItemWork]:
        """What the own `__getitem__` of Dataset class `qualname` does per item:
        reads a file, only indexes memory, or None."""
        answer = self.index._record(self.path, Question.DATASET_ITEMS, qualname, None)
        return ItemWork(answer) if isinstance(answer, str) else None

    def forward_returns_container(self, qualname: str) -> bool:
        """The `forward` of module class `qualname` (or of its project base)
        returns a list, tuple or dict in every `return`."""
        return bool(self.index._record(self.path, Question.FORWARD_CONTAINER, qualname, None))

    def has_parameters(self, qualname: str) -> Optional[bool]:
        """Class `qualname` builds parameters (True), certainly builds none (False:
        a module of buffers only records no graph), or we can't tell (None)."""
        answer = self.index._record(self.path, Question.HAS_PARAMETERS, qualname, None)
        return answer if isinstance(answer, bool) else None

    def imported(self, qualname: str) -> bool:
        """Another project file imports `qualname` (or its module): it may be used there."""
        return bool(self.index._record(self.path, Question.IMPORTED, qualname, None))

    def used_elsewhere(self, qualname: str) -> bool:
        """Code outside this file may use `qualname`: a project file imports it
        (or its module), or this file is the whole project."""
        return bool(self.index._record(self.path, Question.USED_ELSEWHERE, qualname, None))

    def called_guarded(self, qualname: str, method: Optional[str] = None) -> bool:
        """Every call in the project of function `qualname` (of method `method`
        of class `qualname`, by name) runs under no_grad/inference_mode."""
        return bool(self.index._record(self.path, Question.CALLED_GUARDED, qualname, method))

    def unmoved_callers(self, qualname: str, param: str) -> Tuple[str, ...]:
        """Every project call of plain class `qualname` hands its `__init__`'s
        `param` a module built in the calling code and never moved, wrapped or
        handed elsewhere there: those constructions, described; () when there is
        no call, or one is not so (or is not a direct call)."""
        answer = self.index._record(self.path, Question.UNMOVED_CALLERS, qualname, param)
        return answer if isinstance(answer, tuple) else ()

    def on_accelerator(self, qualname: str) -> bool:
        """The project runs the code of `qualname` on an accelerator: its file, or
        a project file that imports it (transitively), moves something to one."""
        return bool(self.index._record(self.path, Question.ON_ACCELERATOR, qualname, None))

    def result_iterated_again(self, qualname: str, element: int) -> bool:
        """Another project file iterates the result of function `qualname`
        (`element` of it; -1: the whole) in a loop that repeats."""
        return bool(self.index._record(self.path, Question.RESULT_ITERATED_AGAIN, qualname, element))

    def named_on_accelerator(self, qualname: str) -> bool:
        """Another project file that names `qualname` itself (not just its module
        for another name) runs on an accelerator."""
        return bool(self.index._record(self.path, Question.NAMED_ON_ACCELERATOR, qualname, None))

    def named_elsewhere(self, qualname: str) -> bool:
        """Another project file may name `qualname` itself (imports it by name,
        star-imports or reads it off its module); a file importing the module
        for another of its names does not count. Unknown: True."""
        return bool(self.index._record(self.path, Question.NAMED_ELSEWHERE, qualname, None))

    def trains(self, qualname: str) -> bool:
        """Function `qualname` calls `.backward()` or an optimizer step (itself or
        through project helpers)."""
        return bool(self.index._record(self.path, Question.TRAINS, qualname, None))
