"""TL301 batch-size-one."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.analysis.facts import Loop
from torchlint.analysis.vocabulary import ALLOCATING_FACTORIES, ONLINE_PACKAGES
from torchlint.rules.base import Invalid, Rule, RuleContext

_BATCH_NAME = re.compile(r"^(.*_)?(batch_?size|bs|batch)$", re.I)


def _is_one(node: Optional[cst.BaseExpression]) -> bool:
    return isinstance(node, cst.Integer) and node.value == "1"


class BatchSizeOne(Rule):
    """
    ## What it does
    Flags a batch size of one in a training loop that runs on an accelerator:
    `DataLoader(batch_size=1)` (or `batch_size=<name>` with that name bound
    to `1`) whose loader a training loop in the same file iterates, and a
    name such as `batch_size`/`bs` bound to `1` that is the leading dimension
    of tensors a training loop builds.

    Where a name is bound to `1`, the finding is at the `batch_size=`
    argument of the DataLoader it feeds (where the batch size takes effect).

    Not flagged: evaluation and inference with batch 1 (variable-size
    inputs, beam search, one graph per dataset are common and deliberate);
    loaders that are never iterated, only sampled, or handed on to code we
    cannot see; configuration defaults and command-line options (what they
    feed is not visible); files that never use an accelerator; export,
    latency benchmark and model summary code; unit tests; dead branches;
    online code that inherently handles one sample at a time
    (reinforcement-learning acting with `gym`/`gymnasium`).

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
    NAME = "batch-size-one"
    MESSAGE = "Batch size of 1 leaves the GPU mostly idle; use a larger batch (e.g. 32-256)"
    REQUIRES_DEVICE = True

    _TRAIN = "for x, y in loader:\n    loss = crit(model(x.cuda()), y.cuda())\n    loss.backward()\n"
    VALID = (
        # a loader from a same-file builder that is only sampled to show one batch
        "from torch.utils.data import DataLoader\ndef create_dataloader(ds, batch_size=4):\n"
        "    return DataLoader(ds, batch_size=batch_size)\nloader = create_dataloader(ds, batch_size=1)\n"
        "first = next(iter(loader))\nprint(first)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32)\n" + _TRAIN,
        "class Runner:\n    def __init__(self, batch_size=1):\n        self.batch_size = batch_size\n",
        "import torch\nbatch_size = 1\nprint(batch_size)\n",
        "import gym\nimport torch\nbatch_size = 1\nfor step in range(10):\n"
        "    obs = torch.zeros(batch_size, 4).cuda()\n    action = policy(obs)\n    loss.backward()\n",
        # configuration and options: what they feed is not visible
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--batch-size', type=int, default=1)\n",
        "config = {'lr': 0.1, 'batch_size': 1}\n",
        "class TrainConfig:\n    batch_size: int = 1\n",
        # a loader that is never iterated
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=1)\nprint(len(ds))\n",
        # evaluation with batch 1 (beam search, variable sizes, a single graph)
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(test_ds, batch_size=1)\n"
        "for image, caps in loader:\n    enc = encoder(image.cuda())\n    seqs = beam_search(decoder, enc)\n",
        # training on the CPU only
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=1)\n"
        "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n",
        # a dead branch
        "from torch.utils.data import DataLoader\nif 1:\n    loader = DataLoader(ds, batch_size=32)\nelse:\n"
        "    loader = DataLoader(tiny, batch_size=1)\n" + _TRAIN,
        # a unit test
        "import unittest\nfrom torch.utils.data import DataLoader\nclass LoaderTest(unittest.TestCase):\n"
        "    def test_loader(self):\n        loader = DataLoader(ds, batch_size=1)\n"
        "        for x, y in loader:\n            self.assertTrue(crit(model(x.cuda()), y) >= 0)\n",
    )
    INVALID = (
        Invalid("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=1)\n" + _TRAIN, line=2),
        Invalid(
            "import torch\nbatch_size = 1\nfor step in range(10):\n    x = torch.randn(batch_size, 4).cuda()\n"
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
            "    loss = train_step(lines[0].cuda())\n    loss.backward()\n",
            line=2,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        reported = set()
        online = any(v.split(".")[0] in ONLINE_PACKAGES for v in ctx.facts.aliases.values())

        def report(node: Optional[cst.CSTNode], how: str, site) -> None:
            if node is None or id(node) in reported or a.roles.excluded(site):
                return
            reported.add(id(node))
            ctx.report(node, f"Batch size of 1 ({how}) leaves the GPU mostly idle; use a larger batch (e.g. 32-256)")

        for call in a.loaders.calls():
            kw = call.keyword("batch_size")
            if kw is None or not self._trains(ctx, call):
                continue
            if _is_one(kw.value):
                report(kw.value, "`DataLoader(batch_size=1)`", call.site)
            elif isinstance(kw.value, cst.Name):
                one = self._bound_to_one(ctx, kw.value, call.site)
                if one is not None:
                    report(kw.value, f"`{kw.value.value} = 1` fed to `DataLoader(batch_size=...)`", call.site)
        if online:
            return
        for b in ctx.facts.bindings:
            if b.kind not in ("assign", "annassign") or b.index is not None or not _is_one(b.value):
                continue
            last = b.name.rsplit(".", 1)[-1]
            if not _BATCH_NAME.match(last) or "." in b.name or b.site.scope.kind == "class":
                continue
            if len(ctx.facts.visible_bindings(b.name, b.site.scope)) != 1:
                continue  # rebound somewhere: can't tell which value reaches
            if self._leads_hot_tensors(ctx, b):
                report(b.value, "the leading dimension of tensors built in a training loop", b.site)

    # -- where the batch size goes ---------------------------------------------------------

    @staticmethod
    def _loop_at(a, site) -> Optional[Loop]:
        """The loop whose statement is at `site`."""
        return a.loops.loop_for(site.stmt) if site.stmt is not None else None

    @staticmethod
    def _bound_to_one(ctx: RuleContext, name: cst.Name, site):
        bs = ctx.analysis.values.bindings_for(name.value, site)
        if len(bs) == 1 and bs[0].kind in ("assign", "annassign") and bs[0].index is None and _is_one(bs[0].value):
            return bs[0]
        return None

    def _trains(self, ctx: RuleContext, loader) -> bool:
        """A training loop in this file iterates the loader. Evaluation with
        batch 1 (variable-size inputs, beam search, one graph per dataset) and
        loaders handed on to code we cannot see are left alone."""
        a = ctx.analysis
        if not a.loaders.info(loader).used:
            return False
        loops = [lp for lp in (self._loop_at(a, s) for s in a.loaders.iterated_in(loader)) if lp is not None]
        return any(a.loops.trains(lp) for lp in loops)

    @staticmethod
    def _leads_hot_tensors(ctx: RuleContext, b) -> bool:
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
