"""The code's role: does it do real work on data?

Speed advice matters only in code that trains (a loop that calls
`.backward()` or an optimizer step) or runs inference over data (a loop over a
DataLoader, a dataset or batches, or a decoding loop). It does not matter in
unit tests, in forward-only demonstrations (a model called once on a random
tensor to show a shape), in the `if __name__ == "__main__":` smoke block of a
module whose job is to define models, in scripts that only export,
benchmark latency or print a model summary, or in harnesses that measure
memory step by step (their settings are what they measure).

Tests are known by path (pytest's rules) and by content: a file that imports
pytest or runs `unittest.main()`, a file or function that checks gradients
numerically (`gradcheck`) and does no real work, and test
classes (`unittest.TestCase`, pytest's `Test*`) with every helper in them.
Placement rules ask `quiet` (test code or a dead branch) once, for every
report (`Rule.QUIET_IN_TESTS`).
"""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, Hashable, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import (
    BindingKind,
    Call,
    Facts,
    Function,
    Loop,
    Part,
    Scope,
    ScopeKind,
    Site,
    dotted_name,
)
from torchlint.analysis.helpers import Helpers
from torchlint.analysis.knowledge import MEMORY_READS, MEMORY_RESETS
from torchlint.analysis.loops import Loops
from torchlint.analysis.path_roles import PathRole, path_role
from torchlint.analysis.values import Values
from torchlint.analysis.vocabulary import (
    BENCHMARK_CALLS,
    BENCHMARK_NAME,
    CLOCKS,
    DEBUGGER_BREAKS,
    ENTRY_POINT_NAME,
    EXPORT_CALLS,
    GRADIENT_CHECKS,
    SUMMARY_CALLS,
    TEST_CLASS,
    TEST_FRAMEWORKS,
    TEST_FUNCTION,
)

MAX_CALL_DEPTH = 3


