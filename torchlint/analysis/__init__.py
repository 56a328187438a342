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
- `loaders`: DataLoader datasets, collate functions and use;
- `graphs`: values with an autograd graph accumulated across iterations;
- `cost`: how often code runs (once, or every step of real work);
- `attributes`: tensors a module class keeps as plain attributes (not
  parameters or buffers) that its methods combine with the inputs;
- `consumers`: who reads a value, and whether each reader works with it on
  a given device (the precondition of fixes that move a value).

`project` is the project index as this file asks it (what classes, decorators
and functions of other files are: torchlint/analysis/project/); without it
the file is read alone.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from functools import cached_property
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Dict, FrozenSet, List, Optional, Sequence

# The parts are imported when first used, not here: the project pass
# (torchlint/analysis/project/) is imported by a run answered from the cache,
# which must not pay for importing LibCST.
if TYPE_CHECKING:
    import libcst as cst

    from torchlint.analysis.attributes import Attributes
    from torchlint.analysis.consumers import Consumers
    from torchlint.analysis.cost import Cost
    from torchlint.analysis.facts import Facts, TopStatement
    from torchlint.analysis.grad import Grad
    from torchlint.analysis.graphs import Graphs
    from torchlint.analysis.helpers import Helpers
    from torchlint.analysis.loaders import Loaders
    from torchlint.analysis.loops import Loops
    from torchlint.analysis.places import Places
    from torchlint.analysis.project import FileView
    from torchlint.analysis.roles import Roles
    from torchlint.analysis.value_model import ValueModel
    from torchlint.analysis.values import Values

__all__ = ["Analysis"]

_PLACEHOLDER_MARK = "# torchlint-ipython-"  # torchlint.source.notebook's mark of a blanked IPython line


def _placeholder(stmt: cst.BaseStatement) -> bool:
    import libcst as cst

    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Pass)
        and stmt.trailing_whitespace.comment is not None
        and stmt.trailing_whitespace.comment.value.startswith(_PLACEHOLDER_MARK)
    )


