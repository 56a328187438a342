"""TL304 loader-workers-restarted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional

import libcst as cst

from torchlint.analysis.facts import Call, dotted_name
from torchlint.analysis.loader_kinds import NUM_WORKERS_POSITION, SAMPLER_POSITION, Workers
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import comment_follows, with_keyword

if TYPE_CHECKING:
    from torchlint.analysis import Analysis


class LoaderWorkersRestarted(Rule):
    """
    ## What it does
    Flags a `torch.utils.data.DataLoader` with worker processes (`num_workers`
    known to be above 0 as the script is written: a positive literal, `min(8,
    os.cpu_count() or 1)`, or a command-line option whose declared default is
    above 0) and without
    `persistent_workers=True`, in a file that puts something on an
    accelerator, when a `for` over it runs again and again: in an epoch loop
    (`for epoch in ...: for x, y in loader:`), or in a function that such a
    loop calls (`train_one_epoch(model, loader)`, `self.train_epoch()`),
    also over the attribute of a same-file class whose instance keeps the
    loader (`Trainer(train_loader).train()`, `self.train_loader =
    train_loader` in its `__init__`), or in a function of another project
    file that iterates the loader it is handed on every call, called in such
    a loop (`validate(val_loader, model)` of `utils/validation.py`). A loader
    that a top-level function returns (alone or in a tuple) is reported in
    the function's file when another project file that puts work on an
    accelerator calls it and walks that loader in such a loop
    (`train_loader, val_loader = get_dataloaders(...)`, then `for epoch in
    range(epochs): for x, y in train_loader:`).

    Not flagged: loaders built anew in each pass (their workers start anyway),
    loaders whose workers come from an expression we cannot read (or an option
    that defaults to 0), loaders iterated once, or only now and then (`if epoch % 10 == 0:
    evaluate(model, val_loader)`), loaders only drawn from with `next(iter(...))`,
    calls passing `**kwargs` that could carry `persistent_workers`, unit
    tests, export and benchmark code.

    ## Why is this bad?
    Without `persistent_workers=True`, every new pass over the loader (every
    `iter(loader)`, which a `for` makes) shuts its worker processes down and
    starts new ones: each re-imports or forks the process, rebuilds the
    dataset, and must load its first batches before the GPU gets one. With
    many short epochs (small datasets, frequent validation) the GPU idles at
    the start of every epoch.

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
        data = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
        loader = DataLoader(data, batch_size=128, shuffle=True, num_workers=4, pin_memory=True)
        for epoch in range(30):
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
        data = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
        loader = DataLoader(data, batch_size=128, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True)
        for epoch in range(30):
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
    Unsafe: persistent workers keep the copy of the dataset they started
    with, so per-epoch changes the main process makes to the dataset
    (`dataset.set_epoch(epoch)`, an attribute set between epochs) no longer
    reach them, and their processes (and memory) stay alive between passes,
    also while another loader runs. Where the file calls `set_epoch` on
    anything but a sampler, or sets an attribute of the dataset, no fix is
    offered. A sampler's `set_epoch` (DistributedSampler) is fine: the sampler
    runs in the main process. Nor is it offered where the file seeds its
    random generators (`torch.manual_seed`, `seed_everything`, ...): without
    persistent workers every pass draws a new worker seed from the global
    generator; with them it does not, so from the second epoch a seeded run's
    shuffle order, augmentations and numbers change.

    No fix is offered for a loader a factory returns to the callers that
    walk it: the passes happen in their files, and whether those seed their
    generators or change the dataset between epochs cannot be seen from the
    factory's.

    The fix adds `persistent_workers=True` where `num_workers` is a positive
    literal or `min(8, os.cpu_count() or 1)`; where it is an option such as
    `args.workers` (which may be given as 0, and `persistent_workers=True`
    raises with no workers), it adds `persistent_workers=args.workers > 0`.

    ## References
    - [torch.utils.data.DataLoader: persistent_workers](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    - [PyTorch performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL304"
    NAME = "loader-workers-restarted"
    MESSAGE = (
        "DataLoader's worker processes are started again at every pass over it (`{loop}`"
        " runs again and again) without `persistent_workers=True`: the GPU waits while they start"
    )
    CALLERS_MESSAGE = (
        "DataLoader's worker processes are started again at every pass over it (the callers of `{function}`"
        " iterate the loader it returns again and again) without `persistent_workers=True`: the GPU waits"
        " while they start"
    )
    TITLE = "A DataLoader's worker processes are started again at every pass over it (no `persistent_workers=True`)"
    FIX_TITLE = "Add `persistent_workers=True`"
    APPLICABILITY = Applicability.UNSAFE
    REQUIRES_DEVICE = True

    _HEAD = "import torch\nfrom torch.utils.data import DataLoader\nmodel = Net().cuda()\n"
    _EPOCHS = "for epoch in range(10):\n    for x, y in loader:\n        model(x.cuda()).sum().backward()\n"
    VALID = (
        _HEAD + "loader = DataLoader(ds, num_workers=4, persistent_workers=True)\n" + _EPOCHS,
        # no workers: nothing to restart (TL302's business)
        _HEAD + "loader = DataLoader(ds)\n" + _EPOCHS,
        _HEAD + "workers = 0\nloader = DataLoader(ds, num_workers=workers)\n" + _EPOCHS,
        # an option that defaults to 0: no workers unless the user asks
        _HEAD + "parser.add_argument('--num-workers', type=int, default=0)\nargs = parser.parse_args()\n"
        "loader = DataLoader(ds, num_workers=args.num_workers)\n" + _EPOCHS,
        # iterated once
        _HEAD + "loader = DataLoader(ds, num_workers=4)\nfor x, y in loader:\n    model(x.cuda()).sum().backward()\n",
        # built anew every epoch: its workers start anyway
        _HEAD + "for epoch in range(10):\n    loader = DataLoader(ds, num_workers=4)\n"
        "    for x, y in loader:\n        model(x.cuda()).sum().backward()\n",
        # evaluated now and then
        _HEAD + "val = DataLoader(ds, num_workers=4)\nfor epoch in range(100):\n    step()\n"
        "    if epoch % 10 == 0:\n        with torch.no_grad():\n            for x, y in val:\n                model(x.cuda())\n",
        # a loop that runs once (a look at the first batch)
        _HEAD + "loader = DataLoader(ds, num_workers=4)\nfor epoch in range(3):\n    for x, y in loader:\n"
        "        print(model(x.cuda()).shape)\n        break\n",
        _HEAD + "loader = DataLoader(ds, num_workers=4, **opts)\n" + _EPOCHS,
        # no accelerator in the file
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=4)\n"
        "for epoch in range(10):\n    for x, y in loader:\n        model(x).sum().backward()\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "loader = DataLoader(ds, batch_size=64, num_workers=4)\n" + _EPOCHS,
            fixed=_HEAD + "loader = DataLoader(ds, batch_size=64, num_workers=4, persistent_workers=True)\n" + _EPOCHS,
            line=4,
            unsafe=True,
        ),
        # an explicit False; workers through a function that the epoch loop calls
        Invalid(
            _HEAD + "def train_one_epoch(data):\n    for x, y in data:\n        model(x.cuda()).sum().backward()\n"
            "loader = DataLoader(ds, num_workers=min(8, os.cpu_count() or 1), persistent_workers=False)\n"
            "while True:\n    train_one_epoch(loader)\n",
            fixed=_HEAD
            + "def train_one_epoch(data):\n    for x, y in data:\n        model(x.cuda()).sum().backward()\n"
            "loader = DataLoader(ds, num_workers=min(8, os.cpu_count() or 1), persistent_workers=True)\n"
            "while True:\n    train_one_epoch(loader)\n",
            line=7,
            unsafe=True,
        ),
        # workers from an option that defaults to 4 (and may be given as 0)
        Invalid(
            _HEAD + "parser.add_argument('--workers', type=int, default=4)\nargs = parser.parse_args()\n"
            "loader = DataLoader(ds, num_workers=args.workers)\n" + _EPOCHS,
            fixed=_HEAD + "parser.add_argument('--workers', type=int, default=4)\nargs = parser.parse_args()\n"
            "loader = DataLoader(ds, num_workers=args.workers, persistent_workers=args.workers > 0)\n" + _EPOCHS,
            line=6,
            unsafe=True,
        ),
        # a trainer's loader attribute, iterated by a method its fit loop calls
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nclass Trainer:\n    def __init__(self, ds):\n"
            "        self.model = Net().cuda()\n        self.loader = DataLoader(ds, num_workers=8)\n"
            "    def epoch(self):\n        for x, y in self.loader:\n            self.model(x.cuda()).sum().backward()\n"
            "    def fit(self):\n        for e in range(5):\n            self.epoch()\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\nclass Trainer:\n    def __init__(self, ds):\n"
            "        self.model = Net().cuda()\n        self.loader = DataLoader(ds, num_workers=8, persistent_workers=True)\n"
            "    def epoch(self):\n        for x, y in self.loader:\n            self.model(x.cuda()).sum().backward()\n"
            "    def fit(self):\n        for e in range(5):\n            self.epoch()\n",
            line=6,
            unsafe=True,
        ),
        # the dataset changes between epochs: reported, no fix
        Invalid(
            _HEAD + "loader = DataLoader(ds, num_workers=4)\nfor epoch in range(10):\n    ds.set_epoch(epoch)\n"
            "    for x, y in loader:\n        model(x.cuda()).sum().backward()\n",
            line=4,
            unsafe=True,
        ),
    )

    @classmethod
    def device_in_play(cls, analysis: "Analysis") -> bool:
        """Also a file of loader factories whose callers' files put work on an accelerator."""
        return analysis.loaders.may_feed_any_accelerator()

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        here = a.places.accelerator_in_play()
        for call in a.loaders.calls():
            if call.has_star_kwargs or any(arg.star for arg in call.node.args):
                continue
            kw = call.keyword("persistent_workers")
            if kw is not None and not (isinstance(kw.value, cst.Name) and kw.value.value == "False"):
                continue
            if a.loaders.workers_as_written(call) is not Workers.SOME or a.roles.excluded(call.site):
                continue  # no workers, or none known as the script is written (`args.workers` defaulting to 0)
            site = a.loaders.restarted_each_pass(call) if here else None
            if site is not None and site.stmt is not None:
                message = self.MESSAGE.format(loop=_header(a.module, site.stmt))
                fix = self._fix(ctx, call)
            else:
                function = a.loaders.iterated_again_by_callers(call)
                if function is None or not a.loaders.feeds_accelerator_elsewhere(call):
                    continue
                message = self.CALLERS_MESSAGE.format(function=function)
                fix = None  # the passes are in another file, whose seeding and dataset changes this one cannot see
            ctx.report(call.node, message, replacements=fix)

    @staticmethod
    def _fix(ctx: RuleContext, call: Call) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """`persistent_workers=True` (or `=<num_workers> > 0` for a name or an
        attribute); none where the dataset changes between passes, or where the
        file seeds its random generators (a seeded run's numbers would change)."""
        if _dataset_changes(ctx, call) or ctx.analysis.loaders.seeds_rngs():
            return None
        value: Optional[cst.BaseExpression] = None
        if ctx.analysis.loaders.workers(call) is Workers.SOME:
            value = cst.Name("True")  # a positive literal, or `min(8, os.cpu_count() or 1)`
        else:
            # an option that may be given as 0 (`persistent_workers=True` raises without workers)
            arg = ctx.analysis.loaders.argument(call, "num_workers", NUM_WORKERS_POSITION)
            if arg is not None and dotted_name(arg.value):
                value = cst.Comparison(arg.value, [cst.ComparisonTarget(cst.GreaterThan(), cst.Integer("0"))])
        if value is None:
            return None
        return {call.node: with_keyword(call.node, "persistent_workers", value, comment_follows(ctx, call.node))}