class Roles:
    def __init__(self, facts: Facts, values: Values, helpers: Helpers, loops: Loops, path: str) -> None:
        self.facts = facts
        self.values = values
        self.helpers = helpers
        self.loops = loops
        self.path = path
        role = path_role(path)
        self._test_path = role is PathRole.TEST
        self._test_file: Optional[bool] = None
        self.benchmark_file = role is PathRole.BENCHMARK
        self._work_functions: Optional[Set[int]] = None
        self._tooling_scopes: Optional[Set[int]] = None
        self._memo: Dict[Tuple[Hashable, ...], bool] = {}
        self._unreached: Optional[FrozenSet[str]] = None

    # -- tests ------------------------------------------------------------------------

    @property
    def test_file(self) -> bool:
        """A test file: by its path (pytest's rules), or by what it does: it
        imports pytest, runs `unittest.main()`, or, doing no real work (no loop
        that trains or walks data), checks gradients numerically (`gradcheck`:
        a CUDA extension's check script). Not by the name `test.py` alone: a
        script that predicts on a test image is often called so."""
        if self._test_file is None:
            self._test_file = self._test_path or self._tests_by_content()
        return self._test_file

    def _tests_by_content(self) -> bool:
        if any(target.split(".")[0] == "pytest" for target in self.facts.aliases.values()):
            return True
        if any(c.qualname == "unittest.main" for c in self.facts.calls):
            return True
        if not any(c.qualname in GRADIENT_CHECKS for c in self.facts.calls):
            return False
        return not any(self.loops.role(loop) is not None for loop in self.facts.loops)

    def is_test_class(self, scope: Scope) -> bool:
        """A `unittest.TestCase` subclass, or a pytest class (`Test*` with `test*` methods)."""
        info = self.facts.classes.get(scope.name)
        if info is None:
            return False
        if any(
            (self.facts.qualname(b) or dotted_name(b) or "").split(".")[-1] in ("TestCase", "IsolatedAsyncioTestCase")
            or (self.facts.qualname(b) or "").split(".")[0] in TEST_FRAMEWORKS
            for b in info.bases
        ):
            return True
        return bool(TEST_CLASS.match(scope.name)) and any(
            fn.scope.parent is scope and TEST_FUNCTION.match(fn.name) for fn in self.facts.functions
        )

    def is_test_function(self, fn: Function) -> bool:
        """A unit test: any `test*` function in a test file, a function that
        checks gradients numerically (`gradcheck`); elsewhere a `test_*`
        function (or a `unittest.TestCase` method) with no loop over data (a
        `test(model, loader)` that walks a test set is an evaluation)."""
        if fn.name == "<lambda>":
            return False
        if any(c.qualname in GRADIENT_CHECKS for c in self.helpers.calls_in(fn)):
            return True
        if self.is_debug_function(fn):
            return True
        parent = fn.scope.parent
        if parent is not None and parent.kind == ScopeKind.CLASS:
            info = self.facts.classes.get(parent.name)
            if info is not None and any(
                (self.facts.qualname(b) or dotted_name(b) or "").endswith("TestCase") for b in info.bases
            ):
                return fn.name.startswith("test")
        if not TEST_FUNCTION.match(fn.name):
            return False
        if self.test_file:
            return True
        if fn.name.lower().strip("_") == "test":
            return False
        return not any(self.loops.is_data_loop(loop) for loop in self.facts.loops_in(fn.scope))

    def is_debug_function(self, fn: Function) -> bool:
        """A debugging routine: a top-level function that stops in a debugger
        (`pdb.set_trace()`, `breakpoint()`), holds no loop that trains or walks
        data, and that nothing calls (in its file) or imports (in the project)."""
        if fn.scope.parent is None or fn.scope.parent.kind != ScopeKind.MODULE:
            return False
        if not any(self._debugger_break(c) for c in self.helpers.calls_in(fn)):
            return False
        if self.values.callers(fn) or any(self.loops.role(lp) is not None for lp in self.facts.loops_in(fn.scope)):
            return False
        project = self.values.project
        return project is None or not project.imported(project.local(fn.name))

    def _debugger_break(self, call: Call) -> bool:
        func = call.node.func
        if isinstance(func, cst.Name) and func.value == "breakpoint":
            return not self.facts.bindings_of("breakpoint")  # the builtin
        return call.qualname in DEBUGGER_BREAKS

    def in_test(self, site: Site) -> bool:
        """In a test file, a test function, or a test class (its helpers too)."""
        if self.test_file:
            return True
        for scope in site.scope.chain():
            if scope.kind == ScopeKind.FUNCTION:
                fn = self.facts.function_of(scope)
                if fn is not None and self.is_test_function(fn):
                    return True
            elif scope.kind == ScopeKind.CLASS and self.is_test_class(scope):
                return True
        return False

    def quiet(self, site: Site) -> bool:
        """Test code or a branch that never runs: where rules that advise on
        placement (and on speed) stay silent, whatever else the site does."""
        return in_dead_branch(site, self.facts) or self.in_test(site) or self.in_unreached(site)

    def in_unreached(self, site: Site) -> bool:
        """In a top-level function nothing can run (`unreached_names`), or in a
        function or class nested in one. Without a project index: can't tell,
        so no."""
        if self.values.project is None:
            return False
        return self._top_definition(site) in self.unreached_names()

    def unreached_names(self) -> FrozenSet[str]:
        """The file's top-level functions nothing can run: no read of the name
        in the file lies in module code or in a top-level function or class
        that can run, no string names it (`__all__`, a registry key,
        `getattr`), it has no decorator (a registration, a CLI command) and is
        not an entry point's name (`main`: named in packaging files), and no
        other project file may use it (imports it, or its module whole:
        `used_elsewhere`). Functions that only call each other are unreached
        together. Classes are never unreached: a model class no file imports
        is still one a user swaps in by editing an import."""
        if self._unreached is None:
            self._unreached = frozenset(self._compute_unreached())
        return self._unreached

    def _compute_unreached(self) -> Set[str]:
        project = self.values.project
        if project is None:
            return set()
        strings = {s.evaluated_value for s, _ in self.facts.strings if isinstance(s.evaluated_value, str)}
        # each candidate's readers: the top-level definitions its reads lie in
        readers: Dict[str, Set[str]] = {}
        for fn in self.facts.functions:
            name = fn.name
            if fn.scope.parent is not self.facts.module_scope or name == "<lambda>" or fn.decorators:
                continue
            if ENTRY_POINT_NAME.match(name) or name in strings or len(self.facts.bindings_of(name)) != 1:
                continue
            tops = [self._top_definition(use.site) for use in self.facts.uses_of(name)]
            if None in tops:
                continue  # read in module code: it runs
            readers[name] = {top for top in tops if top is not None} - {name}
        candidates = {name for name in readers if not project.used_elsewhere(project.local(name))}
        unreached = set(candidates)
        changed = True
        while changed:
            changed = False
            for name in sorted(unreached):
                if any(r not in unreached for r in readers[name]):
                    unreached.discard(name)
                    changed = True
        return unreached

    def _top_definition(self, site: Site) -> Optional[str]:
        """The name of the top-level function or class whose body holds `site`."""
        top: Optional[Scope] = None
        for scope in site.scope.chain():
            if scope.kind in (ScopeKind.FUNCTION, ScopeKind.CLASS) and scope.parent is self.facts.module_scope:
                top = scope
        return top.name if top is not None else None

    def _top_function(self, site: Site) -> Optional[Function]:
        top = None
        for scope in site.scope.chain():
            if scope.kind == ScopeKind.FUNCTION and scope.parent is not None and scope.parent.kind == ScopeKind.MODULE:
                top = scope
        return self.facts.function_of(top) if top is not None else None

    # -- model modules and smoke blocks --------------------------------------------------

    def defines_models(self) -> bool:
        return bool(self.values.module_classes())

    def in_smoke_block(self, site: Site) -> bool:
        """In the `__main__` block of a module whose job is to define things
        (models, losses, datasets: classes) and whose `__main__` block does no
        real work (no training, no loop over data): a smoke test of those. A
        top-level function that only that block calls (`def main():` under a
        `# Test code` comment) is part of it."""
        if not self.facts.classes:
            return False
        if not site.in_main_guard:
            fn = self._top_function(site)
            return fn is not None and self._cached(("smoke-only", id(fn.node)), lambda: self._smoke_only(fn))
        return self._smoke_main()

    def _smoke_only(self, fn: Function) -> bool:
        """`fn` is called only from the module's `__main__` block (and handed to nothing)."""
        callers = self.values.callers(fn)
        if not callers or len(self.facts.uses_of(fn.name)) != len(callers):
            return False
        if not all(c.site.scope is self.facts.module_scope and c.site.in_main_guard for c in callers):
            return False
        project = self.values.project
        if project is None or project.named_elsewhere(project.local(fn.name)):
            return False  # another file may call it (in a loop); without an index, can't tell
        return self._smoke_main()

    def _smoke_main(self) -> bool:
        return self._cached(
            ("smoke",),
            lambda: (
                not any(
                    self.loops.role(loop) is not None
                    for loop in self.facts.loops
                    if loop.scope is self.facts.module_scope and self._loop_site(loop).in_main_guard
                )
                and not self._main_calls_work()
            ),
        )

    def _main_calls_work(self) -> bool:
        """The `__main__` block trains (`trainer.train()`), or calls a same-file
        function that does real work or trains."""
        for call in self.facts.calls:
            if call.site.scope is self.facts.module_scope and call.site.in_main_guard:
                if self.values.is_train_call(call):
                    return True
                fn = self.helpers.function(call)
                if fn is not None and (self.function_does_work(fn) or self._function_trains(fn)):
                    return True
        return False

    # -- tooling scripts: export, benchmark, summary -----------------------------------------

    def in_tooling(self, site: Site) -> bool:
        """In a function that exports, benchmarks or summarises a model (by its
        calls or its name), or a file that does only that (no training)."""
        if self._tooling_scopes is None:
            scopes: Set[int] = set()
            tool_calls = [c for c in self.facts.calls if self._is_tool_call(c)]
            for c in tool_calls:
                for scope in c.site.scope.chain():
                    if scope.kind == ScopeKind.FUNCTION:
                        fn = self.facts.function_of(scope)
                        if not (self._incidental(c) and fn is not None and self._function_trains(fn)):
                            scopes.add(id(scope.node))  # (a training `main()` that prints a summary first is not)
                        break
            at_module = any(c.site.scope.function is None for c in tool_calls)
            clocks = {
                id(c.site.scope.function.node) for c in tool_calls if c.qualname in CLOCKS and c.site.scope.function
            }
            for c in self._calls_of_clock_helpers(clocks):
                caller = c.site.scope.function
                if caller is None:
                    at_module = True
                else:
                    fn = self.facts.function_of(caller)
                    if fn is not None and not self._function_trains(fn):
                        scopes.add(id(caller.node))  # times its loop with `now()`, a helper that syncs
            for fn in self.facts.functions:
                if fn.name != "<lambda>" and BENCHMARK_NAME.search(fn.name) and not self._function_trains(fn):
                    scopes.add(id(fn.scope.node))
            module = self.facts.module_scope
            trains = any(self.values.is_train_call(c) for c in self.facts.calls)
            # a work loop outside the functions that time, export or summarise (`evaluate()`
            # beside them); a tool call in module code makes every loop the tool's
            other_work = not at_module and any(
                self.loops.role(loop) is not None and not any(id(s.node) in scopes for s in loop.scope.chain())
                for loop in self.facts.loops
            )
            if module is not None and ((tool_calls and not other_work) or self.benchmark_file) and not trains:
                scopes.add(id(module.node))  # a script that only exports, benchmarks or profiles
            measuring = [loop for loop in self.facts.loops if self._measures_memory(loop)]
            for loop in measuring:
                scopes.add(id(loop.scope.node))
            if module is not None and measuring:
                scopes.add(id(module.node))  # a memory-measurement harness: its settings are what it measures
            self._tooling_scopes = scopes
        return any(id(s.node) in self._tooling_scopes for s in site.scope.chain())

    def _calls_of_clock_helpers(self, clocks: Set[int]) -> List[Call]:
        """Calls, from outside it, of a same-file function (by its node's id in
        `clocks`) whose body reads a clock for timing: `now()`, which synchronizes
        and returns `time.perf_counter()`."""
        out = []
        for c in self.facts.calls:
            fn = self.helpers.function(c) if clocks else None
            if fn is not None and id(fn.node) in clocks and not any(s.node is fn.node for s in c.site.scope.chain()):
                out.append(c)
        return out

    def _measures_memory(self, loop: Loop) -> bool:
        """Every iteration of `loop` reads the accelerator's memory
        (`memory_allocated()`, `max_memory_allocated()`...) and clears the
        allocator's cache or resets the peak (`empty_cache()`,
        `reset_peak_memory_stats()`): a harness measuring memory step by step."""
        reads = resets = False
        for call in self.loops.calls_in(loop):
            name = call.method or (call.qualname or "").rsplit(".", 1)[-1]
            if name not in _MEMORY_READS and name not in _MEMORY_RESETS:
                continue
            if self.loops.occasional_guard(call.site, loop):
                continue
            reads = reads or name in _MEMORY_READS
            resets = resets or name in _MEMORY_RESETS
        return reads and resets

    def _is_tool_call(self, call: Call) -> bool:
        q = call.qualname or ""
        if self._describes_model(call) or q in BENCHMARK_CALLS or q.startswith("torch.utils.benchmark."):
            return True
        return q in CLOCKS and (self._timed_forward(call) or self._timing_comparison(call))

    def _incidental(self, call: Call) -> bool:
        """A tool call a training function may make without being tooling: an
        export or a summary of the model, or a `torch.cuda.synchronize()` with no
        clock read in its scope (nothing is timed)."""
        if self._describes_model(call):
            return True
        return call.qualname == "torch.cuda.synchronize" and not any(
            c.qualname in CLOCKS for c in self.helpers.calls_in_scope(call.site.scope)
        )

    @staticmethod
    def _describes_model(call: Call) -> bool:
        """An export or a summary of a model (`torch.onnx.export`, `torchsummary.summary`,
        `thop.profile`): a one-off beside training, unlike a benchmark's timing."""
        q = call.qualname or ""
        return (
            q in EXPORT_CALLS
            or q in SUMMARY_CALLS
            or q.startswith(("torch.onnx.", "torchsummary.", "torchinfo.", "thop."))
        )

    def _timed_forward(self, call: Call) -> bool:
        """A clock read in the same scope as `torch.cuda.synchronize()`: latency timing."""
        return any(c.qualname == "torch.cuda.synchronize" and c.site.scope is call.site.scope for c in self.facts.calls)

    def _timing_comparison(self, call: Call) -> bool:
        """Several timed regions in a scope that does not train (`start = now();
        ...; print(now() - start)` twice or more): a script comparing how fast
        variants run, whose slow variant is slow on purpose."""
        calls = self.helpers.calls_in_scope(call.site.scope)
        if sum(c.qualname in CLOCKS for c in calls) < 4:
            return False
        return not any(self.values.is_train_call(c) for c in calls)

    def _function_trains(self, fn: Function) -> bool:
        return self.helpers.summary(fn).trains

    # -- real work -----------------------------------------------------------------------

    def excluded(self, site: Site) -> bool:
        """Tests, smoke blocks, tooling and dead branches: speed advice does not apply here."""
        return self.quiet(site) or self.in_smoke_block(site) or self.in_tooling(site)

    def work_loop(self, site: Site, innermost: bool = False) -> Optional[Loop]:
        """The outermost (or innermost) loop around `site` (in its scope) that
        trains or runs inference over data, if any."""
        found = None
        current = site.loop
        while current is not None and current.scope is site.scope:
            if self.loops.role(current) is not None:
                found = current
                if innermost:
                    break
            current = current.parent
        return found

    def function_does_work(self, fn: Function) -> bool:
        """The function holds a work loop, or is called from one (or from a
        function that is, up to a few calls deep)."""
        return id(fn.node) in self.work_functions()

    def work_functions(self) -> Set[int]:
        if self._work_functions is None:
            found: Set[int] = set()
            for loop in self.facts.loops:
                if self.loops.role(loop) is not None:
                    fn = self.facts.function_of(loop.scope) if loop.scope.kind == ScopeKind.FUNCTION else None
                    if fn is not None:
                        found.add(id(fn.node))
            # Called from a work loop, transitively.
            frontier = [c for c in self.facts.calls if self.work_loop(c.site) is not None]
            seen: Set[int] = set()
            for _ in range(MAX_CALL_DEPTH):
                nxt = []
                for call in frontier:
                    fn = self.helpers.function(call)
                    if fn is None or id(fn.node) in seen:
                        continue
                    seen.add(id(fn.node))
                    found.add(id(fn.node))
                    nxt.extend(self.helpers.calls_in(fn))
                frontier = nxt
            self._work_functions = found
        return self._work_functions

    def does_work(self, site: Site) -> bool:
        """`site` runs as part of real work: in a work loop, or in a function that
        holds one or is called from one; and not in tests, smoke blocks or tooling."""
        if self.excluded(site):
            return False
        if self.work_loop(site) is not None:
            return True
        for scope in site.scope.chain():
            if scope.kind in (ScopeKind.FUNCTION, ScopeKind.LAMBDA):
                fn = self.facts.function_of(scope)
                if fn is not None and self.function_does_work(fn):
                    return True
        return False

    def runs_on_import(self, site: Site, depth: int = 0) -> bool:
        """`site` runs when the module is imported: module-level code outside
        `if __name__ == "__main__":`, or a same-file function such code calls
        (transitively). Worker processes started with spawn (Windows, macOS)
        import the main module again, so such code runs in every worker too."""
        fn_scope = site.scope.function
        if fn_scope is None:
            return not site.in_main_guard
        fn = self.facts.function_of(fn_scope)
        if fn is None or depth >= 8:
            return True  # can't tell: say it might
        key = ("runs_on_import", id(fn.node))
        return self._cached(key, lambda: any(self.runs_on_import(c.site, depth + 1) for c in self.values.callers(fn)))

    def in_model_setup(self, site: Site) -> bool:
        """In the `__init__` (or another set-up method) of a same-file nn.Module:
        code that builds the model and runs once."""
        fn_scope = site.scope.function
        parent = fn_scope.parent if fn_scope is not None else None
        return (
            fn_scope is not None
            and parent is not None
            and parent.kind == ScopeKind.CLASS
            and parent.name in self.values.module_classes()
            and (fn_scope.name in ("__init__", "reset_parameters") or "init" in fn_scope.name.lower())
        )

    def in_model_method(self, site: Site) -> bool:
        """In a method of a same-file nn.Module (forward, helpers): runs per batch
        wherever the model is trained or served."""
        for scope in site.scope.chain():
            if scope.kind == ScopeKind.CLASS:
                return scope.name in self.values.module_classes()
        return False

    # -- plumbing -------------------------------------------------------------------------

    def _cached(self, key: Tuple[Hashable, ...], compute: Callable[[], bool]) -> bool:
        if key not in self._memo:
            self._memo[key] = False
            self._memo[key] = compute()
        return self._memo[key]

    def _loop_site(self, loop: Loop) -> Site:
        site = self.facts.site_of_statement(loop.node)
        assert site is not None
        return site

    def enclosing_function(self, site: Site) -> Optional[Function]:
        for scope in site.scope.chain():
            if scope.kind == ScopeKind.FUNCTION:
                return self.facts.function_of(scope)
        return None

    def script_level(self, scope: Scope) -> bool:
        return scope.kind == ScopeKind.MODULE


