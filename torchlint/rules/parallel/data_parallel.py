"""TL601 data-parallel."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call
from torchlint.analysis.knowledge import DATA_PARALLEL
from torchlint.rules.base import Invalid, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_DATA_PARALLEL = DATA_PARALLEL
_DDP_RECIPE = "https://pytorch.org/tutorials/intermediate/ddp_tutorial.html"


class DataParallel(Rule):
    """
    ## What it does
    Flags `nn.DataParallel(model)` (`torch.nn.DataParallel`,
    `torch.nn.parallel.DataParallel`) in a file that trains: a loop in it
    calls `.backward()` or `optimizer.step()` (or an AMP scaler's
    `scaler.step(optimizer)`; directly or through a same-file helper). Also a project's own subclass of it, and a project
    function that returns one (`DataParallel(model, chunk_sizes=...)` of a
    `models/data_parallel.py`), at the call in the training file.

    Not flagged: files that do not train (a library that only builds or
    wraps models, an inference script, a script that takes gradients only to
    read them and steps no optimizer), a wrap inside a function that runs the
    model without training it (an `evaluate()` that wraps a reloaded
    checkpoint), tests, smoke blocks, benchmarks and other tooling, and
    `isinstance(m, nn.DataParallel)` checks.

    ## Why is this bad?
    `DataParallel` runs in one process: every step it scatters the batch from
    the first GPU, copies the model's parameters and buffers to every other
    GPU again, runs the replicas in Python threads that share one GIL,
    gathers the outputs back on the first GPU and reduces the gradients
    there. The first GPU does more work and holds more memory than the
    others, and the threads contend for the interpreter.
    `DistributedDataParallel` runs one process per GPU, replicates the model
    once, and overlaps the gradient all-reduce with the backward pass; the
    PyTorch documentation recommends it even on a single machine, and it is
    typically several times faster on the same GPUs.

    ## Example
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda")
    model = nn.DataParallel(nn.Linear(20, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import os

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    # launched with: torchrun --nproc_per_node=<GPUs> train.py
    dist.init_process_group("nccl")
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    model = DDP(nn.Linear(20, 2).to(rank), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for x, y in loader:  # a DataLoader with a DistributedSampler
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x.to(rank)), y.to(rank))
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    No fix: moving to `DistributedDataParallel` changes how the script is
    launched (`torchrun`), how data is split (`DistributedSampler`) and where
    logging and checkpoints happen (rank 0). The message links the recipe.

    ## References
    - [Getting started with DistributedDataParallel](https://pytorch.org/tutorials/intermediate/ddp_tutorial.html)
    - [CUDA semantics: use DistributedDataParallel instead of DataParallel](https://pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead)
    """

    CODE = "TL601"
    NAME = "data-parallel"
    MESSAGE = (
        "`{call}` replicates the model in one process every step (threads sharing one GIL, gathers on the first "
        "GPU): use `DistributedDataParallel`, one process per GPU ({recipe})"
    )
    TITLE = "`nn.DataParallel` in a training script: `DistributedDataParallel` is faster on the same GPUs"

    _HEAD = (
        "import torch\nimport torch.nn as nn\nnet = nn.Linear(2, 2)\nopt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
    )
    _TRAIN = "for x, y in loader:\n    loss = model(x.cuda()).sum()\n    loss.backward()\n    opt.step()\n"
    VALID = (
        # a file that never trains: inference over data
        _HEAD + "model = nn.DataParallel(net).cuda()\nwith torch.no_grad():\n"
        "    for x, y in loader:\n        out = model(x.cuda())\n",
        # a library function that wraps a model
        "import torch.nn as nn\ndef wrap(model):\n    return nn.DataParallel(model)\n",
        # an isinstance check
        _HEAD + "model = net.cuda()\nif isinstance(model, nn.DataParallel):\n    model = model.module\n" + _TRAIN,
        # a local class named DataParallel
        _HEAD
        + "class DataParallel:\n    def __init__(self, m):\n        self.m = m\nmodel = DataParallel(net)\n"
        + _TRAIN,
    )
    INVALID = (
        Invalid(_HEAD + "model = nn.DataParallel(net).cuda()\n" + _TRAIN, line=5),
        # a project subclass of it
        Invalid(
            _HEAD + "class Parallel(nn.DataParallel):\n    pass\nmodel = Parallel(net).cuda()\n" + _TRAIN,
            line=7,
        ),
        Invalid(
            "import torch\nfrom torch.nn.parallel import DataParallel as DP\nnet = torch.nn.Linear(2, 2)\n"
            "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "if torch.cuda.device_count() > 1:\n    net = DP(net)\nmodel = net.cuda()\n" + _TRAIN,
            line=6,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        direct = any(c.qualname in _DATA_PARALLEL for c in ctx.facts.calls)
        if not (direct or a.values.project is not None) or not self._trains(ctx):
            return
        calls = [c for c in ctx.facts.calls if _builds_data_parallel(a, c)]
        wrapped = set()  # scopes already reported: moving them to DDP is one change for all their wraps
        for call in calls:
            if a.roles.excluded(call.site) or a.roles.benchmark_file:
                continue
            if _inference_wrap(ctx, call) or id(call.site.scope.node) in wrapped:
                continue
            wrapped.add(id(call.site.scope.node))
            ctx.report(call.node, self.MESSAGE.format(call=ctx.code(call.node.func), recipe=_DDP_RECIPE))

    @staticmethod
    def _trains(ctx: RuleContext) -> bool:
        """A loop in the file trains (`.backward()`, `optimizer.step()`, a same-file
        helper that does) outside tests and tooling, and something steps an
        optimizer (gradients taken only to be read, such as head-importance
        scores, are not training): the file is a training script."""
        a = ctx.analysis
        if not any(a.values.is_optimizer_step(c) or a.values.library_trainer_run(c) for c in ctx.facts.calls):
            return False
        for loop in ctx.facts.loops:
            site = ctx.facts.site_of_statement(loop.node)
            if site is not None and a.loops.trains(loop) and not a.roles.excluded(site):
                return True
        return False


def _builds_data_parallel(a: Analysis, call: Call) -> bool:
    """`call` builds a torch DataParallel: torch's own, or (asked of the project
    index) a project subclass of it or a function of another project file
    returning one (a function of this file shows its own `nn.DataParallel` call)."""
    if call.qualname in _DATA_PARALLEL:
        return True
    project = a.values.project
    if project is None:
        return False
    qualname = call.qualname
    func = call.node.func
    if qualname is None and isinstance(func, cst.Name):
        bindings = a.facts.visible_bindings(func.value, call.site.scope)
        if len(bindings) != 1 or bindings[0].kind != BindingKind.CLASS:
            return False
        qualname = project.local(func.value)
    if qualname is None or qualname.startswith("torch."):
        return False
    return project.builds_data_parallel(qualname)


def _inference_wrap(ctx: RuleContext, call: Call) -> bool:
    """The wrap is in a function that runs the model but never trains, itself
    or through its helpers (`evaluate()` wrapping a reloaded checkpoint): the
    replicas only run inference, where DDP's gradient all-reduce has nothing to do."""
    scope = call.site.scope.function
    fn = ctx.facts.function_of(scope) if scope is not None else None
    if fn is None:
        return False
    summary = ctx.analysis.helpers.summary(fn)
    return summary.forwards and not summary.trains
