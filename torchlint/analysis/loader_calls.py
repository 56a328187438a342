"""A file's DataLoader calls (torch's, a library's, a project subclass's), their
arguments and workers (`Workers`: none, some, maybe; one answer for every
loading rule); the file's loading settings: whether it accumulates gradients,
which names it requires to be 1; and whether a file's text could call a
loader at all (`could_call_loader`). The base of `Loaders` (loaders.py).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterator, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.facts import Call, Facts, Loop, dotted_name
from torchlint.analysis.helpers import Helpers
from torchlint.analysis.loops import Loops
from torchlint.analysis.options import option_defaults
from torchlint.analysis.places import Places
from torchlint.analysis.values import Values
from torchlint.analysis.vocabulary import DATALOADER
from torchlint.analysis.walk import nodes_of

if TYPE_CHECKING:
    from torchlint.analysis.project import FileView
from torchlint.analysis.loader_kinds import NUM_WORKERS_POSITION, LoaderInfo, Workers

_SAYS_LOADER = re.compile("loader", re.IGNORECASE)


def could_call_loader(text: str, project: FileView) -> bool:
    """False only when `Loaders.calls()` finds no call in a module of `text`:
    a call of torch's (or a library's) DataLoader spells "loader" in its file
    (the name or the import of the name); one of a project class, the name
    its lookup lands on first, one of `project.loader_names()`."""
    if _SAYS_LOADER.search(text):
        return True
    names = project.loader_names()
    return bool(names) and re.search(r"\b(?:%s)\b" % "|".join(map(re.escape, names)), text) is not None


_ACCUMULATION = re.compile(r"grad\w*accum|accumulate_grad|accum\w*_(steps?|iters?|batches)$", re.I)


class LoaderCalls:
    """The file's loader calls and loading settings; the state every loader question shares."""

    def __init__(self, facts: Facts, values: Values, helpers: Helpers, places: Places, loops: Loops) -> None:
        self.facts = facts
        self.values = values
        self.helpers = helpers
        self.places = places
        self.loops = loops
        self._info: Dict[int, LoaderInfo] = {}
        self._loops_by_name: Optional[Dict[str, List[Loop]]] = None
        self._accumulates: Optional[bool] = None
        self._items: Optional[Dict[str, List[str]]] = None
        self._seeds: Optional[bool] = None
        self._options: Optional[Dict[str, Optional[cst.BaseExpression]]] = None
        self._required_one: Optional[FrozenSet[str]] = None
        self._volumes: Optional[bool] = None
        self._settings: Optional[List[cst.CSTNode]] = None

    def accumulates_gradients(self) -> bool:
        """The file configures gradient accumulation: a setting named like
        `gradient_accumulation_steps` / `accumulate_grad_batches` (keyword,
        assignment or dict key) of a value other than 1, or an optimizer step
        under a periodic guard (`if (i + 1) % accum == 0: opt.step()`). A batch
        size of 1 there is a memory choice, the effective batch is larger."""
        if self._accumulates is None:
            self._accumulates = self._find_accumulation()
        return self._accumulates

    def _find_accumulation(self) -> bool:
        for node in self._settings_nodes():
            key: Optional[str] = None
            value: Optional[cst.BaseExpression] = None
            if isinstance(node, cst.Arg) and node.keyword is not None:
                key, value = node.keyword.value, node.value
            elif isinstance(node, cst.Assign) and len(node.targets) == 1:
                key, value = (dotted_name(node.targets[0].target) or "").rsplit(".", 1)[-1], node.value
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                # a dataclass field: `gradient_accumulation_steps: int = 8`, `... = field(default=8)`
                key, value = (dotted_name(node.target) or "").rsplit(".", 1)[-1], _field_default(node.value)
                if value is None:
                    continue
            elif isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString):
                key, value = node.key.raw_value, node.value
            if key and _ACCUMULATION.search(key) and not (isinstance(value, cst.Integer) and value.value in ("0", "1")):
                return True
        return any(self.values.is_optimizer_step(c) and self.loops.periodic_guard(c.site) for c in self.facts.calls)

    def _settings_nodes(self) -> List[cst.CSTNode]:
        """The module's keyword arguments, assignments, dict entries, asserts and
        `if`s: where settings and their checks are written (one walk, shared by
        `accumulates_gradients` and `required_one`)."""
        if self._settings is None:
            self._settings = nodes_of(
                self.facts.module, (cst.Arg, cst.Assign, cst.AnnAssign, cst.DictElement, cst.Assert, cst.If)
            )
        return self._settings

    def required_one(self) -> FrozenSet[str]:
        """Names (the last part of a dotted name) that the file requires to be 1:
        `assert bs == 1`, or `if args.eval_batch_size != 1: raise ...` (also as a
        part of an `and`). A value the code rejects otherwise is a constraint of
        the method (per-sample inference), not a choice."""
        if self._required_one is None:
            found = set()
            for node in self._settings_nodes():
                if isinstance(node, cst.Assert):
                    found.update(_compared_to_one(node.test, equal=True))
                elif isinstance(node, cst.If) and isinstance(node.body, cst.IndentedBlock):
                    raises = any(
                        isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(x, cst.Raise) for x in stmt.body)
                        for stmt in node.body.body
                    )
                    if raises:
                        found.update(_compared_to_one(node.test, equal=False))
            self._required_one = frozenset(found)
        return self._required_one

    def calls(self) -> Iterator[Call]:
        """`DataLoader(...)` calls that resolve to torch's DataLoader, or to a
        subclass of it that takes its arguments (see `loader_subclass`)."""
        for call in self.facts.calls:
            if call.qualname in DATALOADER or self.loader_subclass(call):
                yield call

    def loader_subclass(self, call: Call) -> bool:
        """A call of a DataLoader subclass that the project index says takes
        DataLoader's own arguments: a library's (`torch_geometric.loader.DataLoader`)
        or a project class defined here or in another file that defines no
        `__init__` of its own."""
        project = self.values.project
        if project is None:
            return False
        q = call.qualname
        func = call.node.func
        if q is None and isinstance(func, cst.Name) and func.value in self.facts.classes:
            q = project.local(func.value)
        return q is not None and project.builds_loader(q)

    def workers(self, call: Call) -> Workers:
        """What the loader's `num_workers` (keyword or positional) says; a name
        whose only binding reaching the call is an integer literal counts as
        that literal."""
        arg = self.argument(call, "num_workers", NUM_WORKERS_POSITION)
        if arg is None:
            return Workers.NONE
        value = arg.value
        if isinstance(value, cst.Name):
            reaching = self.facts.reaching(value.value, call.site)
            if len(reaching) == 1 and isinstance(reaching[0].value, cst.Integer):
                value = reaching[0].value
        if isinstance(value, cst.Integer):
            return Workers.SOME if value.evaluated_value > 0 else Workers.NONE
        return Workers.SOME if _positive(value) else Workers.MAYBE

    def workers_as_written(self, call: Call) -> Workers:
        """`workers`, with a command-line option read from parsed arguments
        (`num_workers=args.workers`) taken at the default the file declares for
        it: what the script does when run without flags."""
        found = self.workers(call)
        arg = self.argument(call, "num_workers", NUM_WORKERS_POSITION)
        if found is not Workers.MAYBE or arg is None:
            return found
        value = arg.value
        if not (isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name)):
            return found
        if self._options is None:
            self._options = option_defaults(self.facts)
        default = self._options.get(value.attr.value)
        if isinstance(default, cst.Integer):
            return Workers.SOME if default.evaluated_value > 0 else Workers.NONE
        return found

    @staticmethod
    def argument(call: Call, name: str, position: int) -> Optional[cst.Arg]:
        kw = call.keyword(name)
        if kw is not None:
            return kw
        pos = call.positional
        return pos[position] if len(pos) > position else None


