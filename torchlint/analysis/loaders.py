"""DataLoader facts for the loading rules: which calls build torch
DataLoaders, what their dataset is (in memory, tiny, iterable, one that
places items on the device, one that reads or decodes files per item), what
their `collate_fn` returns, whether the loader is used at all, whether a
training loop iterates it, and how its batches are moved."""

from __future__ import annotations

import enum
import re
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Deque, Dict, FrozenSet, Iterable, Iterator, List, Optional, Set, Tuple, Union

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Facts, Function, Loop, ScopeKind, Site, dotted_name
from torchlint.analysis.helpers import Helpers, is_move_call, root_name
from torchlint.analysis.knowledge import Effect, doing
from torchlint.analysis.loops import Loops
from torchlint.analysis.options import option_defaults
from torchlint.analysis.place_kinds import ACCEL, CPU, DEVICE, HOST, Place
from torchlint.analysis.places import Places
from torchlint.analysis.project.kinds import ClassKind
from torchlint.analysis.values import Values
from torchlint.analysis.vocabulary import (
    DATA_ARGUMENT_NAME,
    DATALOADER,
    FILE_READERS,
    INDEX_FACTORIES,
    NON_PLACING,
    PLACING_NAME,
    RANDOM_FACTORIES,
    RNG_SEEDERS,
    SEEDING_NAMES,
    TENSOR_DATASET,
    TORCHVISION_FILE_DATASETS,
)
from torchlint.analysis.walk import children, descendants, nodes_of

if TYPE_CHECKING:
    from torchlint.analysis.project import FileView

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
SAMPLER_POSITION = 3
NUM_WORKERS_POSITION = 5
COLLATE_POSITION = 6
PIN_MEMORY_POSITION = 7
TINY_DATASET = 64  # literal samples
# Calls whose result (or whose unpacked parts) hold items of the dataset they are given.
DATASET_SPLITS = frozenset(
    {
        "torch.utils.data.random_split",
        "torch.utils.data.dataset.random_split",
        "torch.utils.data.Subset",
        "torch.utils.data.dataset.Subset",
    }
)
# Methods of a Hugging Face `datasets.Dataset` that return another one.
_HF_DATASET_METHODS = frozenset(
    {
        "map",
        "filter",
        "with_format",
        "set_format",
        "shuffle",
        "select",
        "remove_columns",
        "rename_column",
        "rename_columns",
        "train_test_split",
        "sort",
        "flatten",
        "cast",
        "cast_column",
        "with_transform",
    }
)


class DatasetKind(enum.Enum):
    """What a loader's dataset does per item."""

    IN_MEMORY = "in memory"  # indexes tensors or lists held in memory
    TINY = "tiny"  # a handful of literal samples
    ITERABLE = "iterable"  # an IterableDataset (each worker would yield the whole stream)
    PLACES = "places"  # makes its items on the device
    READS = "reads"  # reads or decodes a file per item (images, audio, arrays on disk)
    UNKNOWN = "unknown"


class CollateKind(enum.Enum):
    NONE = "none"  # the default collate
    CPU = "cpu"  # a module-level function that keeps batches on the host
    DEVICE = "device"  # places batches on the device
    LOCAL = "local"  # a lambda or nested function (not picklable for spawned workers)
    UNKNOWN = "unknown"


class Workers(enum.Enum):
    """What a loader's `num_workers` says."""

    NONE = "none"  # not given, or a literal 0 (also through a name bound once to 0)
    SOME = "some"  # a literal above 0 (also through a name bound once to one)
    MAYBE = "maybe"  # an expression: workers where it is above 0


class BatchUse(enum.Enum):
    """How a loader's batches are used in this file."""

    MOVED = "moved"  # iterated here, and some batch is moved to a device
    KEPT = "kept"  # iterated here, never moved
    SAMPLED = "sampled"  # only `next(iter(loader))`
    ELSEWHERE = "elsewhere"  # handed on


# The names the rules use.
IN_MEMORY, TINY, ITERABLE, PLACES, READS, UNKNOWN_DS = (
    DatasetKind.IN_MEMORY,
    DatasetKind.TINY,
    DatasetKind.ITERABLE,
    DatasetKind.PLACES,
    DatasetKind.READS,
    DatasetKind.UNKNOWN,
)
NO_COLLATE, CPU_COLLATE, DEVICE_COLLATE, LOCAL_COLLATE, UNKNOWN_COLLATE = (
    CollateKind.NONE,
    CollateKind.CPU,
    CollateKind.DEVICE,
    CollateKind.LOCAL,
    CollateKind.UNKNOWN,
)


@dataclass(frozen=True)
class LoaderInfo:
    call: Call
    dataset: DatasetKind
    collate: CollateKind
    used: bool  # iterated, handed on, returned or stored (not dead)
    # The dataset is built right here from a class (same-file, torchvision, imported): worker
    # processes can unpickle it by reference.
    local_dataset: bool
    batches: BatchUse = BatchUse.ELSEWHERE
    # A training loop in this file iterates the loader (directly, or through a parameter of a
    # same-file function it is passed to).
    trains: bool = False
    # Some batch of it is moved with `non_blocking=True` (an asynchronous copy, which needs pinned memory).
    non_blocking: bool = False
    # Its batches reach the device as the loader yields them (`x.to(device)`, `batch["x"].cuda()`), at
    # least as often as through a copy made on the host first (`x[:, :n].to(device)`, `x.float().cuda()`,
    # which a pinned batch does not speed up), or are fed to a model on the device as they are.
    copied_as_loaded: bool = False
    # `batch_size=len(dataset)`: one batch per pass.
    whole_dataset_batch: bool = False
    # Its items are known to be host tensors where that can be told: no TensorDataset the dataset may
    # be holds tensors whose place is not known to be the host (pinning a device tensor raises).
    host_items: bool = True
    # Its `collate_fn` is a same-file function that does per-batch work besides stacking (a
    # tokenizer's `pad`, a processor, a transform): work for worker processes even over data in memory.
    collate_works: bool = False


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