def _header(module: cst.Module, stmt: cst.CSTNode) -> str:
    """`for x, y in loader:`: the loop's first line, without the comments and
    blank lines above it."""
    if isinstance(stmt, cst.For):
        return f"for {module.code_for_node(stmt.target)} in {module.code_for_node(stmt.iter)}:"
    return module.code_for_node(stmt).strip().splitlines()[0]


def _dataset_changes(ctx: RuleContext, call: Call) -> bool:
    """The file calls `set_epoch` on something other than a sampler (the
    loader's `sampler=`, or `<loader>.sampler`), or assigns an attribute of the
    loader's dataset: per-pass state persistent workers would not see."""
    a = ctx.analysis
    loaders = a.loaders
    sampler = loaders.argument(call, "sampler", SAMPLER_POSITION)
    samplers = {dotted_name(sampler.value)} if sampler is not None else set()
    dataset = loaders.dataset_expr(call)
    dataset_name = dotted_name(dataset) if dataset is not None else None
    for other in a.facts.calls:
        if other.method != "set_epoch":
            continue
        receiver = dotted_name(other.receiver) or ""
        if receiver in samplers or receiver.rsplit(".", 1)[-1] in ("sampler", "batch_sampler"):
            continue
        return True
    return bool(dataset_name) and any(b.name.startswith(f"{dataset_name}.") for b in a.facts.bindings)
