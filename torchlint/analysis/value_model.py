"""The value model: four answers about a value read at a point of a file.

`ValueModel.at(expr, site)` answers, for an expression read at a site:

- **what** it is (`What`): a tensor, a module, a loader, a dataset, a
  container of tensors (a tokenizer's batch), host data (a number, a string,
  a list of them), something else the analysis knows (a device, an optimizer,
  a loss function, a tokenizer), or unknown;
- **where** it lives (`Where`): on an accelerator, on the host, or unknown;
- whether it carries an autograd **graph** (`Graph`): yes, no (autograd is off
  where it is read), or unknown;
- **how often** the site runs (`How`): every step of a training or inference
  pass, once per epoch, now and then (a periodic or bounded guard), or once.

Each answer is computed where its fact lives (docs/architecture.md, "The
value model"): what in `value_kinds.py`, where in `places.py` and
`module_places.py`, grad in `graphs.py` and `grad.py`, how often in `loops.py`
and `cost.py`. This module only composes them, and precision comes first: a
fact the analysis cannot establish is UNKNOWN, never a guess.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.analysis.facts import Site
from torchlint.analysis.place_kinds import Place
from torchlint.analysis.value_kinds import Kind

if TYPE_CHECKING:
    from torchlint.analysis.cost import Cost
    from torchlint.analysis.grad import Grad
    from torchlint.analysis.graphs import Graphs
    from torchlint.analysis.loops import Loops
    from torchlint.analysis.places import Places
    from torchlint.analysis.values import Values


class What(enum.Enum):
    """What a value is."""

    TENSOR = "tensor"
    MODULE = "module"
    LOADER = "loader"
    DATASET = "dataset"
    CONTAINER = "container of tensors"
    HOST_DATA = "host data"
    OTHER = "other"  # a device, an optimizer, a loss function, a tokenizer
    UNKNOWN = "unknown"


class Where(enum.Enum):
    """Where a value lives."""

    ACCELERATOR = "accelerator"
    HOST = "host"
    UNKNOWN = "unknown"


class Graph(enum.Enum):
    """Whether a value carries an autograd graph."""

    CARRIES = "carries a graph"
    NONE = "no graph"
    UNKNOWN = "unknown"


class How(enum.Enum):
    """How often a site runs."""

    PER_STEP = "every step"
    PER_EPOCH = "once per epoch"
    PERIODIC = "now and then"
    ONCE = "once"


@dataclass(frozen=True)
class AbstractValue:
    """The four answers for one value at one site."""

    what: What
    where: Where
    graph: Graph
    how: How

    def __str__(self) -> str:
        return f"{self.what.value}, {self.where.value}, {self.graph.value}, {self.how.value}"


_KINDS = {
    Kind.TENSOR: What.TENSOR,
    Kind.MODULE: What.MODULE,
    Kind.LOADER: What.LOADER,
    Kind.DATASET: What.DATASET,
    Kind.TOKENS: What.CONTAINER,
    Kind.DEVICE: What.OTHER,
    Kind.TOKENIZER: What.OTHER,
    Kind.OPTIMIZER: What.OTHER,
    Kind.LOSS_FN: What.OTHER,
}
_PLACES = {Place.DEVICE: Where.ACCELERATOR, Place.CPU: Where.HOST}


def _host_literal(expr: cst.BaseExpression) -> bool:
    """A number, a string, or a list/tuple of them: Python data on the host."""
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _host_literal(expr.expression)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return all(isinstance(e, cst.Element) and _host_literal(e.value) for e in expr.elements)
    return False


class ValueModel:
    """The four answers, composed from the shared facts of one file."""

    def __init__(
        self, values: "Values", places: "Places", graphs: "Graphs", grad: "Grad", cost: "Cost", loops: "Loops"
    ) -> None:
        self.values = values
        self.places = places
        self.graphs = graphs
        self.grad_facts = grad
        self.cost = cost
        self.loops = loops

    def at(self, expr: cst.BaseExpression, site: Site) -> AbstractValue:
        what = self.what(expr, site)
        return AbstractValue(what, self.where(expr, site, what), self.graph(expr, site, what), self.how(site))

    def what(self, expr: cst.BaseExpression, site: Site) -> What:
        if _host_literal(expr):
            return What.HOST_DATA
        kind = self.values.expr_kind(expr, site)
        if kind is not None:
            return _KINDS[kind]
        if self.places.is_tensor(expr, site):
            return What.TENSOR
        return What.UNKNOWN

    def where(self, expr: cst.BaseExpression, site: Site, what: Optional[What] = None) -> Where:
        what = self.what(expr, site) if what is None else what
        if what is What.HOST_DATA:
            return Where.HOST
        if what is What.MODULE:
            return _PLACES.get(self.places.model_place(expr, site), Where.UNKNOWN)
        if what is What.TENSOR:
            if self.places.on_accelerator(expr, site):
                return Where.ACCELERATOR
            place = self.places.tensor_place(expr, site)
            return Where.HOST if place is Place.CPU else Where.UNKNOWN
        return Where.UNKNOWN

    def graph(self, expr: cst.BaseExpression, site: Site, what: Optional[What] = None) -> Graph:
        what = self.what(expr, site) if what is None else what
        if what not in (What.TENSOR, What.UNKNOWN):
            return Graph.NONE if what is What.HOST_DATA else Graph.UNKNOWN
        if any(self.grad_facts.is_no_grad_with(w) for w in site.withs):
            return Graph.NONE
        if self.graphs.carries_graph(expr, site):
            return Graph.CARRIES
        return Graph.UNKNOWN

    def how(self, site: Site) -> How:
        if self.cost.per_step(site):
            return How.PER_STEP
        if self.loops.occasional_guard(site):
            return How.PERIODIC
        if site.loop is not None and any(self.loops.is_epoch_loop(loop) for loop in site.loop.chain()):
            return How.PER_EPOCH
        return How.ONCE