# The accelerator memory API (`torch.cuda.*`, `torch.xpu.*`, any device module's).
_MEMORY_READS = MEMORY_READS
_MEMORY_RESETS = MEMORY_RESETS


def _constant_truth(test: cst.BaseExpression) -> Optional[bool]:
    """The truth of a constant `if` test (`if 1:`, `if False:`), else None."""
    if isinstance(test, cst.Integer):
        return test.evaluated_value != 0
    if isinstance(test, cst.Name) and test.value in ("True", "False", "None"):
        return test.value == "True"
    return None


def in_dead_branch(site: Site, facts: Optional[Facts] = None) -> bool:
    """`site` sits in a branch that never runs: the body of `if 0:`/`if False:`,
    or the `else` of `if 1:`/`if True:` (a switch left in the code), or a branch
    on `i == k` that a constant loop `for i in range(...)` around it never (or
    always) takes (with `facts`: `i` is not rebound inside that loop), or one
    whose test compares a name that only integer literals reach
    (`ngpu = 1` ... `if use_cuda and ngpu > 1:`)."""
    ranges: Dict[str, Set[int]] = {}
    for owner, part in site.region:
        if isinstance(owner, cst.For) and part is Part.BODY and facts is not None:
            found = _constant_range(owner, facts)
            if found is not None:
                ranges[found[0]] = found[1]
            continue
        if not isinstance(owner, cst.If):
            continue
        truth = _constant_truth(owner.test)
        if truth is None:
            truth = _range_truth(owner.test, ranges)
        if truth is None and facts is not None:
            truth = _literal_truth(owner.test, site, facts)
        if truth is None:
            continue
        if (part is Part.BODY and not truth) or (part is Part.ELSE and truth):
            return True
    return False


