"""TL302 loader-no-workers."""

from __future__ import annotations

from typing import Dict, List, Tuple, Union

import libcst as cst

from torchlint.analysis.facts import Call
from torchlint.analysis.loaders import (
    DEVICE_COLLATE,
    IN_MEMORY,
    ITERABLE,
    LOCAL_COLLATE,
    NUM_WORKERS_POSITION,
    PLACES,
    TINY,
    UNKNOWN_COLLATE,
)
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext
from torchlint.rules.nodes import with_keyword

_WORKERS = "min(8, {os}.cpu_count() or 1)"


def _starred(call: Call) -> bool:
    return any(a.star for a in call.node.args)


class LoaderNoWorkers(Rule):
    """
    ## What it does
    Flags a `torch.utils.data.DataLoader` built without `num_workers` (or with
    `num_workers=0`) in a file that puts something on an accelerator, when
    the loader is used (iterated, handed on, returned or stored).

    Not flagged: loaders whose dataset has nothing for workers to do (a
    `TensorDataset`, a same-file dataset whose `__getitem__` only indexes
    tensors held in memory, a dataset of a few literal samples), datasets
    whose items are made on the GPU (workers cannot use CUDA), loaders that
    are never used or only drawn from with `next(iter(loader))` (every
    `iter()` would start the workers anew), calls passing `**kwargs` that
    could carry `num_workers`, TPU/XLA code, unit tests, export and benchmark
    code.

    ## Why is this bad?
    With no workers, every batch is loaded, decoded and augmented in the main
    process, between GPU steps: the GPU waits for the CPU each iteration.
    Worker processes prepare the next batches while the GPU computes.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    import os

    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
    ```

    ## Fix safety
    Unsafe: worker processes run `__getitem__` in other processes (global
    state, random seeds and open handles behave differently), and on
    platforms that spawn workers (macOS, Windows) the script needs an
    `if __name__ == "__main__":` guard. The fix sets
    `num_workers=min(8, os.cpu_count() or 1)` and adds `import os` where
    needed (in a notebook, in the first code cell that imports). It is not
    offered where workers would break the loader: an `IterableDataset` (each
    worker would yield the whole stream), a dataset or `collate_fn` that is a
    lambda or a local function, or has one in its construction (it cannot be
    pickled for spawned workers), a `collate_fn` that places batches on the
    device, or a dataset we cannot see being built.

    ## References
    - [torch.utils.data: single- and multi-process data loading](https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading)
    - [PyTorch performance tuning guide: asynchronous data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL302"
    NAME = "loader-no-workers"
    MESSAGE = "DataLoader loads batches in the main process (no `num_workers`); the GPU waits for data"
    FIX_TITLE = "Set `num_workers=min(8, os.cpu_count() or 1)`"
    APPLICABILITY = Applicability.UNSAFE
    REQUIRES_DEVICE = True

    _HEAD = "import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import MNIST\n"
    _LOOP = "for x, y in loader:\n    out = model(x.cuda())\n"
    VALID = (
        _HEAD + "loader = DataLoader(MNIST('d'), num_workers=4)\n" + _LOOP,
        # no device in play
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\nfor x, y in loader:\n    out = model(x)\n",
        # an in-memory TensorDataset
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.randn(8, 2))\nloader = DataLoader(ds)\n" + _LOOP,
        # a dataset whose __getitem__ only indexes tensors in memory
        "import torch\nfrom torch.utils.data import DataLoader, Dataset\nclass Pairs(Dataset):\n"
        "    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __len__(self):\n        return len(self.x)\n"
        "    def __getitem__(self, i):\n        return self.x[i], self.y[i]\nloader = DataLoader(Pairs(a, b))\n"
        + _LOOP,
        "from torch.utils.data import DataLoader\ndef make(ds, **kw):\n    return DataLoader(ds, **kw)\nx.cuda()\n",
        "class DataLoader:\n    pass\nloader = DataLoader(ds)\n" + _LOOP,
        # never used
        _HEAD + "loader = DataLoader(MNIST('d'))\nx.cuda()\n",
        # drawn from once per epoch: workers would start anew every time
        _HEAD + "loader = DataLoader(MNIST('d'))\nfor epoch in range(3):\n    x, _ = next(iter(loader))\n"
        "    show(model(x.cuda()))\n",
        # TPU
        "import torch\nimport torch_xla.core.xla_model as xm\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds)\nfor x, y in loader:\n    out = model(x.to(xm.xla_device()))\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "loader = DataLoader(MNIST('d'), pin_memory=True)\n" + _LOOP,
            fixed="import os\n"
            + _HEAD
            + "loader = DataLoader(MNIST('d'), pin_memory=True, num_workers=min(8, os.cpu_count() or 1))\n"
            + _LOOP,
            line=4,
            unsafe=True,
        ),
        Invalid(
            "import os\nimport torch.utils.data as tud\nfrom torchvision.datasets import MNIST\n"
            "loader = tud.DataLoader(MNIST('d'), num_workers=0, pin_memory=True)\n" + _LOOP,
            fixed="import os\nimport torch.utils.data as tud\nfrom torchvision.datasets import MNIST\n"
            "loader = tud.DataLoader(MNIST('d'), num_workers=min(8, os.cpu_count() or 1), pin_memory=True)\n" + _LOOP,
            line=4,
            unsafe=True,
        ),
        # a lambda in the dataset's transforms: no fix (spawned workers cannot unpickle it)
        Invalid(
            _HEAD + "import torchvision.transforms as T\nds = MNIST('d', transform=T.Lambda(lambda x: x * 2))\n"
            "loader = DataLoader(ds)\n" + _LOOP,
            line=6,
        ),
        # an IterableDataset: no fix (each worker would yield the whole stream)
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, IterableDataset\nclass Stream(IterableDataset):\n"
            "    def __iter__(self):\n        yield from read_lines()\nloader = DataLoader(Stream())\n" + _LOOP,
            line=6,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        for call in a.loaders.calls():
            if call.has_star_kwargs or _starred(call) or len(call.positional) > NUM_WORKERS_POSITION:
                continue
            kw = call.keyword("num_workers")
            if kw is not None and not (isinstance(kw.value, cst.Integer) and kw.value.evaluated_value == 0):
                continue
            if a.roles.excluded(call.site) or a.places.xla:
                continue
            info = a.loaders.info(call)
            if not info.used or info.dataset in (IN_MEMORY, TINY, PLACES):
                continue  # nothing for workers to do, or items built on the GPU (workers cannot use CUDA)
            if info.batches == "sampled":
                continue  # one `next(iter(loader))` at a time: each would start the workers anew
            msg = ("DataLoader has `num_workers=0`" if kw is not None else "DataLoader has no `num_workers`") + (
                ": batches are loaded in the main process between GPU steps; use worker processes"
            )
            ctx.report(call.node, msg, replacements=self._fix(ctx, call, info))

    @staticmethod
    def _fix(ctx: RuleContext, call: Call, info):
        """`num_workers=min(8, os.cpu_count() or 1)`, and `import os` where needed.
        Not offered when workers would break the loader: an IterableDataset
        (each worker yields the whole stream), a dataset or collate_fn that is
        a lambda or a local function, or a dataset class we cannot see (it
        might hold CUDA tensors or unpicklable state)."""
        if info.dataset == ITERABLE or info.collate in (LOCAL_COLLATE, DEVICE_COLLATE, UNKNOWN_COLLATE):
            return None
        if not info.local_dataset or _lambda_in_dataset(ctx, call):
            return None
        facts = ctx.facts
        os_alias = facts.module_alias("os")
        if os_alias is not None:
            imports = [b for b in facts.visible_bindings(os_alias, call.site.scope) if b.kind == "import"]
            if not imports:
                return None  # `os` is rebound here: don't guess
            if not any(b.site.order < call.site.order or b.site.scope is not call.site.scope for b in imports):
                os_alias = None  # imported only later (a later notebook cell): import it at the top as well
        replacements: Dict[cst.CSTNode, Union[cst.CSTNode, cst.FlattenSentinel]] = {}
        if os_alias is None:
            if any(b.kind != "import" for b in facts.bindings_of("os")):
                return None  # `os` means something else here
            anchor = _import_anchor(ctx.module)
            if anchor is None:
                return None
            stmt, before = anchor
            import_os = cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(cst.Name("os"))])])
            if before:
                # Take over the anchor's leading comments/blank lines.
                import_os = import_os.with_changes(leading_lines=stmt.leading_lines)
                replacements[stmt] = cst.FlattenSentinel([import_os, stmt.with_changes(leading_lines=[])])
            else:
                replacements[stmt] = cst.FlattenSentinel([stmt, import_os])
            os_alias = "os"
        value = cst.parse_expression(_WORKERS.format(os=os_alias))
        replacements[call.node] = with_keyword(call.node, "num_workers", value)
        return replacements


def _lambda_in_dataset(ctx: RuleContext, call: Call) -> bool:
    """A lambda (or a local function) in the dataset's construction, e.g. in its
    transforms: it cannot be pickled for workers started with spawn."""
    a = ctx.analysis
    expr = a.loaders._resolve(a.loaders.dataset_expr(call), call.site)
    if expr is None:
        return False
    stack: List[cst.CSTNode] = [expr]
    seen = 0
    while stack and seen < 200:
        node = stack.pop()
        seen += 1
        if isinstance(node, cst.Lambda):
            return True
        if isinstance(node, cst.Name):
            bs = ctx.facts.visible_bindings(node.value, call.site.scope)
            for b in bs:
                if b.kind == "def" and b.site.scope.kind == "function":
                    return True  # a local function
                if b.value is not None and b.kind in ("assign", "annassign") and b.site.order < call.site.order:
                    stack.append(b.value)
            continue
        stack.extend(node.children)
    return False


def _import_anchor(module: cst.Module):
    """Where `import os` goes: (statement, insert before it?). In the first run
    of plain `import x` lines, in alphabetical order; else before the first
    import (after `from __future__`)."""
    plain_run: List[Tuple[Union[cst.SimpleStatementLine, cst.BaseCompoundStatement], str]] = []
    first_import = None
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None
        if (
            isinstance(small, cst.ImportFrom)
            and isinstance(small.module, cst.Name)
            and small.module.value == "__future__"
        ):
            continue
        if isinstance(small, cst.Import):
            if plain_run and stmt.leading_lines:
                break  # a blank line or comment ends the block
            plain_run.append((stmt, _import_name(small)))
            first_import = first_import or stmt
            continue
        if isinstance(small, cst.ImportFrom):
            first_import = first_import or stmt
        if plain_run:
            break
        if first_import is not None and not isinstance(small, cst.ImportFrom):
            break
    if plain_run:
        for stmt, name in plain_run:
            if name > "os":
                return stmt, True
        return plain_run[-1][0], False
    return (first_import, True) if first_import is not None else None


def _import_name(node: cst.Import) -> str:
    from torchlint.analysis.facts import dotted_name

    return dotted_name(node.names[0].name) or ""
