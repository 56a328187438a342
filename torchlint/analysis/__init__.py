"""The shared facts every rule reads, computed once per file.

`Analysis(module, path, source)` walks the module once (`facts`) and derives
the rest lazily, each part built at most once and shared by every rule:

- `values`: what kind of value an expression holds; the one answer to "is
  this a model forward" and "is this a loss";
- `helpers`: same-file functions, summarised (moved arguments, training);
- `places`: devices, and where models and tensors live at a statement;
- `loops`: data loops, training loops, per-batch vs per-epoch, hot contexts;
- `roles`: tests, smoke blocks, tooling, and what does real work;
- `grad`: no-grad regions, inference contexts, gradients needed later;
- `loaders`: DataLoader datasets, collate functions and use.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from torchlint.analysis.facts import Facts, collect_facts
from torchlint.analysis.grad import Grad
from torchlint.analysis.helpers import Helpers
from torchlint.analysis.loaders import Loaders
from torchlint.analysis.loops import Loops
from torchlint.analysis.places import Places
from torchlint.analysis.roles import Roles
from torchlint.analysis.values import Values

__all__ = ["Analysis"]


class Analysis:
    """Everything the rules know about one file."""

    def __init__(self, module: cst.Module, path: str = "<stdin>", source: str = "") -> None:
        self.module = module
        self.path = path
        self.source = source
        self.facts: Facts = collect_facts(module)

    @cached_property
    def values(self) -> Values:
        return Values(self.facts)

    @cached_property
    def helpers(self) -> Helpers:
        return Helpers(self.facts, self.values)

    @cached_property
    def places(self) -> Places:
        return Places(self.facts, self.values, self.helpers, self.path)

    @cached_property
    def loops(self) -> Loops:
        return Loops(self.facts, self.values, self.helpers)

    @cached_property
    def roles(self) -> Roles:
        return Roles(self.facts, self.values, self.helpers, self.loops, self.path)

    @cached_property
    def grad(self) -> Grad:
        return Grad(self.facts, self.values, self.helpers, self.loops, self.roles, self.places)

    @cached_property
    def loaders(self) -> Loaders:
        return Loaders(self.facts, self.values, self.helpers, self.places)