_MAX_RANGE = 64
_COMPARE: Dict[type, Callable[[int, int], bool]] = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.GreaterThan: lambda a, b: a > b,
    cst.GreaterThanEqual: lambda a, b: a >= b,
    cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b,
}
_MIRROR: Dict[type, type] = {
    cst.GreaterThan: cst.LessThan,
    cst.LessThan: cst.GreaterThan,
    cst.GreaterThanEqual: cst.LessThanEqual,
    cst.LessThanEqual: cst.GreaterThanEqual,
}


def _literal_truth(test: cst.BaseExpression, site: Site, facts: Facts) -> Optional[bool]:
    """The truth of a test on names that only integer literals reach (`ngpu = 1`
    in an earlier cell, then `if (device.type == 'cuda') and (ngpu > 1):`),
    through `and`, `or` and `not`; None when any part that decides it is unknown."""
    if isinstance(test, cst.BooleanOperation):
        a, b = _literal_truth(test.left, site, facts), _literal_truth(test.right, site, facts)
        if isinstance(test.operator, cst.And):
            return False if False in (a, b) else (True if a is b is True else None)
        return True if True in (a, b) else (False if a is b is False else None)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _literal_truth(test.expression, site, facts)
        return None if inner is None else not inner
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    left, target = test.left, test.comparisons[0]
    right, op = target.comparator, type(target.operator)
    if isinstance(left, cst.Integer) and isinstance(right, cst.Name):
        left, right, op = right, left, _MIRROR.get(op, op)
    if not (isinstance(left, cst.Name) and isinstance(right, cst.Integer)) or op not in _COMPARE:
        return None
    values = _literal_values(left.value, site, facts)
    if not values:
        return None
    k = int(right.evaluated_value)
    truths = {_COMPARE[op](v, k) for v in values}
    return truths.pop() if len(truths) == 1 else None