def __getattr__(name: str) -> Any:
    """`collect_facts`, imported (with LibCST) on first use."""
    if name == "collect_facts":
        from torchlint.analysis.collect import collect_facts

        globals()["collect_facts"] = collect_facts
        return collect_facts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Analysis:
    """Everything the rules know about one file."""

    def __init__(
        self,
        module: cst.Module,
        path: str = "<stdin>",
        source: str = "",
        project: Optional[FileView] = None,
        displayed_rows: AbstractSet[int] = frozenset(),
        cell_rows: Sequence[int] = (),
        statement_code: Optional[Callable[[int], str]] = None,
    ) -> None:
        self.module = module
        self.path = path
        self.source = source
        # The project index as this file asks it (torchlint/analysis/project/); None: this file alone.
        self.project = project
        # Rows where a notebook cell's displayed last expression starts.
        self.displayed_rows = displayed_rows
        # Rows where a notebook's cells start.
        self.cell_rows = tuple(cell_rows)
        # The code of top-level statement i, where a caller keeps them (a lint
        # session's parse: torchlint/source/reparse.py); None: generated here.
        self._statement_code = statement_code
        # Through the package's attribute (see `__getattr__`), which tests may replace.
        self.facts: Facts = sys.modules[__name__].collect_facts(module)

    @cached_property
    def _cell_heads(self) -> Dict[int, "TopStatement"]:
        """id of each top-level statement -> the first statement of its notebook
        cell that is not an IPython placeholder (a blanked magic or shell line)."""
        if not self.cell_rows:
            return {}
        out: Dict[int, "TopStatement"] = {}
        heads: Dict[int, "TopStatement"] = {}
        for stmt, start in zip(self.module.body, self._statement_rows):
            cell = bisect_right(self.cell_rows, start) - 1
            if cell not in heads and not _placeholder(stmt):
                heads[cell] = stmt
            out[id(stmt)] = heads.get(cell, stmt)
        return out

    @cached_property
    def _statement_rows(self) -> List[int]:
        """The row where each top-level statement's own code starts (after its
        leading comments and blank lines), from one code generation pass (or
        the codes the caller keeps)."""
        from torchlint.source.codegen import PlainCodegen

        module = self.module
        state = PlainCodegen(default_indent=module.default_indent, default_newline=module.default_newline)
        out: List[int] = []
        row = 1 + len(module.header)
        for i, stmt in enumerate(module.body):
            out.append(row + len(stmt.leading_lines))
            if self._statement_code is not None:
                row += self._statement_code(i).count("\n")
                continue
            before = len(state.tokens)
            stmt._codegen(state)
            row += sum(token.count("\n") for token in state.tokens[before:])
        return out

    def cell_head(self, stmt: cst.CSTNode) -> Optional["TopStatement"]:
        """In a notebook, for a top-level statement: the first statement of its
        cell (IPython lines skipped), where code added for the cell goes; None
        for a .py file."""
        return self._cell_heads.get(id(stmt))

    @cached_property
    def _displayed(self) -> FrozenSet[int]:
        """ids of the module-level expression statements a notebook displays."""
        import libcst as cst

        if not self.displayed_rows:
            return frozenset()
        found = set()
        for stmt, start in zip(self.module.body, self._statement_rows):
            if start in self.displayed_rows and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                if isinstance(stmt.body[0], cst.Expr):
                    found.add(id(stmt.body[0]))
        return frozenset(found)

    def displayed(self, stmt: cst.CSTNode) -> bool:
        """`stmt` is a notebook cell's last bare expression: IPython shows its value."""
        return id(stmt) in self._displayed

    @cached_property
    def values(self) -> Values:
        from torchlint.analysis.values import Values

        return Values(self.facts, self.project)

    @cached_property
    def helpers(self) -> Helpers:
        from torchlint.analysis.helpers import Helpers

        return Helpers(self.facts, self.values)

    @cached_property
    def places(self) -> Places:
        from torchlint.analysis.places import Places

        return Places(self.facts, self.values, self.helpers, self.path)

    @cached_property
    def loops(self) -> Loops:
        from torchlint.analysis.loops import Loops

        return Loops(self.facts, self.values, self.helpers)

    @cached_property
    def roles(self) -> Roles:
        from torchlint.analysis.roles import Roles

        return Roles(self.facts, self.values, self.helpers, self.loops, self.path)

    @cached_property
    def grad(self) -> Grad:
        from torchlint.analysis.grad import Grad

        return Grad(self.facts, self.values, self.helpers, self.loops, self.roles, self.places)

    @cached_property
    def loaders(self) -> Loaders:
        from torchlint.analysis.loaders import Loaders

        return Loaders(self.facts, self.values, self.helpers, self.places, self.loops)

    @cached_property
    def graphs(self) -> Graphs:
        from torchlint.analysis.graphs import Graphs

        return Graphs(self.facts, self.values, self.places, self.loops, self.grad)

    @cached_property
    def cost(self) -> Cost:
        from torchlint.analysis.cost import Cost

        return Cost(self.facts, self.values, self.helpers, self.loops, self.roles)

    @cached_property
    def consumers(self) -> Consumers:
        from torchlint.analysis.consumers import Consumers

        return Consumers(self.facts, self.values, self.helpers, self.places)

    @cached_property
    def attributes(self) -> Attributes:
        from torchlint.analysis.attributes import Attributes

        return Attributes(self.facts, self.values, self.places, self.project)

    @cached_property
    def value_model(self) -> ValueModel:
        """What a value is, where it lives, whether it carries a graph, how often its site runs."""
        from torchlint.analysis.value_model import ValueModel

        return ValueModel(self.values, self.places, self.graphs, self.grad, self.cost, self.loops)
