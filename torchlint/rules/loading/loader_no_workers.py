"""TL302 loader-no-workers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, ScopeKind, Site
from torchlint.analysis.loader_kinds import (
    DEVICE_COLLATE,
    IN_MEMORY,
    ITERABLE,
    LOCAL_COLLATE,
    NESTED_COLLATE,
    NUM_WORKERS_POSITION,
    PLACES,
    TINY,
    UNKNOWN_COLLATE,
    BatchUse,
    LoaderInfo,
    Workers,
)
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import comment_follows, module_at, with_keyword

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_WORKERS = "min(8, {os}.cpu_count() or 1)"


def _starred(call: Call) -> bool:
    return any(a.star for a in call.node.args)


class LoaderNoWorkers(Rule):
    """
    ## What it does
    Flags a `torch.utils.data.DataLoader` built without `num_workers` (or with
    `num_workers=0`) in a file that puts something on an accelerator, when
    the loader is used (iterated, handed on, returned or stored). A loader
    factory's loader (a top-level function returns it) counts too in a file
    that names no device, when another project file imports the function
    and the project puts work on an accelerator.

    Not flagged: loaders whose dataset has nothing for workers to do (a
    `TensorDataset`, a tensor, a dataset of the file or of another project
    file whose `__getitem__` only indexes data held in memory, a Hugging Face
    dataset tokenized ahead, a dataset of a few literal samples; unless a
    same-file `collate_fn`, or the dataset's own collate method, does work on
    each batch, such as `tokenizer.pad(...)`), datasets
    whose items are made on the GPU (workers cannot use CUDA), loaders that
    are never used (built in a script's function that nothing calls, or
    only shown in a notebook) or only drawn from with `next(iter(loader))`
    (every `iter()` would start the workers anew), calls passing `**kwargs` that
    could carry `num_workers`, TPU/XLA code, unit tests, export and benchmark
    code.

    ## Why is this bad?
    With no workers, every batch is loaded, decoded and augmented in the main
    process, between GPU steps: the GPU waits for the CPU each iteration.
    Worker processes prepare the next batches while the GPU computes.

    ## Example
    ```python
    import torch
    import torch.nn as nn
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms


    def main():
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torchvision.models.resnet18(num_classes=10).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        criterion = nn.CrossEntropyLoss()
        train_set = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
        loader = DataLoader(train_set, batch_size=128, shuffle=True, pin_memory=True)
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        main()
    ```

    ## Use instead
    ```python
    import os

    import torch
    import torch.nn as nn
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms


    def main():
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torchvision.models.resnet18(num_classes=10).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        criterion = nn.CrossEntropyLoss()
        train_set = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
        loader = DataLoader(
            train_set, batch_size=128, shuffle=True, pin_memory=True, num_workers=min(8, os.cpu_count() or 1)
        )
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        main()
    ```

    ## Fix safety
    Unsafe: worker processes run `__getitem__` in other processes (global
    state, random seeds and open handles behave differently). The fix sets
    `num_workers=min(8, os.cpu_count() or 1)` and adds `import os` where
    needed (with the file's first imports; in a notebook, right before the
    statement in the loader's cell). It is not offered where workers would
    break the loader: an `IterableDataset` (each worker would yield the whole
    stream), a dataset or `collate_fn` that is a lambda or a local function,
    or has one in its construction (it cannot be pickled for spawned
    workers), a `collate_fn` that places batches on the device, a dataset we
    cannot see being built; nor where workers started with spawn (Windows,
    macOS) would fail: a script that iterates the loader from code that runs
    on import (module level outside `if __name__ == "__main__":`, or a
    function such code calls: each worker imports the script again), or a
    notebook that hands workers a class or function defined in the notebook
    (a spawned worker cannot unpickle it). Nor in a file that seeds its
    random number generators (`torch.manual_seed`, `seed_everything`) when
    the dataset draws random numbers per item (a `Random*` transform, or a
    `__getitem__` that calls `random`): each worker draws from a stream of
    its own, so the seeded run's augmentations and numbers would change.
    Datasets made with a `device=` argument are not reported at all
    (workers cannot use CUDA).

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

    @classmethod
    def device_in_play(cls, analysis: "Analysis") -> bool:
        """Also a file of loader factories whose callers' files put work on an accelerator."""
        return analysis.loaders.may_feed_any_accelerator()

    _HEAD = "import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import ImageFolder\n"
    _LOOP = "for x, y in loader:\n    loss = model(x.cuda()).sum()\n    loss.backward()\n"
    # The script's work under a main guard: spawned workers can import it again.
    _MAIN = (
        "if __name__ == '__main__':\n    for x, y in loader:\n        loss = model(x.cuda()).sum()\n"
        "        loss.backward()\n"
    )
    VALID = (
        _HEAD + "loader = DataLoader(ImageFolder('d'), num_workers=4)\n" + _LOOP,
        # no device in play
        "from torch.utils.data import DataLoader\nfrom torchvision.datasets import ImageFolder\n"
        "loader = DataLoader(ImageFolder('d'))\nfor x, y in loader:\n    model(x).sum().backward()\n",
        # datasets held in memory: nothing measurable for workers to do
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.randn(8, 2))\nloader = DataLoader(ds)\n" + _LOOP,
        # a Hugging Face dataset, tokenized ahead (Arrow, in memory)
        "import torch\nfrom datasets import load_dataset\nfrom torch.utils.data import DataLoader\n"
        "ds = load_dataset('glue', 'mrpc')\ntokenized = ds.map(tokenize, batched=True)\n"
        "loader = DataLoader(tokenized['train'], collate_fn=collate)\nfor batch in loader:\n"
        "    model(**{k: v.cuda() for k, v in batch.items()}).loss.backward()\n",
        "import torch\nfrom torch.utils.data import DataLoader, Dataset\nclass Pairs(Dataset):\n"
        "    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __len__(self):\n        return len(self.x)\n"
        "    def __getitem__(self, i):\n        return self.x[i], self.y[i]\nloader = DataLoader(Pairs(a, b))\n"
        + _LOOP,
        # one batch per pass
        _HEAD + "ds = ImageFolder('d')\nloader = DataLoader(ds, batch_size=len(ds))\n" + _LOOP,
        "from torch.utils.data import DataLoader\ndef make(ds, **kw):\n    return DataLoader(ds, **kw)\nx.cuda()\n",
        "class DataLoader:\n    pass\nloader = DataLoader(ds)\n" + _LOOP,
        # never used
        _HEAD + "loader = DataLoader(ImageFolder('d'))\nx.cuda()\n",
        # drawn from once per epoch
        _HEAD + "loader = DataLoader(ImageFolder('d'))\nfor epoch in range(3):\n    x, _ = next(iter(loader))\n"
        "    model(x.cuda()).sum().backward()\n",
        # TPU
        "import torch\nimport torch_xla.core.xla_model as xm\nfrom torch.utils.data import DataLoader\n"
        "from torchvision.datasets import ImageFolder\nloader = DataLoader(ImageFolder('d'))\nfor x, y in loader:\n"
        "    model(x.to(xm.xla_device())).sum().backward()\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "loader = DataLoader(ImageFolder('d'), pin_memory=True)\n" + _MAIN,
            fixed="import os\n"
            + _HEAD
            + "loader = DataLoader(ImageFolder('d'), pin_memory=True, num_workers=min(8, os.cpu_count() or 1))\n"
            + _MAIN,
            line=4,
            unsafe=True,
        ),
        Invalid(
            "import os\nimport torch.utils.data as tud\nfrom torchvision.datasets import ImageFolder\n"
            "loader = tud.DataLoader(ImageFolder('d'), num_workers=0, pin_memory=True)\n" + _MAIN,
            fixed="import os\nimport torch.utils.data as tud\nfrom torchvision.datasets import ImageFolder\n"
            "loader = tud.DataLoader(ImageFolder('d'), num_workers=min(8, os.cpu_count() or 1), pin_memory=True)\n"
            + _MAIN,
            line=4,
            unsafe=True,
        ),
        # a same-file dataset that opens an image per item
        Invalid(
            "import torch\nfrom PIL import Image\nfrom torch.utils.data import DataLoader, Dataset\n"
            "class Photos(Dataset):\n    def __init__(self, paths):\n        self.paths = paths\n"
            "    def __len__(self):\n        return len(self.paths)\n    def __getitem__(self, i):\n"
            "        return to_tensor(Image.open(self.paths[i]))\nloader = DataLoader(Photos(paths))\n" + _MAIN,
            line=11,
            unsafe=True,
            fixed="import os\nimport torch\nfrom PIL import Image\nfrom torch.utils.data import DataLoader, Dataset\n"
            "class Photos(Dataset):\n    def __init__(self, paths):\n        self.paths = paths\n"
            "    def __len__(self):\n        return len(self.paths)\n    def __getitem__(self, i):\n"
            "        return to_tensor(Image.open(self.paths[i]))\n"
            "loader = DataLoader(Photos(paths), num_workers=min(8, os.cpu_count() or 1))\n" + _MAIN,
        ),
        # iterated by code that runs on import: no fix (a spawned worker would import the script
        # again and start workers of its own: a crash on Windows and macOS)
        Invalid(_HEAD + "loader = DataLoader(ImageFolder('d'), pin_memory=True)\n" + _LOOP, line=4),
        # in a function the script runs under its main guard, through the parameter that receives it
        Invalid(
            "import os\n" + _HEAD + "def fit(model, data):\n    for x, y in data:\n"
            "        model(x.cuda()).sum().backward()\ndef main():\n    loader = DataLoader(ImageFolder('d'))\n"
            "    fit(model, loader)\nif __name__ == '__main__':\n    main()\n",
            fixed="import os\n"
            + _HEAD
            + "def fit(model, data):\n    for x, y in data:\n        model(x.cuda()).sum().backward()\n"
            "def main():\n    loader = DataLoader(ImageFolder('d'), num_workers=min(8, os.cpu_count() or 1))\n"
            "    fit(model, loader)\nif __name__ == '__main__':\n    main()\n",
            line=9,
            unsafe=True,
        ),
        # torchvision's MNIST converts every item to a PIL image and runs its transforms
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import MNIST\n"
            "loader = DataLoader(MNIST('d'))\n" + _LOOP,
            line=4,
        ),
        # an evaluation pass over images read from disk
        Invalid(
            _HEAD + "loader = DataLoader(ImageFolder('val'))\nwith torch.no_grad():\n    for x, y in loader:\n"
            "        out = model(x.cuda())\n",
            line=4,
        ),
        # an IterableDataset: no fix (each worker would yield the whole stream)
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, IterableDataset\nclass Stream(IterableDataset):\n"
            "    def __iter__(self):\n        yield from read_lines()\nloader = DataLoader(Stream())\n" + _LOOP,
            line=6,
        ),
        # a lambda in the dataset's transforms: no fix (spawned workers cannot unpickle it)
        Invalid(
            _HEAD + "import torchvision.transforms as T\nds = ImageFolder('d', transform=T.Lambda(lambda x: x * 2))\n"
            "loader = DataLoader(ds)\n" + _LOOP,
            line=6,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        for call in a.loaders.calls():
            if call.has_star_kwargs or _starred(call) or len(call.positional) > NUM_WORKERS_POSITION:
                continue
            if a.loaders.workers(call) is not Workers.NONE:
                continue
            kw = call.keyword("num_workers")
            if a.roles.excluded(call.site) or a.places.xla or not a.loaders.may_feed_accelerator(call):
                continue
            info = a.loaders.info(call)
            if not info.used or info.dataset in (TINY, PLACES) or info.whole_dataset_batch:
                continue  # a few batches, one batch a pass, or items built on the GPU
            if info.dataset == IN_MEMORY and not info.collate_works:
                continue  # nothing for workers to do (a collate that pads or processes each batch is work)
            if info.batches is BatchUse.SAMPLED or info.peeked:
                continue  # one `next(iter(loader))` at a time: each would start the workers anew
            msg = ("DataLoader has `num_workers=0`" if kw is not None else "DataLoader has no `num_workers`") + (
                ": batches are loaded in the main process between GPU steps; use worker processes"
            )
            ctx.report(call.node, msg, replacements=self._fix(ctx, call, info))

    @staticmethod
    def _fix(ctx: RuleContext, call: Call, info: LoaderInfo) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """`num_workers=min(8, os.cpu_count() or 1)`, and `import os` where needed.
        Not offered when workers would break the loader: an IterableDataset
        (each worker yields the whole stream), a dataset or collate_fn that is
        a lambda or a local function, or a dataset class we cannot see (it
        might hold CUDA tensors or unpicklable state)."""
        if info.dataset == ITERABLE or info.collate in (LOCAL_COLLATE, NESTED_COLLATE, DEVICE_COLLATE, UNKNOWN_COLLATE):
            return None
        if not info.local_dataset or _lambda_in_dataset(ctx, call):
            return None
        if not _spawn_safe(ctx, call, info):
            return None
        if ctx.analysis.loaders.seeds_rngs() and ctx.analysis.loaders.random_items(call):
            return None  # a seeded run: workers' own random streams would change its augmentations
        found = module_at(ctx, "os", call.site)
        if found is None:
            return None
        os_alias, replacements = found
        value = cst.parse_expression(_WORKERS.format(os=os_alias))
        return {
            **replacements,
            call.node: with_keyword(call.node, "num_workers", value, comment_follows(ctx, call.node)),
        }


def _lambda_in_dataset(ctx: RuleContext, call: Call) -> bool:
    """A lambda (or a local function) in the dataset's construction, e.g. in its
    transforms: it cannot be pickled for workers started with spawn."""
    a = ctx.analysis
    expr = a.loaders._resolve(a.loaders.dataset_expr(call), call.site)
    if expr is None:
        return False
    return any(
        isinstance(part, cst.Lambda)
        or (isinstance(part, Binding) and part.kind == BindingKind.DEF and part.site.scope.kind == ScopeKind.FUNCTION)
        for part in ctx.analysis.loaders.construction(expr, call.site)
    )


# DataLoader arguments that worker processes receive pickled.
_PICKLED = ("collate_fn", "sampler", "batch_sampler", "worker_init_fn")


def _spawn_safe(ctx: RuleContext, call: Call, info: LoaderInfo) -> bool:
    """Workers started with spawn (Windows, macOS; Jupyter there too) can run
    this loader. A script must not iterate it from code that runs on import
    (outside `if __name__ == "__main__":`): each worker imports the script
    again and would try to start workers of its own. A notebook must not hand
    workers anything defined in the notebook (a dataset class, a collate
    function): a spawned worker cannot find it to unpickle it."""
    a = ctx.analysis
    if ctx.path.endswith(".ipynb"):
        exprs = [a.loaders.dataset_expr(call)] + [
            arg.value for arg in call.node.args if arg.keyword is not None and arg.keyword.value in _PICKLED
        ]
        return not any(_defined_here(ctx, e, call.site) for e in exprs if e is not None)
    b = a.loaders.binding_of(call)
    if b is None or "." in b.name:
        sites = [call.site]  # handed on or stored: where it is built
    else:
        sites = [
            u.site
            for u in ctx.facts.uses_of(b.name)
            if u.site.order > b.site.order and any(s is b.site.scope for s in u.site.scope.chain())
        ]
    return not any(a.roles.runs_on_import(s) for s in sites)


def _defined_here(ctx: RuleContext, expr: cst.BaseExpression, site: Site) -> bool:
    """A class or function defined in this file is part of `expr` (through
    names bound once before `site`)."""
    return any(
        isinstance(part, Binding) and part.kind in (BindingKind.DEF, BindingKind.CLASS)
        for part in ctx.analysis.loaders.construction(expr, site)
    )