def _literal_values(name: str, site: Site, facts: Facts) -> Set[int]:
    """The integers bound to `name` where every binding reaching `site` is
    `name = <integer literal>`; empty otherwise."""
    reaching = facts.reaching(name, site)
    values = set()
    for b in reaching:
        if b.kind != BindingKind.ASSIGN or b.index is not None or not isinstance(b.value, cst.Integer):
            return set()
        values.add(int(b.value.evaluated_value))
    return values


def _constant_range(loop: cst.For, facts: Facts) -> Optional[Tuple[str, Set[int]]]:
    """(`i`, its values) for `for i in range(a[, b[, c]])` with integer literals,
    when nothing else binds `i` inside the loop; else None."""
    if not isinstance(loop.target, cst.Name) or not isinstance(loop.iter, cst.Call):
        return None
    func = loop.iter.func
    if not isinstance(func, cst.Name) or func.value != "range" or facts.bindings_of("range"):
        return None
    bounds = []
    for arg in loop.iter.args:
        if arg.keyword is not None or arg.star or not isinstance(arg.value, cst.Integer):
            return None
        bounds.append(int(arg.value.evaluated_value))
    if not 1 <= len(bounds) <= 3 or (len(bounds) == 3 and bounds[2] == 0):
        return None
    values = range(*bounds)
    if len(values) > _MAX_RANGE:
        return None
    name = loop.target.value
    for b in facts.bindings_of(name):
        if b.target is not loop.target and (loop, Part.BODY) in b.site.region:
            return None  # rebound inside the loop
    return name, set(values)


def _range_truth(test: cst.BaseExpression, ranges: Dict[str, Set[int]]) -> Optional[bool]:
    """The truth of `i == k` / `i != k` for a loop variable `i` of known values."""
    if not ranges or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    left, target = test.left, test.comparisons[0]
    right = target.comparator
    if isinstance(left, cst.Integer) and isinstance(right, cst.Name):
        left, right = right, left
    if not (isinstance(left, cst.Name) and isinstance(right, cst.Integer)) or left.value not in ranges:
        return None
    values, k = ranges[left.value], int(right.evaluated_value)
    if isinstance(target.operator, cst.Equal):
        return False if k not in values else (True if values == {k} else None)
    if isinstance(target.operator, cst.NotEqual):
        return True if k not in values else (False if values == {k} else None)
    return None


def is_expression_statement(site: Site) -> bool:
    return isinstance(site.stmt, cst.Expr)
