"""A loader's dataset: what it is (in memory, tiny, iterable, one that places
items on the device, one that reads or decodes files per item), where a
`TensorDataset`'s tensors live, and whether the file seeds its random
generators while the dataset draws random numbers per item.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Deque, Iterable, Iterator, List, Optional, Tuple, Union

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Function, ScopeKind, Site, dotted_name
from torchlint.analysis.knowledge import Effect, doing, is_move_call
from torchlint.analysis.place_kinds import ACCEL, CPU, DEVICE, HOST, Place
from torchlint.analysis.project.kinds import ClassKind, ItemWork
from torchlint.analysis.vocabulary import (
    DATA_ARGUMENT_NAME,
    FILE_READERS,
    INDEX_FACTORIES,
    ITEM_PLAIN_BUILTINS,
    ITEM_PLAIN_CALLS,
    ITEM_PLAIN_METHODS,
    RANDOM_FACTORIES,
    RNG_SEEDERS,
    SEEDING_NAMES,
    TENSOR_DATASET,
    TORCHVISION_FILE_DATASETS,
)
from torchlint.analysis.walk import children, descendants

if TYPE_CHECKING:
    pass
from torchlint.analysis.loader_calls import LoaderCalls
from torchlint.analysis.loader_kinds import (
    IN_MEMORY,
    ITERABLE,
    PLACES,
    READS,
    TINY,
    TINY_DATASET,
    UNKNOWN_DS,
    DatasetKind,
)

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


class LoaderDatasets(LoaderCalls):
    """Loaders' datasets, on top of the loader calls."""

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
            if len(bindings) > 1 and name and "." not in name:
                bindings = self.facts.reaching(name, site)  # `data = [...]`, then `data = Dataset(data)`
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
        return self._dataset_at(self.dataset_expr(call), call.site, 0)

    def _dataset_at(self, raw: Optional[cst.BaseExpression], site: Site, depth: int) -> Tuple[DatasetKind, bool]:
        """What the dataset `raw` (read at `site`) is. A parameter of a function
        several same-file calls pass datasets to (`make_loader(train_ds)`,
        `make_loader(val_ds)`) is what every one of them passes, when they agree."""
        if self._hugging_face_dataset(raw, site):
            return IN_MEMORY, True  # an Arrow table in memory, tokenized ahead: nothing for workers to do
        place = self.places.tensor_place(raw, site)
        if place == DEVICE:
            return PLACES, True  # a loader over a tensor on the device: its items are there
        if place is not None:
            return IN_MEMORY, True  # ... over a tensor (an index tensor): items are rows of memory
        expr = self._resolve(raw, site)
        if expr is None and depth < 2 and isinstance(raw, cst.Name):
            # `if mlp: ds = MLPDataset(df)` / `else: ds = LSTMDataset(df)`: what every branch builds, when they agree
            reaching = self.places.reaching(raw.value, site)
            if len(reaching) > 1 and all(
                b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and b.value is not None and b.index is None
                for b in reaching
            ):
                kinds = {self._dataset_at(b.value, b.site, depth + 1) for b in reaching}
                if len(kinds) == 1:
                    return kinds.pop()
        if expr is None and depth < 2:
            passed = self._passed_for(raw, site)
            kinds = {self._dataset_at(arg, at, depth + 1) for arg, at in passed}
            if len(kinds) == 1:
                return kinds.pop()
        if self.index_sequence(raw, site) or self.index_sequence(expr, site):
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
            if any(self.data_place(a.value, ds.site) == DEVICE for a in ds.positional):
                return PLACES, True  # `TrafficDataset(x_train, n)` over tensors already on the device
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
        project = self.values.project
        items = project.dataset_items(q) if project is not None and q else None
        if items is ItemWork.READS:
            return READS, True  # a project file's class whose items are read from files
        if items is ItemWork.INDEXES:
            return IN_MEMORY, True  # ... or only indexed from memory
        if not any(self._names_data(a, ds.site) for a in ds.node.args):
            # `MyTrainDataset(2048)`, `NameDataset(is_train_set=True)`: nothing says
            # its items are read or transformed; it may only index memory. Can't tell.
            return IN_MEMORY, True
        return UNKNOWN_DS, name.rsplit(".", 1)[-1][:1].isupper()

    def _passed_for(self, raw: Optional[cst.BaseExpression], site: Site) -> List[Tuple[cst.BaseExpression, Site]]:
        """`raw` is a parameter of a same-file function: what each of its callers
        passes for it, with the call's site (empty when a caller passes nothing we see)."""
        if not isinstance(raw, cst.Name):
            return []
        bindings = self.values.bindings_for(raw.value, site)
        if len(bindings) != 1 or bindings[0].kind != BindingKind.PARAM:
            return []
        fn = self.facts.function_of(bindings[0].site.scope)
        callers = self.values.callers(fn) if fn is not None else []
        out = []
        for caller in callers:
            arg = self.values.argument_for(caller, fn, raw.value) if fn is not None else None
            if arg is None:
                return []
            out.append((arg, caller.site))
        return out

    def index_sequence(self, expr: Optional[cst.BaseExpression], site: Site, depth: int = 0) -> bool:
        """`expr` is a sequence of integer indices held on the host: the builtin
        `range(...)`, `torch.arange`/`torch.randperm`/`np.arange`/
        `np.random.permutation` without a device, a slice of one, or `list`/
        `tuple` of one (also through names bound once). A loader over it yields
        index batches for the caller to gather with: it loads nothing per item."""
        if expr is None or depth > 6:
            return False
        if isinstance(expr, cst.Name):
            reaching = self.facts.reaching(expr.value, site)
            if len(reaching) == 1 and reaching[0].kind == BindingKind.ASSIGN and reaching[0].index is None:
                # `idx = mask.nonzero().view(-1)`, then `idx = idx.split(n)[rank]`: each at its own site
                return self.index_sequence(reaching[0].value, reaching[0].site, depth + 1)
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
        if call.method == "nonzero" and call.qualname is None:
            return True  # `mask.nonzero()`: the indices of a mask (a tensor's or an array's)
        if call.method in _INDEX_KEEPING and call.qualname is None and call.receiver is not None:
            return self.index_sequence(call.receiver, site, depth + 1)  # `.view(-1)`, `.split(n)[rank]`
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
        if isinstance(expr, cst.Dict):
            if not expr.elements or any(not isinstance(e, cst.DictElement) for e in expr.elements):
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
                    # `data, stats = data_gen(...)`: element of the tuple a same-file helper returns
                    returned = self._returned_element(b)
                    found.append(
                        self.data_place(returned[0], returned[1], depth + 1)
                        if returned is not None
                        else self._place_of(expr, site)
                    )
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
            if q in ITEM_PLAIN_CALLS or c.method in ITEM_PLAIN_METHODS:
                continue
            if isinstance(c.node.func, cst.Name) and c.node.func.value in ITEM_PLAIN_BUILTINS:
                continue
            return False
        return True


# torch functions that join a sequence of tensors into one, where they are.
_STACKERS = doing(Effect.JOINS)


# Tensor methods whose result lives where the tensor does.
_SAME_PLACE_METHODS = frozenset(
    "float double half bfloat16 long int short bool byte char view view_as reshape reshape_as unsqueeze squeeze "
    "flatten permute transpose contiguous detach clone type_as expand expand_as repeat narrow t".split()
)


# Methods of an index tensor (or array) whose result holds the same indices, reshaped or split.
_INDEX_KEEPING = frozenset({"view", "reshape", "flatten", "squeeze", "split", "chunk", "long", "cpu", "tolist"})


def _join_places(places: Iterable[Optional[Place]]) -> Optional[Place]:
    """DEVICE if any part is on the device, CPU if every part is on the host, else None."""
    found = list(places)
    if DEVICE in found:
        return DEVICE
    if found and all(p == CPU for p in found):
        return CPU
    return None
