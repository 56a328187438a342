"""TL301 batch-size-one."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, AbstractSet, Callable, Optional, Set

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Loop, ScopeKind, Site, dotted_name
from torchlint.analysis.helpers import root_name
from torchlint.analysis.vocabulary import (
    ALLOCATING_FACTORIES,
    BENCHMARK_NAME,
    DATALOADER,
    GRAPH_PACKAGES,
    ONLINE_PACKAGES,
)
from torchlint.analysis.walk import descendants
from torchlint.rules.base import Invalid, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_BATCH_NAME = re.compile(r"^(.*_)?(batch_?size|bs|batch)$", re.I)
_BATCH_OPTION = re.compile(r"^-{1,2}(.*[-_])?(batch[-_]?size|bs)$", re.I)
_BATCH_KEY = re.compile(r"^(.*[-_])?(batch[-_]?size|bs)$", re.I)
_CONFIG_CLASS = re.compile(r"(Config|Cfg|Args|Arguments|Params|Hparams|HParams|Settings|Options)$")


def _only_sampled(ctx: RuleContext, call: Call) -> bool:
    """The call's result (a loader, or what a builder returns) is only turned
    into an iterator (`next(iter(loader))`), never looped over or handed on."""
    return ctx.analysis.loaders.only_peeked(call)


def _config_only_peeked(ctx: RuleContext, element: cst.DictElement, site: Site) -> bool:
    """The configuration holding `element` (`config = {"batch_size": 1}`) is only
    handed to calls whose loaders are only looked at (`a, b = load(config)`,
    then `next(iter(a))`)."""
    node: Optional[cst.CSTNode] = ctx.facts.parent_of(element)
    binding = ctx.facts.binding_of_value(node) if isinstance(node, cst.Dict) else None
    if binding is None or "." in binding.name or binding.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN):
        return False
    later = [
        b.site.order for b in ctx.facts.scoped_bindings(binding.name, binding.site.scope) if b.site.order > site.order
    ]
    end = min(later) if later else None
    calls = []
    for use in ctx.facts.local_uses(binding.name, binding.site.scope):
        if use.site.order <= binding.site.order or (end is not None and use.site.order > end):
            continue
        if binding not in ctx.facts.visible_bindings(binding.name, use.site.scope):
            continue  # a parameter or local of the same name
        parent = use.site.parent
        if isinstance(parent, cst.Subscript) and parent.value is use.node and len(parent.slice) == 1:
            key = parent.slice[0].slice
            if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString):
                if not _BATCH_KEY.match(str(key.value.evaluated_value)):
                    continue  # `config["dataset_name"]`: another setting read
        call = ctx.facts.call_of_arg(parent) if isinstance(parent, cst.Arg) else None
        if call is None:
            return False
        calls.append(call)
    return bool(calls) and all(_only_sampled(ctx, c) for c in calls)


# DataLoader's own parameters besides the batch size.
_LOADER_PARAMETERS = frozenset(
    {
        "shuffle",
        "sampler",
        "batch_sampler",
        "num_workers",
        "collate_fn",
        "pin_memory",
        "drop_last",
        "timeout",
        "worker_init_fn",
        "prefetch_factor",
        "persistent_workers",
        "generator",
    }
)


# Names a configuration is bound to.
_CONFIG_NAME = re.compile(r"(config|cfg|conf|args|params|hparams|settings|options|defaults?|hyper|setup)", re.I)


def _is_configuration(ctx: RuleContext, element: cst.DictElement) -> bool:
    """The dict holding `element` is a configuration: bound (itself, or as a
    nested part) to a name that says so (`config = {...}`, `DEFAULTS = {...}`),
    and not a table that copies DataLoader's own signature. A dict written out
    as data (a result record) is not one."""
    if _mirrors_dataloader(ctx, element):
        return False
    node: cst.CSTNode = element
    for _ in range(32):
        parent = ctx.facts.parent_of(node)
        if isinstance(parent, (cst.Dict, cst.DictElement)):
            node = parent
            continue
        if isinstance(parent, (cst.Assign, cst.AnnAssign)):
            binding = ctx.facts.binding_of_value(node)
            return binding is not None and bool(_CONFIG_NAME.search(binding.name.rsplit(".", 1)[-1]))
        return False
    return False


def _mirrors_dataloader(ctx: RuleContext, element: cst.DictElement) -> bool:
    """The dict lists DataLoader's own parameters with their defaults (a table
    that copies its signature, e.g. to rebuild loaders): not a configuration."""
    owner = ctx.facts.parent_of(element)
    if not isinstance(owner, cst.Dict):
        return False
    keys = {
        e.key.evaluated_value
        for e in owner.elements
        if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
    }
    return len(keys & _LOADER_PARAMETERS) >= 3


# `report(node, how, site, name)`: how the batch size is set, and the name bound to it.
_Report = Callable[[Optional[cst.CSTNode], str, Site, Optional[str]], None]
_EVALUATION_HOOKS = frozenset({"val_dataloader", "test_dataloader", "predict_dataloader"})


def _in_evaluation_hook(site: Site) -> bool:
    fn = site.scope.function
    return fn is not None and fn.name in _EVALUATION_HOOKS


def _is_one(node: Optional[cst.BaseExpression]) -> bool:
    return isinstance(node, cst.Integer) and node.value == "1"


# Packages that compute or plot without running a model.
_NO_MODEL_PACKAGES = frozenset({"numpy", "pandas", "scipy", "matplotlib", "seaborn"})


class BatchSizeOne(Rule):
    """
    ## What it does
    Flags a batch size of one that feeds real work: `DataLoader(batch_size=1)`
    (or `batch_size=<name>` with that name bound to `1`) whose loader a
    training loop or an inference pass iterates (or that is handed on); a name
    such as `batch_size`/`bs` bound to `1` that is the leading dimension of
    tensors a training loop builds, or that is handed to a data loader
    builder; a `*batch_size=1` keyword given to a data module or loader
    builder; an argparse option like `--batch-size` whose default is `1`; and
    config defaults (`{"batch_size": 1}`, a `*Config` class attribute).

    Where a name is bound to `1`, the finding is at the `batch_size=`
    argument of the DataLoader it feeds (where the batch size takes effect).

    Not flagged: loaders that are never iterated (or overwritten before
    use, or only peeked at with `next(iter(loader))` outside a loop; a
    builder's loader whose loops only print its batches); an evaluation loop that takes each batch apart as one sample
    (`x[0]`, `x.squeeze(0)`, `x.item()`, beam search's `x.expand(k, ...)`)
    or that evaluates with batch 1 in a file that trains with larger batches
    (variable-size inputs that cannot be stacked); export, latency benchmark
    and model summary code; a `--batch_size` parsed in a function of a script
    that imports only the standard library and numeric or plotting packages,
    which no other project file imports (a memory estimator: it runs no
    model); unit tests; a project-local class or function
    whose `batch_size` parameter defaults to 1; online code that inherently
    handles one sample at a time (reinforcement-learning acting with
    `gym`/`gymnasium`); a loader over one dataset item (`DataLoader(ds[i])`);
    files that work on 3D volumes (MONAI's `list_data_collate` or
    sliding-window inference, SimpleITK, nibabel), where one volume per
    batch is what fits and its patches or windows are batched further on.
    Elsewhere a training loop with batch 1 is always reported.

    ## Why is this bad?
    Each step launches the same kernels for one sample as it would for a
    hundred; the GPU spends its time waiting on launches and the Python loop,
    not computing. Larger batches amortise that fixed cost.

    ## Example
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(512, 1).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    batch_size = 1

    for step in range(1000):
        x = torch.randn(batch_size, 512, device=device)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(512, 1).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    batch_size = 64

    for step in range(1000):
        x = torch.randn(batch_size, 512, device=device)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    No fix: the right batch size depends on memory, the optimizer's
    hyperparameters and the data; the message suggests a larger one.

    ## References
    - [PyTorch performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL301"
    ACCELERATOR_COST = True
    NAME = "batch-size-one"
    MESSAGE = "Batch size of 1 leaves the GPU mostly idle; use a larger batch (e.g. 32-256)"

    _TRAIN = "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n"
    VALID = (
        # a dead branch (`if 1: ... else:`)
        "from torch.utils.data import DataLoader\nif 1:\n    loader = DataLoader(ds, batch_size=32)\nelse:\n"
        "    loader = DataLoader(tiny, batch_size=1)\nfor x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n",
        # a loader from a same-file builder that is only sampled to show one batch
        "from torch.utils.data import DataLoader\ndef create_dataloader(ds, batch_size=4):\n"
        "    return DataLoader(ds, batch_size=batch_size)\nloader = create_dataloader(ds, batch_size=1)\n"
        "first = next(iter(loader))\nprint(first)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32)\n" + _TRAIN,
        "class Runner:\n    def __init__(self, batch_size=1):\n        self.batch_size = batch_size\n",
        "import torch\nbatch_size = 1\nprint(batch_size)\n",
        "import gym\nimport torch\nbatch_size = 1\nfor step in range(10):\n"
        "    obs = torch.zeros(batch_size, 4)\n    action = policy(obs)\n    loss.backward()\n",
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--epochs', default=1)\n",
        "config = {'batch_size': 64, 'epochs': 1}\n",
        "class Policy:\n    batch_size = 1\n",
        # a loader that is never iterated
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=1)\nprint(len(ds))\n",
        # beam search: each batch is one image, taken apart on purpose
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(test_ds, batch_size=1)\n"
        "for image, caps in loader:\n    enc = encoder(image)\n    enc = image.expand(5, 3, 256, 256)\n"
        "    seqs = beam_search(decoder, enc)\n",
        # evaluation with batch 1 beside training with larger batches (variable-size images)
        "from torch.utils.data import DataLoader\ntrain = DataLoader(train_ds, batch_size=16)\n"
        "test = DataLoader(test_ds, batch_size=1)\nfor x, y in train:\n    crit(model(x), y).backward()\n"
        "for x, y in test:\n    mae = abs(model(x).sum() - y.sum())\n",
        # export: the batch dimension of a traced graph
        "import torch\ndef export_onnx(path, batch_size=1):\n    dummy = torch.zeros(batch_size, 3)\n"
        "    torch.onnx.export(model, dummy, path)\nexport_onnx('m.onnx', batch_size=1)\n",
        # a unit test
        "import unittest\nfrom torch.utils.data import DataLoader\nclass LoaderTest(unittest.TestCase):\n"
        "    def test_loader(self):\n        loader = DataLoader(ds, batch_size=1)\n"
        "        for x, y in loader:\n            self.assertTrue(crit(model(x), y) >= 0)\n",
    )
    INVALID = (
        Invalid("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=1)\n" + _TRAIN, line=2),
        Invalid(
            "import torch\nbatch_size = 1\nfor step in range(10):\n    x = torch.randn(batch_size, 4)\n"
            "    loss = model(x)\n    loss.backward()\n",
            line=2,
        ),
        # a name bound to 1 fed to the loader: reported where it takes effect
        Invalid(
            "from torch.utils.data import DataLoader\nBATCH_SIZE = 1\nloader = DataLoader(ds, batch_size=BATCH_SIZE)\n"
            + _TRAIN,
            line=3,
        ),
        # a training loop that takes each batch apart: still batch 1 for training
        Invalid(
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=1)\nfor lines, _ in loader:\n"
            "    loss = train_step(lines[0])\n    loss.backward()\n",
            line=2,
        ),
        Invalid("config = {'lr': 0.1, 'batch_size': 1}\n", line=1),
        Invalid("from dataclasses import dataclass\n@dataclass\nclass TrainConfig:\n    batch_size: int = 1\n", line=4),
        Invalid(
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--batch-size', type=int, default=1)\n",
            line=3,
        ),
        Invalid(
            "from mypkg import MovingMNISTDataModule\ndm = MovingMNISTDataModule(root='d', eval_batch_size=1)\n", line=2
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if a.loaders.accumulates_gradients():
            return  # batch 1 with gradient accumulation: a memory choice, the effective batch is larger
        if a.loaders.volume_pipeline():
            return  # one 3D volume per batch, cut into patches or windows that are batched further on
        reported = set()
        online = any(v.split(".")[0] in ONLINE_PACKAGES for v in ctx.facts.aliases.values())

        required = a.loaders.required_one()

        def report(node: Optional[cst.CSTNode], how: str, site: Site, name: Optional[str] = None) -> None:
            if node is None or id(node) in reported or a.roles.excluded(site):
                return
            if name is not None and name.rsplit(".", 1)[-1] in required:
                return  # the code raises or asserts unless it is 1: a constraint, not a choice
            reported.add(id(node))
            ctx.report(node, f"Batch size of 1 ({how}) leaves the GPU mostly idle; use a larger batch (e.g. 32-256)")

        trains_batched = self._trains_with_larger_batches(ctx)
        for call in a.loaders.calls():
            kw = call.keyword("batch_size")
            if kw is None or _in_evaluation_hook(call.site):
                continue  # (a Lightning `val_dataloader()`: evaluation one sample at a time is common and deliberate)
            if _is_one(kw.value):
                if self._feeds_work(ctx, call, trains_batched):
                    report(kw.value, "`DataLoader(batch_size=1)`", call.site)
            elif isinstance(kw.value, cst.Name):
                one = self._bound_to_one(ctx, kw.value, call.site)
                if one is not None and self._feeds_work(ctx, call, trains_batched):
                    report(
                        kw.value,
                        f"`{kw.value.value} = 1` fed to `DataLoader(batch_size=...)`",
                        call.site,
                        kw.value.value,
                    )
        no_model = _runs_no_model(ctx)
        for call in ctx.facts.calls:
            if call.method == "add_argument":
                if not no_model(call):
                    self._argparse(call, report)
            elif call.qualname not in DATALOADER:
                self._keyword_config(ctx, call, report)
        self._config_dicts(ctx, report)
        for b in ctx.facts.bindings:
            if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.index is not None or not _is_one(b.value):
                continue
            last = b.name.rsplit(".", 1)[-1]
            if not _BATCH_NAME.match(last) or "." in b.name:
                continue
            if b.site.scope.kind == ScopeKind.CLASS:
                if _CONFIG_CLASS.search(b.site.scope.name):
                    report(b.value, "a config default", b.site, b.name)
                continue
            if len(ctx.facts.visible_bindings(b.name, b.site.scope)) != 1:
                continue  # rebound somewhere: can't tell which value reaches
            if not online and self._leads_hot_tensors(ctx, b):
                report(b.value, "the leading dimension of tensors built in a training loop", b.site, b.name)
            elif self._passed_to_loader_builder(ctx, b):
                report(b.value, "passed to a data loader builder", b.site, b.name)

    # -- where the batch size goes ---------------------------------------------------------

    @staticmethod
    def _loop_at(a: Analysis, site: Site) -> Optional[Loop]:
        """The loop whose statement is at `site`."""
        return a.loops.loop_for(site.stmt) if site.stmt is not None else None

    @staticmethod
    def _bound_to_one(ctx: RuleContext, name: cst.Name, site: Site) -> Optional[Binding]:
        bs = ctx.analysis.values.bindings_for(name.value, site)
        if (
            len(bs) == 1
            and bs[0].kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            and bs[0].index is None
            and _is_one(bs[0].value)
        ):
            return bs[0]
        return None

    def _feeds_work(self, ctx: RuleContext, loader: Call, trains_batched: bool) -> bool:
        """The loader is used, and not as a one-sample-at-a-time evaluation: an
        evaluation loop does not take its batches apart as single samples (`x[0]`,
        `x.squeeze(0)`, `x.item()`, `x.expand(k, ...)` for beam search), and a file
        that trains with larger batches does not merely evaluate with batch 1
        (variable-size inputs). A training loop with batch 1 is always reported."""
        a = ctx.analysis
        info = a.loaders.info(loader)
        if not info.used or info.peeked or a.loaders.one_item(loader):
            return False  # never read, only a batch looked at (`next(iter(loader))`), or one item
        loops = [lp for lp in (self._loop_at(a, s) for s in a.loaders.iterated_in(loader)) if lp is not None]
        if not loops:
            return True  # handed on: used elsewhere
        for loop in loops:
            if not a.loops.trains(loop) and self._per_sample(ctx, loop):
                return False  # evaluation one sample at a time by design (beam search, variable sizes)
        if all(not a.loops.trains(lp) for lp in loops) and trains_batched:
            return False
        return any(a.loops.role(lp) is not None for lp in loops)

    @staticmethod
    def _per_sample(ctx: RuleContext, loop: Loop) -> bool:
        names = set(loop.targets)
        derived = _derived_in_loop(ctx, loop, names)
        for call in ctx.analysis.loops.calls_in(loop):
            recv = root_name(call.receiver) if call.receiver is not None else None
            if (
                recv in names
                and call.method in ("squeeze", "item", "expand", "numpy")
                and (call.method != "squeeze" or call.node.args)
            ):
                return True
            if call.method == "squeeze" and _first_dim(call) and call.receiver is not None:
                # `convert(model(x)).squeeze(0)`: the batch dimension of a value made from the
                # batch dropped: the code takes each batch as one sample
                if any(isinstance(n, cst.Name) and n.value in derived for n in descendants(call.receiver)):
                    return True
        for use in ctx.facts.uses:
            if use.node.value in names and loop.contains(use.site.order) and isinstance(use.site.parent, cst.Subscript):
                sub = use.site.parent
                if (
                    len(sub.slice) == 1
                    and isinstance(sub.slice[0].slice, cst.Index)
                    and isinstance(sub.slice[0].slice.value, cst.Integer)
                    and sub.slice[0].slice.value.value == "0"
                ):
                    return True
        return False

    @classmethod
    def _trains_with_larger_batches(cls, ctx: RuleContext) -> bool:
        a = ctx.analysis
        for call in a.loaders.calls():
            kw = call.keyword("batch_size")
            if kw is not None and not _is_one(kw.value):
                if any(
                    a.loops.trains(lp)
                    for lp in (cls._loop_at(a, s) for s in a.loaders.iterated_in(call))
                    if lp is not None
                ):
                    return True
        return False

    @staticmethod
    def _leads_hot_tensors(ctx: RuleContext, b: Binding) -> bool:
        """`batch_size = 1` is the leading dimension of tensors a training loop builds."""
        a = ctx.analysis
        for use in ctx.facts.uses_of(b.name):
            if ctx.facts.visible_bindings(b.name, use.site.scope) != [b]:
                continue
            parent = use.site.parent
            if isinstance(parent, cst.Arg) and parent.value is use.node and parent.keyword is None:
                call = ctx.facts.call_of_arg(parent)
                if (
                    call is not None
                    and call.qualname in ALLOCATING_FACTORIES
                    and call.positional
                    and call.positional[0] is parent
                ):
                    loop = a.roles.work_loop(call.site)
                    if loop is not None and a.loops.trains(loop):
                        return True
        return False

    @staticmethod
    def _passed_to_loader_builder(ctx: RuleContext, b: Binding) -> bool:
        """`train_batch_size = 1` handed to something that builds loaders
        (`MovingMNISTDataLoaders(train_batch_size, ...)`)."""
        for use in ctx.facts.uses_of(b.name):
            parent = use.site.parent
            if isinstance(parent, cst.Arg) and parent.value is use.node:
                call = ctx.facts.call_of_arg(parent)
                name = (dotted_name(call.node.func) or "") if call is not None else ""
                if (
                    call is not None
                    and re.search(r"(data_?loader|datamodule)", name, re.I)
                    and call.qualname not in DATALOADER
                ):
                    return True
        return False

    @staticmethod
    def _keyword_config(ctx: RuleContext, call: Call, report: _Report) -> None:
        """`Datamodule(eval_batch_size=1)`: a batch-size keyword of 1 handed to a
        data module or loader builder."""
        name = dotted_name(call.node.func) or ""
        if not re.search(r"(data|loader|module|dataset)", name, re.I) or BENCHMARK_NAME.search(name):
            return
        if (call.qualname or "").split(".")[0] in GRAPH_PACKAGES:
            return  # a graph loader: one batch is one graph (often the whole dataset), by design
        if ctx.analysis.loaders.feeds_no_pass(call):
            return  # `first = next(iter(make_loader(..., batch_size=1)))`: one batch looked at
        for arg in call.node.args:
            if arg.keyword is not None and _BATCH_KEY.match(arg.keyword.value) and _is_one(arg.value):
                report(arg.value, f"`{arg.keyword.value}=1`", call.site, arg.keyword.value)

    @staticmethod
    def _config_dicts(ctx: RuleContext, report: _Report) -> None:
        """`{"batch_size": 1}` and `dict(batch_size=1)` literals."""
        for string, site in ctx.facts.strings:  # dict keys, from the facts: no extra walk
            parent = site.parent
            if isinstance(parent, cst.DictElement) and parent.key is string and _is_one(parent.value):
                name = string.evaluated_value
                if isinstance(name, str) and _BATCH_KEY.match(name) and _is_configuration(ctx, parent):
                    if not _config_only_peeked(ctx, parent, site):
                        report(parent.value, "a config default", site, name)
        for call in ctx.facts.calls:
            if (
                isinstance(call.node.func, cst.Name)
                and call.node.func.value == "dict"
                and not ctx.facts.bindings_of("dict")
            ):
                binding = ctx.facts.binding_of_value(call.node)
                if binding is None or not _CONFIG_NAME.search(binding.name.rsplit(".", 1)[-1]):
                    continue  # a dict that is data (a result record), not a configuration
                for arg in call.node.args:
                    if arg.keyword is not None and _BATCH_KEY.match(arg.keyword.value) and _is_one(arg.value):
                        report(arg.value, "a config default", call.site, arg.keyword.value)

    @staticmethod
    def _argparse(call: Call, report: _Report) -> None:
        names = [a.value for a in call.positional if isinstance(a.value, cst.SimpleString)]
        if not any(_BATCH_OPTION.match(str(n.evaluated_value)) for n in names):
            return
        kw = call.keyword("default")
        if kw is not None and _is_one(kw.value):
            dest = call.keyword("dest")
            if dest is not None and isinstance(dest.value, cst.SimpleString):
                name = str(dest.value.evaluated_value)
            else:
                options = [str(n.evaluated_value) for n in names]
                long = [o for o in options if o.startswith("--")]
                name = (long or options)[0].lstrip("-").replace("-", "_")  # argparse's dest
            report(kw.value, "an argparse default", call.site, name)


def _runs_no_model(ctx: RuleContext) -> Callable[[Call], bool]:
    """For a call in a function of this file: the file imports only the standard
    library and numeric or plotting packages, and no other project file imports
    the function (a memory estimator's `main()`; not a `get_args()` that the
    training script imports): its `--batch_size` is arithmetic, no model runs."""
    project = ctx.analysis.values.project
    if project is None or not all(
        v.split(".")[0] in sys.stdlib_module_names or v.split(".")[0] in _NO_MODEL_PACKAGES
        for v in ctx.facts.aliases.values()
    ):
        return lambda call: False

    def no_model(call: Call) -> bool:
        scope = call.site.scope
        while scope.parent is not None and scope.parent.kind != ScopeKind.MODULE:
            scope = scope.parent
        if scope.kind != ScopeKind.FUNCTION or scope.parent is None:
            return False
        return not project.used_elsewhere(project.local(scope.name))

    return no_model


def _first_dim(call: Call) -> bool:
    """`.squeeze(0)` / `.squeeze(dim=0)`."""
    args = call.node.args
    return len(args) == 1 and isinstance(args[0].value, cst.Integer) and args[0].value.value == "0"


def _derived_in_loop(ctx: RuleContext, loop: Loop, names: AbstractSet[str]) -> Set[str]:
    """`names` and the names bound in `loop` from values that mention them (`out =
    model(x)`, `y = convert(out)`), a few steps deep."""
    found = set(names)
    bindings = [
        b
        for b in ctx.facts.bindings
        if b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and b.value is not None and loop.contains(b.site.order)
    ]
    for _ in range(4):
        grown = {
            b.name
            for b in bindings
            if b.name not in found
            and b.value is not None
            and any(isinstance(n, cst.Name) and n.value in found for n in descendants(b.value))
        }
        if not grown:
            break
        found |= grown
    return found
