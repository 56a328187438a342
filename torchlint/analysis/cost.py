"""Whether a cost matters: how often a piece of code runs.

A per-iteration cost (an allocation, a sync, a Python loop over elements)
is worth a finding only where it is paid at every step of real work: every
iteration of a per-batch loop (directly or in a same-file helper the loop
calls), a model's own methods (they run on every forward), and a Lightning
module's `*_step` hooks and the same-file helpers they call. Code that runs
once (at import, per call of a function called once, per epoch, in a
demo) pays it once: nothing measurable to gain, so the rules stay silent.
"""

from __future__ import annotations

import enum
from typing import Dict, Optional

import libcst as cst

from torchlint.analysis.facts import Facts, Function, Scope, ScopeKind, Site
from torchlint.analysis.helpers import Helpers
from torchlint.analysis.loops import Loops
from torchlint.analysis.roles import Roles
from torchlint.analysis.values import Values

# Model methods that run once, to build or initialise the model.
_SETUP_METHODS = ("__init__", "reset_parameters", "extra_repr", "__repr__")
_LIGHTNING_BASES = ("LightningModule", "pl.LightningModule", "L.LightningModule")
_MAX_DEPTH = 3


class Frequency(enum.Enum):
    """How often a site runs during real work."""

    ONCE = "once"  # at import, per epoch, per call of a function called a few times
    PER_STEP = "per step"  # every batch, every forward, every optimizer step


class Cost:
    def __init__(self, facts: Facts, values: Values, helpers: Helpers, loops: Loops, roles: Roles) -> None:
        self.facts = facts
        self.values = values
        self.helpers = helpers
        self.loops = loops
        self.roles = roles
        self._per_step_functions: Dict[int, bool] = {}
        self._steps: Optional[bool] = None  # the file has a loop that does per-step work

    def frequency(self, site: Site) -> Frequency:
        """How often `site` runs: PER_STEP or ONCE."""
        if self.roles.excluded(site):
            return Frequency.ONCE
        if self.loops.hot_context(site) is not None:
            return Frequency.PER_STEP
        fn_scope = site.scope.function
        fn = self.facts.function_of(fn_scope) if fn_scope is not None else None
        if fn is not None and self._function_per_step(fn, 0):
            if self.loops.occasional_guard(site):
                return Frequency.ONCE
            return Frequency.PER_STEP
        return Frequency.ONCE

    def per_step(self, site: Site) -> bool:
        return self.frequency(site) is Frequency.PER_STEP

    def runs_once(self, site: Site) -> bool:
        """`site` runs once per run, for certain: in no loop of its scope (or
        only in loops whose body runs once), at module level (a script's or a
        notebook cell's own code) or in a same-file function that is only
        called, once, from such a place. A model's method, a Lightning hook, a
        function the file hands on as a value, calls from a loop or from
        several places (a reusable helper), and one nobody in the file calls
        (another file may, in a loop) do not."""
        return self._once(site, 0)

    def set_up(self, site: Site) -> bool:
        """`site` is set-up: it runs once for certain (`runs_once`) in a file
        that does its per-step work elsewhere, in a loop over data or one that
        trains or runs a model. In a file with no such loop (a snippet, a
        one-off script) the code is the work itself, and is not set-up."""
        if not self.runs_once(site):
            return False
        if self._steps is None:
            self._steps = any(self.loops.direct_hot(loop) for loop in self.facts.loops)
        return self._steps

    def _once(self, site: Site, depth: int) -> bool:
        loop = site.loop
        while loop is not None and loop.scope is site.scope:
            if not self.loops.runs_once(loop):
                return False
            loop = loop.parent
        if site.scope.kind == ScopeKind.MODULE:
            return True
        if site.scope.kind != ScopeKind.FUNCTION or depth >= _MAX_DEPTH:
            return False  # a lambda, a comprehension, a class body: can't tell
        fn = self.facts.function_of(site.scope)
        if fn is None or fn.name == "<lambda>" or self._model_method(fn) or self._lightning_step(fn):
            return False
        callers = self.values.callers(fn)
        if len(callers) != 1 or len(self.facts.uses_of(fn.name)) > sum(
            isinstance(c.node.func, cst.Name) for c in callers
        ):
            return False  # called from elsewhere, or handed on as a value (a callback)
        return all(c.site.scope is not site.scope and self._once(c.site, depth + 1) for c in callers)

    def _function_per_step(self, fn: Function, depth: int) -> bool:
        """`fn` runs every step: a model's method (not its setup), a Lightning
        `*_step` hook, or a same-file function called from one of those (or from
        a per-batch loop) on every call."""
        key = id(fn.node)
        if key in self._per_step_functions:
            return self._per_step_functions[key]
        self._per_step_functions[key] = False
        found = self._model_method(fn) or self._lightning_step(fn)
        if not found and depth < _MAX_DEPTH:
            for call in self.values.callers(fn):
                if self.roles.excluded(call.site) or self.loops.occasional_guard(call.site):
                    continue
                if self.loops.hot_context(call.site) is not None:
                    found = True
                    break
                outer_scope = call.site.scope.function
                outer = self.facts.function_of(outer_scope) if outer_scope is not None else None
                if outer is not None and outer is not fn and self._function_per_step(outer, depth + 1):
                    found = True
                    break
        self._per_step_functions[key] = found
        return found

    def _class_of(self, fn: Function) -> Optional[Scope]:
        parent = fn.scope.parent
        return parent if parent is not None and parent.kind == ScopeKind.CLASS else None

    def _model_method(self, fn: Function) -> bool:
        cls = self._class_of(fn)
        if cls is None or cls.name not in self.values.module_classes():
            return False
        return fn.name not in _SETUP_METHODS and "init" not in fn.name.lower()

    def _lightning_step(self, fn: Function) -> bool:
        cls = self._class_of(fn)
        if cls is None or not fn.name.endswith("_step"):
            return False
        info = self.facts.classes.get(cls.name)
        if info is None:
            return False
        for base in info.bases:
            q = self.facts.qualname(base) or ""
            if q.endswith("LightningModule") or q.endswith(_LIGHTNING_BASES):
                return True
        return False