class Loaders:
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

    def info(self, call: Call) -> LoaderInfo:
        key = id(call.node)
        if key not in self._info:
            ds_kind, local = self._dataset(call)
            loops = self.loops_over(call)
            self._info[key] = LoaderInfo(
                call,
                ds_kind,
                self._collate(call),
                self._used(call),
                local,
                self._batches(call),
                trains=any(self._loop_trains(site) for site in loops),
                non_blocking=any(self._loop_moves(site, non_blocking=True) for site in loops),
                copied_as_loaded=any(self._copied_as_loaded(site) for site in loops),
                whole_dataset_batch=self._whole_dataset_batch(call),
                host_items=self._host_items(call),
                collate_works=self._collate_works(call),
            )
        return self._info[key]

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

    # -- the dataset -------------------------------------------------------------------

    def dataset_expr(self, call: Call) -> Optional[cst.BaseExpression]:
        arg = self.argument(call, "dataset", 0)
        return arg.value if arg is not None else None

    def _resolve(self, expr: Optional[cst.BaseExpression], site: Site) -> Optional[cst.BaseExpression]:
        """A name bound once to a value: that value. Also through a parameter of
        a function the file calls once (`prepare_dataloader(dataset, 32)`: the
        caller's argument), and through a tuple a same-file function returns
        (`dataset, model = load_train_objs()`: the first returned element)."""
        for _ in range(6):
            if not isinstance(expr, (cst.Name, cst.Attribute)):
                return expr
            name = dotted_name(expr)
            bindings = self.values.bindings_for(name, site) if name else []
            if len(bindings) != 1:
                return None
            b = bindings[0]
            if b.kind == BindingKind.PARAM:
                found = self._through_caller(b)
                if found is None:
                    return None
                expr, site = found
                continue
            if b.value is None or b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN):
                return None
            if b.index is not None:
                split = self._split_of(b.value)
                found = (split, b.site) if split is not None else self._returned_element(b)
                if found is None:
                    return None
                expr, site = found
                continue
            expr, site = b.value, b.site
            part = self._split_of(expr)  # `Subset(ds, idx)`: what ds is
            if part is not None:
                expr = part
        return expr

    def _split_of(self, value: Optional[cst.BaseExpression]) -> Optional[cst.BaseExpression]:
        """The dataset a `random_split(ds, ...)` (whose parts are unpacked) or a
        `Subset(ds, indices)` takes its items from: its parts are of the same kind."""
        call = self.facts.call_for(value) if isinstance(value, cst.Call) else None
        if call is None or call.qualname not in DATASET_SPLITS or not call.positional:
            return None
        return call.positional[0].value

    def _through_caller(self, b: Binding) -> Optional[Tuple[cst.BaseExpression, Site]]:
        """The argument the one caller of `b`'s function passes for parameter `b`."""
        fn = self.facts.function_of(b.site.scope)
        if fn is None:
            return None
        callers = self.values.callers(fn)
        if len(callers) != 1:
            return None
        arg = self.values.argument_for(callers[0], fn, b.name)
        return (arg, callers[0].site) if arg is not None else None

    def _returned_element(self, b: Binding) -> Optional[Tuple[cst.BaseExpression, Site]]:
        """Element `b.index` of the tuple returned by the same-file function `b`'s
        value calls (`a, b = build()` with one `return x, y`)."""
        call = self.facts.call_for(b.value) if isinstance(b.value, cst.Call) else None
        fn = self.helpers.function(call) if call is not None else None
        returns = self.facts.returns_of(fn) if fn is not None else []
        if len(returns) != 1 or b.index is None:
            return None
        value, site = returns[0][0].value, returns[0][1]
        if not isinstance(value, cst.Tuple) or b.index >= len(value.elements):
            return None
        element = value.elements[b.index]
        if isinstance(element, cst.StarredElement):
            return None
        return element.value, site

    def _dataset(self, call: Call) -> Tuple[DatasetKind, bool]:
        raw = self.dataset_expr(call)
        if self._hugging_face_dataset(raw, call.site):
            return IN_MEMORY, True  # an Arrow table in memory, tokenized ahead: nothing for workers to do
        expr = self._resolve(raw, call.site)
        if self.index_sequence(expr, call.site):
            return IN_MEMORY, True  # batches of indices: nothing to load per item
        if not isinstance(expr, cst.Call):
            return UNKNOWN_DS, False
        ds = self.facts.call_for(expr)
        if ds is None:
            return UNKNOWN_DS, False
        if any(self._device_argument(a) for a in ds.node.args):
            return PLACES, True  # `MyDataset(paths, device=device)`: items made on the device
        if ds.qualname in TENSOR_DATASET:
            if any(
                self._places_value(a.value, ds.site) or self.data_place(a.value, ds.site) == DEVICE
                for a in ds.node.args
            ):
                return PLACES, True
            sizes = [self._literal_size(a.value, ds.site) for a in ds.positional]
            if sizes and all(s is not None and s <= TINY_DATASET for s in sizes):
                return TINY, True
            return IN_MEMORY, True
        q = ds.qualname or ""
        if q in TORCHVISION_FILE_DATASETS or q.startswith("torchaudio.datasets."):
            return READS, True
        if q.startswith("torchvision.datasets."):
            return UNKNOWN_DS, True
        func = expr.func
        if isinstance(func, cst.Name) and func.value in self.facts.classes and self.places.class_places(func.value):
            return PLACES, True  # a same-file class that makes its items on a device
        if isinstance(func, cst.Name) and func.value in self.values.dataset_classes():
            cls = func.value
            if self.values.dataset_classes()[cls] is ClassKind.ITERABLE_DATASET:
                return ITERABLE, True
            if self._indexes_only(cls):
                sizes = [self._literal_size(a.value, ds.site) for a in ds.positional]
                if sizes and all(s is not None and s <= TINY_DATASET for s in sizes):
                    return TINY, True
                return IN_MEMORY, True
            if self._reads_per_item(cls):
                return READS, True
            return UNKNOWN_DS, True
        # An instance of a class from another module: picklable by reference.
        name = dotted_name(func) or ""
        if not any(self._names_data(a, ds.site) for a in ds.node.args):
            # `MyTrainDataset(2048)`, `NameDataset(is_train_set=True)`: nothing says
            # its items are read or transformed; it may only index memory. Can't tell.
            return IN_MEMORY, True
        return UNKNOWN_DS, name.rsplit(".", 1)[-1][:1].isupper()

    def index_sequence(self, expr: Optional[cst.BaseExpression], site: Site, depth: int = 0) -> bool:
        """`expr` is a sequence of integer indices held on the host: the builtin
        `range(...)`, `torch.arange`/`torch.randperm`/`np.arange`/
        `np.random.permutation` without a device, a slice of one, or `list`/
        `tuple` of one (also through names bound once). A loader over it yields
        index batches for the caller to gather with: it loads nothing per item."""
        if expr is None or depth > 6:
            return False
        if isinstance(expr, (cst.Name, cst.Attribute)) and depth:
            expr = self._resolve(expr, site)
            return (
                expr is not None
                and not isinstance(expr, (cst.Name, cst.Attribute))
                and self.index_sequence(expr, site, depth + 1)
            )
        if isinstance(expr, cst.Subscript):
            return self.index_sequence(expr.value, site, depth + 1)
        call = self.facts.call_for(expr) if isinstance(expr, cst.Call) else None
        if call is None:
            return False
        func = call.node.func
        builtin = (
            func.value
            if isinstance(func, cst.Name) and not self.facts.bindings_of(func.value) and call.qualname is None
            else None
        )
        if builtin == "range":
            return True
        if builtin in ("list", "tuple") and len(call.positional) == 1:
            return self.index_sequence(call.positional[0].value, site, depth + 1)
        return call.qualname in INDEX_FACTORIES and call.keyword("device") is None

    # -- random items in a seeded run ------------------------------------------------------

    def seeds_rngs(self) -> bool:
        """The file seeds its random number generators (`torch.manual_seed`,
        `random.seed`, `np.random.seed`, a `seed_everything`/`set_seed`): its
        runs are meant to be repeatable."""
        if self._seeds is None:
            self._seeds = self._find_seeding()
        return self._seeds

    def _find_seeding(self) -> bool:
        for call in self.facts.calls:
            if call.qualname in RNG_SEEDERS:
                return True
            name = call.qualname or dotted_name(call.node.func) or ""
            if name.rsplit(".", 1)[-1] in SEEDING_NAMES:
                return True
        return False

    def random_items(self, call: Call) -> bool:
        """The loader's dataset draws random numbers per item: its construction
        holds a random transform (`RandomResizedCrop`, `T.RandomHorizontalFlip()`;
        through names bound before the loader), or it is a same-file class whose
        `__getitem__` (or a function it calls, two deep) calls `random.*`,
        `np.random.*` or a `torch.rand*` factory. Worker processes draw from
        streams of their own: a seeded run's items change with `num_workers`."""
        expr = self._resolve(self.dataset_expr(call), call.site)
        if expr is None:
            return False
        for node in self.construction(expr, call.site):
            if not isinstance(node, cst.Call):
                continue
            name = (dotted_name(node.func) or "").rsplit(".", 1)[-1]
            if name.startswith("Random") and name[6:7].isupper():
                return True
            if isinstance(node.func, cst.Name) and node.func.value in self.values.dataset_classes():
                if self._draws_per_item(node.func.value):
                    return True
        return False

    def construction(self, expr: cst.BaseExpression, site: Site) -> Iterator[Union[cst.CSTNode, Binding]]:
        """The nodes of `expr`, breadth first (a dataset's class before its
        arguments' values), and for each name in it the name's bindings and the
        nodes of the values it was bound to before `site` (at most 300 nodes)."""
        todo: Deque[cst.CSTNode] = deque([expr])
        seen = 0
        while todo and seen < 300:
            node = todo.popleft()
            seen += 1
            yield node
            if isinstance(node, cst.Name):
                for b in self.facts.visible_bindings(node.value, site.scope):
                    yield b
                    if (
                        b.value is not None
                        and b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
                        and b.site.order < site.order
                    ):
                        todo.append(b.value)
                continue
            todo.extend(children(node))

    def _draws_per_item(self, class_name: str) -> bool:
        """`__getitem__` (or what it calls, two deep) calls `random.*`,
        `np.random.*` or a `torch.rand*` factory."""
        return any(
            (c.qualname or "").startswith(("random.", "numpy.random.")) or c.qualname in RANDOM_FACTORIES
            for c in self._item_calls(class_name)
        )

    def _hugging_face_dataset(self, expr: Optional[cst.BaseExpression], site: Site, depth: int = 0) -> bool:
        """A Hugging Face `datasets` dataset: `load_dataset(...)`, `Dataset.from_*`,
        and what `.map()`, `.filter()`, `.with_format()`, `["train"]`... make of
        one (also through names bound once). Its rows live in memory (Arrow),
        already processed: a loader over it has little per-item work."""
        if expr is None or depth > 8:
            return False
        if isinstance(expr, cst.Subscript):
            return self._hugging_face_dataset(expr.value, site, depth + 1)
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            if call is None:
                return False
            if (call.qualname or "").split(".")[0] == "datasets":
                return True
            if call.method in _HF_DATASET_METHODS and call.receiver is not None:
                return self._hugging_face_dataset(call.receiver, site, depth + 1)
            return False
        if isinstance(expr, (cst.Name, cst.Attribute)):
            name = dotted_name(expr)
            bindings = self.values.bindings_for(name, site) if name else []
            values = [
                b
                for b in bindings
                if b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and b.index is None and b.value is not None
            ]
            return (
                bool(values)
                and len(values) == len(bindings)
                and all(self._hugging_face_dataset(b.value, b.site, depth + 1) for b in values)
            )
        return False

    def _names_data(self, arg: cst.Arg, site: Site) -> bool:
        """An argument that could point a dataset at data to read or transform:
        a string, a path or file list (`root=args.data`, `os.path.join(...)`,
        `Path(...)`), a transform or tokenizer, or a value we cannot see."""
        if arg.keyword is not None and DATA_ARGUMENT_NAME.search(arg.keyword.value):
            return True
        value = arg.value
        if isinstance(value, (cst.Integer, cst.Float)):
            return False
        if isinstance(value, cst.Name):
            if value.value in ("True", "False", "None"):
                return False
            if DATA_ARGUMENT_NAME.search(value.value):
                return True
            reaching = self.facts.visible_bindings(value.value, site.scope)
            literal = [b for b in reaching if isinstance(b.value, (cst.Integer, cst.Float))]
            return not reaching or len(literal) != len(reaching)
        if isinstance(value, (cst.UnaryOperation, cst.BinaryOperation)) and not any(
            isinstance(n, (cst.SimpleString, cst.FormattedString, cst.Call)) for n in descendants(value)
        ):
            return False  # arithmetic on numbers: a size
        return True

    def _device_argument(self, arg: cst.Arg) -> bool:
        """An argument that hands the dataset a device other than the CPU
        (`device=device`, `device="cuda"`); `device="cpu"` and `None` do not count."""
        if arg.keyword is None or "device" not in arg.keyword.value.lower():
            return False
        value = arg.value
        if isinstance(value, cst.SimpleString) and str(value.evaluated_value).lower().startswith("cpu"):
            return False
        return not (isinstance(value, cst.Name) and value.value in ("None", "False"))

    def _literal_size(self, expr: cst.BaseExpression, site: Site) -> Optional[int]:
        """The number of samples of literal data (`[[1.0], [2.0]]`, `torch.tensor([...])`)."""
        data = self._resolve(expr, site)
        if isinstance(data, cst.Call) and self.facts.qualname(data.func) in (
            "torch.tensor",
            "torch.Tensor",
            "torch.FloatTensor",
            "torch.LongTensor",
        ):
            data = data.args[0].value if data.args else None
        if isinstance(data, (cst.List, cst.Tuple)):
            return len(data.elements)
        return None

    def _places_value(self, expr: cst.BaseExpression, site: Site) -> bool:
        expr = self._resolve(expr, site) or expr
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            while call is not None:
                if is_move_call(call) or call.keyword("device") is not None:
                    return True
                inner = call.receiver if isinstance(call.receiver, cst.Call) else None
                call = self.facts.call_for(inner) if inner is not None else None
        return False

    # -- where a TensorDataset's tensors live ---------------------------------------------------

    def data_place(self, expr: Optional[cst.BaseExpression], site: Site, depth: int = 0) -> Optional[Place]:
        """Where the tensors of `expr` (an argument of a TensorDataset) live:
        DEVICE, CPU, or None when that cannot be told. Followed through the
        bindings that reach `site` (`x = x.to(device)` counts from there on),
        `torch.stack`/`torch.cat` of a sequence, list and tuple literals, list
        repetition (`[x] * n`), slices and views, and moves; any part on the
        device puts the whole on the device."""
        if expr is None or depth > 8:
            return None
        if isinstance(expr, (cst.List, cst.Tuple)):
            if any(isinstance(e, cst.StarredElement) for e in expr.elements) or not expr.elements:
                return None
            return _join_places(self.data_place(e.value, site, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            for seq, count in ((expr.left, expr.right), (expr.right, expr.left)):
                if isinstance(seq, (cst.List, cst.Tuple)) and self.places.tensor_place(count, site) is None:
                    return self.data_place(seq, site, depth + 1)  # `[x] * n`: n times the same tensors
        if isinstance(expr, cst.Subscript):
            return self.data_place(expr.value, site, depth + 1)  # a slice of the same memory
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            if call is None:
                return None
            if is_move_call(call) or (call.method == "cpu" and call.receiver is not None):
                device = self.places.move_device(call)
                return DEVICE if device == ACCEL else (CPU if device == HOST else None)
            if call.qualname in _STACKERS and call.positional:
                return self.data_place(call.positional[0].value, site, depth + 1)
            if call.receiver is not None and call.method in _SAME_PLACE_METHODS:
                return self.data_place(call.receiver, site, depth + 1)
        if isinstance(expr, cst.Name):
            reaching = self.places.reaching(expr.value, site)
            if not reaching:
                return None
            found = []
            for b in reaching:
                if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.value is None:
                    found.append(self._place_of(expr, site))
                elif b.index is None:
                    found.append(self.data_place(b.value, b.site, depth + 1))
                elif isinstance(b.value, (cst.Tuple, cst.List)) and b.index < len(b.value.elements):
                    element = b.value.elements[b.index]
                    found.append(
                        None
                        if isinstance(element, cst.StarredElement)
                        else self.data_place(element.value, b.site, depth + 1)
                    )
                else:
                    found.append(self._place_of(expr, site))
            return _join_places(found)
        return self._place_of(expr, site)

    def _place_of(self, expr: cst.BaseExpression, site: Site) -> Optional[Place]:
        place = self.places.tensor_place(expr, site)
        return place if place in (DEVICE, CPU) else None

    def _host_items(self, call: Call) -> bool:
        """No TensorDataset the loader's dataset may be holds tensors whose place
        is not known to be the host: every binding of the dataset's name that
        reaches the loader is looked at (`ds = TensorDataset(...)` in two branches),
        and what `_resolve` finds through helpers and splits."""
        raw = self.dataset_expr(call)
        candidates: List[Tuple[cst.BaseExpression, Site]] = []
        resolved = self._resolve(raw, call.site)
        if resolved is not None:
            candidates.append((resolved, call.site))
        if isinstance(raw, cst.Name):
            for b in self.places.reaching(raw.value, call.site):
                if b.value is not None and b.index is None:
                    candidates.append((self._split_of(b.value) or b.value, b.site))
        for expr, _ in candidates:
            ds = self.facts.call_for(expr) if isinstance(expr, cst.Call) else None
            if ds is None or ds.qualname not in TENSOR_DATASET:
                continue
            if not ds.node.args or any(a.star for a in ds.node.args):
                return False
            if any(self.data_place(a.value, ds.site) != CPU for a in ds.node.args):
                return False
        return True

    def _getitem(self, class_name: str) -> Optional[Function]:
        for fn in self.facts.functions:
            parent = fn.scope.parent
            if (
                fn.name == "__getitem__"
                and parent is not None
                and parent.kind == ScopeKind.CLASS
                and parent.name == class_name
            ):
                return fn
        return None

    def _item_calls(self, class_name: str) -> Iterator[Call]:
        """The calls `__getitem__` makes, and those of the same-file functions or
        methods it calls, two deep."""
        fn = self._getitem(class_name)
        todo = [(fn, 0)] if fn is not None else []
        seen = set()
        while todo:
            current, depth = todo.pop()
            if current is None or id(current.node) in seen:
                continue
            seen.add(id(current.node))
            for c in self.helpers.calls_in(current):
                yield c
                inner = self.helpers.function(c)
                if inner is not None and depth < 2:
                    todo.append((inner, depth + 1))

    def _reads_per_item(self, class_name: str) -> bool:
        """`__getitem__` (or a same-file function or method it calls, two deep)
        reads or decodes a file: `Image.open`, `cv2.imread`, `np.load`, `open`..."""
        return any(
            (c.qualname or (c.node.func.value if isinstance(c.node.func, cst.Name) else None)) in FILE_READERS
            for c in self._item_calls(class_name)
        )

    def _indexes_only(self, class_name: str) -> bool:
        """`__getitem__` only indexes data held in memory (no file reads, decoding,
        transforms or tokenizing): worker processes have nothing to do."""
        fn = self._getitem(class_name)
        if fn is None:
            return False
        calls = self.helpers.calls_in(fn)
        for c in calls:
            q = c.qualname or ""
            if q.startswith("torch.") and not q.startswith(("torch.utils", "torch.load")):
                continue  # tensor ops on in-memory data
            if c.method in ("float", "long", "int", "clone", "view", "reshape", "unsqueeze", "squeeze"):
                continue
            if isinstance(c.node.func, cst.Name) and c.node.func.value in ("len", "int", "float", "range", "tuple"):
                continue
            return False
        return True

    # -- collate_fn --------------------------------------------------------------------------

    def _collate(self, call: Call) -> CollateKind:
        arg = self.argument(call, "collate_fn", COLLATE_POSITION)
        if arg is None or (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
            return NO_COLLATE
        value = arg.value
        if isinstance(value, cst.Lambda):
            return LOCAL_COLLATE
        if isinstance(value, cst.Call):
            c = self.facts.call_for(value)
            if c is not None and (c.qualname == "functools.partial" or dotted_name(value.func) == "partial"):
                if any(a.keyword is not None and "device" in a.keyword.value for a in value.args) or any(
                    self._is_device_name(a.value) for a in value.args
                ):
                    return DEVICE_COLLATE
            return UNKNOWN_COLLATE
        name = dotted_name(value)
        if name is None:
            return UNKNOWN_COLLATE
        if isinstance(value, cst.Name):
            bs = self.facts.visible_bindings(value.value, call.site.scope)
            if len(bs) == 1 and bs[0].kind == BindingKind.DEF:
                fn = self.facts.function_for_def(bs[0].target)
                if fn is None:
                    return UNKNOWN_COLLATE
                if any(is_move_call(c) or c.keyword("device") is not None for c in self.helpers.calls_in(fn)):
                    return DEVICE_COLLATE
                if fn.scope.parent is not None and fn.scope.parent.kind != ScopeKind.MODULE:
                    return LOCAL_COLLATE
                return CPU_COLLATE
        return UNKNOWN_COLLATE

    def _collate_works(self, call: Call) -> bool:
        """The loader's `collate_fn` is a same-file function whose body calls
        something besides torch's own ops and builtins (`tokenizer.pad(...)`,
        `processor(images)`, a transform): per-batch work in the process that
        collates."""
        arg = self.argument(call, "collate_fn", COLLATE_POSITION)
        if arg is None or not isinstance(arg.value, cst.Name):
            return False
        bs = self.facts.visible_bindings(arg.value.value, call.site.scope)
        fn = self.facts.function_for_def(bs[0].target) if len(bs) == 1 and bs[0].kind == BindingKind.DEF else None
        if fn is None:
            return False
        for inner in self.helpers.calls_in(fn):
            q = inner.qualname or ""
            if q.startswith("torch.") or q in _COLLATE_PLAIN:
                continue
            if inner.qualname is None and isinstance(inner.node.func, cst.Name):
                name = inner.node.func.value
                if name in _BUILTIN_CALLS and not self.facts.bindings_of(name):
                    continue
            if inner.method in _TENSOR_METHODS or inner.method in _CONTAINER_METHODS:
                continue
            return True
        return False

    def _is_device_name(self, expr: cst.BaseExpression) -> bool:
        name = dotted_name(expr)
        return bool(name and PLACING_NAME.search(name.rsplit(".", 1)[-1]))

    # -- use ---------------------------------------------------------------------------------

    def binding_of(self, call: Call) -> Optional[Binding]:
        return self.facts.binding_of_value(call.node)

    def _used(self, call: Call) -> bool:
        """Something reads the loader: it is iterated, handed on, returned or
        stored. A loader bound to a name that nothing reads before the name is
        rebound is dead."""
        stmt = call.site.stmt
        if not isinstance(stmt, (cst.Assign, cst.AnnAssign)):
            return True  # returned, passed on directly, in a container...
        b = self.binding_of(call)
        if b is None or "." in b.name:
            return True  # stored on an object or unpacked: used elsewhere
        later = sorted(
            (x for x in self.facts.scoped_bindings(b.name, b.site.scope) if x.site.order > b.site.order),
            key=lambda x: x.site.order,
        )
        end = later[0].site.order if later else None
        for use in self.facts.local_uses(b.name, b.site.scope):
            if use.site.order <= b.site.order or use.site.stmt is b.site.stmt:
                continue
            if use.site.scope is b.site.scope and end is not None and use.site.order > end:
                continue
            return True
        return False

    def only_peeked(self, call: Call) -> bool:
        """What `call` returns (a loader, or loaders from a builder, bound to a
        name or unpacked into names) is only turned into an iterator to look at
        a batch (`next(iter(loader))`): never looped over, handed on or
        returned. Names nobody reads before they are rebound count as unused;
        at least one must be peeked at."""
        stmt = call.site.stmt
        if not (isinstance(stmt, cst.Assign) and stmt.value is call.node and len(stmt.targets) == 1):
            return False
        target = stmt.targets[0].target
        if not isinstance(target, (cst.Name, cst.Tuple, cst.List)):
            return False
        names = _target_names(target)
        if not names or len(names) != len(target.elements if not isinstance(target, cst.Name) else [target]):
            return False  # nested or starred targets
        scope = call.site.scope
        peeked = False
        for name in names:
            later = [b.site.order for b in self.facts.scoped_bindings(name, scope) if b.site.order > call.site.order]
            end = min(later) if later else None
            for use in self.facts.local_uses(name, scope):
                if use.site.order <= call.site.order or (end is not None and use.site.order > end):
                    continue
                if not any(b.site.stmt is stmt for b in self.facts.visible_bindings(name, use.site.scope)):
                    continue  # a local of the same name in another function
                parent = use.site.parent
                outer = self.facts.call_of_arg(parent) if isinstance(parent, cst.Arg) else None
                if outer is None or dotted_name(outer.node.func) != "iter":
                    return False
                peeked = True
        return peeked

    def _batches(self, call: Call) -> BatchUse:
        """How the loader's batches are used in this file (see LoaderInfo.batches)."""
        b = self.binding_of(call)
        if b is None or "." in b.name:
            return BatchUse.ELSEWHERE
        sampled = handed = False
        for use in self.facts.local_uses(b.name, b.site.scope):
            if use.site.order <= b.site.order or use.site.stmt is b.site.stmt:
                continue
            parent = use.site.parent
            if isinstance(parent, cst.Arg):
                outer = self.facts.call_of_arg(parent)
                name = dotted_name(outer.node.func) if outer is not None else None
                if (
                    outer is not None
                    and name == "iter"
                    and isinstance(self.facts.parent_of(outer.node), (cst.Arg, cst.Attribute))
                ):
                    sampled = True  # `next(iter(loader))`, `iter(loader).next()`
                    continue
                if name in ("enumerate", "tqdm", "len", "zip", "iter") or (name or "").startswith("tqdm"):
                    continue
                handed = True
            elif not isinstance(parent, (cst.For, cst.Attribute)):
                handed = True  # returned, stored, aliased
        loops = self.iterated_in(call)
        if handed:
            return BatchUse.ELSEWHERE
        if loops:
            return BatchUse.MOVED if any(self._loop_moves(s) for s in loops) else BatchUse.KEPT
        return BatchUse.SAMPLED if sampled else BatchUse.ELSEWHERE

    def _loop_moves(self, site: Site, non_blocking: bool = False) -> bool:
        """The `for` at `site` moves a batch to a device, hands one to a helper
        that does (or to code we cannot see), or feeds one to a model on the
        device (the batch must go there: TL103's case). With `non_blocking`:
        some move in the loop is `non_blocking=True` (an asynchronous copy)."""
        node = site.stmt
        loop = self.loops.loop_for(node) if node is not None else None
        if loop is None:
            return False
        names = {n for n in _target_names(node.target)} if isinstance(node, cst.For) else set()
        for call in self.loops.calls_in(loop):
            if is_move_call(call) or call.keyword("device") is not None:
                if not non_blocking:
                    return True
                flag = call.keyword("non_blocking")
                if flag is not None and isinstance(flag.value, cst.Name) and flag.value.value == "True":
                    return True
                continue
            if non_blocking:
                continue
            if any(
                dotted_name(a.value) in names
                or (isinstance(a.value, cst.Subscript) and dotted_name(a.value.value) in names)
                for a in call.node.args
            ):
                forward = self.values.model_call(call)
                if forward is not None and self.places.model_place(forward.model, call.site) == DEVICE:
                    return True
                fn = self.helpers.function(call)
                builtin = isinstance(call.node.func, cst.Name) and call.node.func.value in NON_PLACING
                if (
                    fn is None
                    and call.qualname is None
                    and not builtin
                    and self.values.model_call(call) is None
                    and not self.values.is_loss_call(call)
                ):
                    return True  # handed to code we cannot see: it may move it
                if fn is not None and self.helpers.summary(fn).moves:
                    return True
                if fn is None and self._project_moves(call, names):
                    return True
        return False

    def _project_moves(self, call: Call, names: Set[str]) -> bool:
        """`call` hands a batch name to a function of another project file that
        the project index says moves that argument to a device."""
        project = self.values.project
        if project is None or call.qualname is None:
            return False
        position = 0
        for arg in call.node.args:
            where = arg.keyword.value if arg.keyword is not None else position
            if arg.keyword is None:
                if arg.star:
                    return False
                position += 1
            value = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
            if dotted_name(value) in names and project.moves_argument(call.qualname, where):
                return True
        return False

    def _copied_as_loaded(self, site: Site) -> bool:
        """The loop at `site` moves the batch tensors as the loader yields them at
        least as often as copies of them made on the host, or feeds them to a
        model on the device as they are (TL103's case: once moved, pinning pays)."""
        node = site.stmt
        loop = self.loops.loop_for(node) if node is not None else None
        if loop is None or not isinstance(node, cst.For):
            return False
        names = set(_target_names(node.target))
        items = self._comprehension_items()
        names |= {
            b for name in list(names) for b in items.get(name, ())
        }  # `{k: v.to(device) for k, v in batch.items()}`
        direct = derived = 0
        for call in self.loops.calls_in(loop):
            if is_move_call(call) and call.receiver is not None:
                if _as_loaded(call.receiver, names):
                    direct += 1
                elif root_name(call.receiver) in names:
                    derived += 1
                continue
            if not any(_as_loaded(a.value, names) for a in call.node.args):
                continue
            forward = self.values.model_call(call)
            if forward is not None and self.places.model_place(forward.model, call.site) == DEVICE:
                direct += 1
                continue
            fn = self.helpers.function(call)
            if fn is not None and self.helpers.summary(fn).moves:
                direct += 1  # handed as it is to a same-file helper that moves it
            elif fn is None and self._project_moves(call, names):
                direct += 1  # ... or to a function of another project file that moves it
        return direct > 0 and direct >= derived

    def _comprehension_items(self) -> Dict[str, List[str]]:
        """Names a comprehension binds from `<name>.items()` / `.values()`, by that name."""
        if self._items is None:
            self._items = {}
            for b in self.facts.bindings:
                value = b.value
                if (
                    b.kind == BindingKind.COMPREHENSION
                    and isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value in ("items", "values")
                ):
                    receiver = dotted_name(value.func.value)
                    if receiver:
                        self._items.setdefault(receiver, []).append(b.name)
        return self._items

    def _loop_trains(self, site: Site) -> bool:
        loop = self.loops.loop_for(site.stmt) if site.stmt is not None else None
        return loop is not None and self.loops.trains(loop)

    def _whole_dataset_batch(self, call: Call) -> bool:
        """`batch_size=len(dataset)`: a single batch per pass."""
        arg = self.argument(call, "batch_size", 1)
        value = arg.value if arg is not None else None
        return isinstance(value, cst.Call) and dotted_name(value.func) == "len"

    def loops_over(self, call: Call) -> List[Site]:
        """The `for` loops that iterate the loader `call` builds: where the name it
        is bound to is visible as that binding, and in same-file functions it is
        passed to, over the parameter that receives it (not a same-named
        parameter that receives something else)."""
        return [site for site, _ in self._passes(call)]

    def _passes(self, call: Call) -> List[Tuple[Site, Optional[Call]]]:
        """`loops_over`, each with the call of the same-file function that holds
        the loop and receives the loader (None: the loop reads the loader's own name)."""
        b = self.binding_of(call)
        if b is None:
            return []
        if "." in b.name:
            return [(site, None) for site in self.iterated_in(call)]
        out: List[Tuple[Site, Optional[Call]]] = []
        for loop in self._loops_over().get(b.name, []):
            if any(s is b.site.scope for s in loop.scope.chain()) and b in self.facts.visible_bindings(
                b.name, loop.scope
            ):
                site = self.facts.site_of_statement(loop.node)
                if site is not None:
                    out.append((site, None))
        for use in self.facts.local_uses(b.name, b.site.scope):
            parent = use.site.parent
            if not isinstance(parent, cst.Arg) or parent.value is not use.node:
                continue
            outer = self.facts.call_of_arg(parent)
            fn = self.helpers.function(outer) if outer is not None else None
            if outer is None or fn is None:
                continue
            for param in fn.params:
                if self.values.argument_for(outer, fn, param) is use.node:
                    for loop in self._loops_over().get(param, []):
                        if loop.scope is fn.scope:
                            site = self.facts.site_of_statement(loop.node)
                            if site is not None and all(site is not s for s, _ in out):
                                out.append((site, outer))
        return out

    def restarted_each_pass(self, call: Call) -> Optional[Site]:
        """A `for` over the loader `call` builds that runs again and again: in a
        loop (in the same function, or around a call of the function holding the
        `for`: `for epoch in ...: train_one_epoch(loader)`, `self.train_epoch()`)
        that does not build the loader anew, not only now and then (`if epoch %
        10 == 0: evaluate(...)`). Each such pass starts the loader's worker
        processes again. Returns that `for`'s site."""
        for site, via in self._passes(call):
            loop = self.loops.loop_for(site.stmt) if site.stmt is not None else None
            if loop is None or self.loops.runs_once(loop):
                continue
            if via is None and self._repeats(site, call.site, 0):
                return site
            if via is not None and (self._repeats(site, call.site, 3) or self._repeats(via.site, call.site, 0)):
                return site
        return None

    def _repeats(self, site: Site, built: Site, depth: int) -> bool:
        """`site` runs in every iteration of a loop that does not hold `built`,
        directly or through the same-file callers of its function."""
        loop = site.loop
        while loop is not None and loop.scope is site.scope:
            if loop.scope is built.scope and loop.contains(built.order):
                return False  # the loader is built anew each pass
            if not self.loops.runs_once(loop) and not self.loops.occasional_guard(site, loop):
                return True
            loop = loop.parent
        fn_scope = site.scope.function
        if depth >= 3 or fn_scope is None or site.scope is not fn_scope or self.loops.occasional_guard(site):
            return False
        fn = self.facts.function_of(fn_scope)
        return fn is not None and any(self._repeats(c.site, built, depth + 1) for c in self.values.callers(fn))

    def _loops_over(self) -> Dict[str, List[Loop]]:
        """`for` loops by the dotted name they iterate (through enumerate/tqdm)."""
        if self._loops_by_name is None:
            index: Dict[str, List[Loop]] = {}
            for loop in self.facts.loops:
                node = loop.node
                if isinstance(node, cst.For):
                    expr = node.iter
                    while isinstance(expr, cst.Call) and expr.args:
                        expr = expr.args[0].value
                    name = dotted_name(expr)
                    if name:
                        index.setdefault(name, []).append(loop)
            self._loops_by_name = index
        return self._loops_by_name

    def iterated_in(self, call: Call) -> List[Site]:
        """Where the loader bound by `call` is iterated by a `for` (directly or
        through enumerate/tqdm)."""
        b = self.binding_of(call)
        if b is None:
            return []
        out = []
        for loop in self._loops_over().get(b.name, []):
            site = self.facts.site_of_statement(loop.node)
            if site is not None:
                out.append(site)
        return out


# Calls a collate function makes that only stack or arrange what it is handed.
_COLLATE_PLAIN = doing(Effect.COLLATES)
_BUILTIN_CALLS = frozenset(
    "len zip list tuple dict set sorted max min sum range enumerate isinstance int float bool str map filter".split()
)
_TENSOR_METHODS = frozenset(
    "stack cat float long int half bool view reshape unsqueeze squeeze permute transpose contiguous clone".split()
)
_CONTAINER_METHODS = frozenset("append extend items keys values get pop update".split())


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


def _target_names(target: cst.BaseExpression) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[str] = []
        for el in target.elements:
            out.extend(_target_names(el.value))
        return out
    return []


def _as_loaded(expr: cst.BaseExpression, names: Set[str]) -> bool:
    """`x`, `batch["x"]`/`batch[0]` of a batch variable, or a view of one
    (`x.view(-1, 784)`, `x.unsqueeze(1)`): the memory the loader yielded, which
    a pinned batch copies from. Not a copy made on the host first (a slice
    along a later dimension, a dtype conversion)."""
    while isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _VIEWS:
            expr = expr.func.value
        elif (dotted_name(expr.func) or "").endswith("Variable") and expr.args:
            expr = expr.args[0].value  # `Variable(x)`: the tensor itself since PyTorch 0.4
        else:
            break
    if isinstance(expr, cst.Name):
        return expr.value in names
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and expr.value.value in names:
        return len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)
    return False


# torch functions that join a sequence of tensors into one, where they are.
_STACKERS = doing(Effect.JOINS)
# Tensor methods whose result lives where the tensor does.
_SAME_PLACE_METHODS = frozenset(
    "float double half bfloat16 long int short bool byte char view view_as reshape reshape_as unsqueeze squeeze "
    "flatten permute transpose contiguous detach clone type_as expand expand_as repeat narrow t".split()
)


def _join_places(places: Iterable[Optional[Place]]) -> Optional[Place]:
    """DEVICE if any part is on the device, CPU if every part is on the host, else None."""
    found = list(places)
    if DEVICE in found:
        return DEVICE
    if found and all(p == CPU for p in found):
        return CPU
    return None


# Methods that return a view of the same memory (of a contiguous batch).
_VIEWS = frozenset({"view", "view_as", "unsqueeze", "squeeze", "flatten", "contiguous", "detach"})