def _positive(expr: cst.BaseExpression) -> bool:
    """An expression known to be an integer above 0: a positive literal, `x or
    N` with N known positive (`os.cpu_count() or 1`), `min(...)` of known
    positive values, `max(...)` with a known positive one."""
    if isinstance(expr, cst.Integer):
        return expr.evaluated_value > 0
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        return _positive(expr.right)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.args:
        if any(a.star or a.keyword is not None for a in expr.args):
            return False
        if expr.func.value == "min":
            return all(_positive(a.value) for a in expr.args)
        if expr.func.value == "max":
            return any(_positive(a.value) for a in expr.args)
    return False


def _field_default(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """A dataclass field's default: the value, or `default=` of `field(...)`
    (None when it has none, as with `default_factory`)."""
    if isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] == "field":
        for arg in value.args:
            if arg.keyword is not None and arg.keyword.value == "default":
                return arg.value
        return None
    return value


def _compared_to_one(test: cst.BaseExpression, equal: bool) -> List[str]:
    """The names `test` requires to be 1 when it holds (`equal`: `x == 1`) or when
    it fails (`x != 1`, `x > 1`), looking into `and` (for `equal`) or `and`/`or`
    parts that must each hold for the guard to fire."""
    if isinstance(test, cst.BooleanOperation):
        if equal and not isinstance(test.operator, cst.And):
            return []
        return _compared_to_one(test.left, equal) + _compared_to_one(test.right, equal)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return []
    op = test.comparisons[0].operator
    left, right = test.left, test.comparisons[0].comparator
    wanted: Tuple[type, ...] = (cst.Equal, cst.Is) if equal else (cst.NotEqual, cst.IsNot, cst.GreaterThan)
    if isinstance(left, cst.Integer) and left.value == "1":
        left, right = right, left
        wanted = tuple(w for w in wanted if w is not cst.GreaterThan)  # `1 > x` is not `x > 1`
    if not (isinstance(right, cst.Integer) and right.value == "1"):
        return []
    name = dotted_name(left)
    return [name.rsplit(".", 1)[-1]] if name and isinstance(op, wanted) else []
