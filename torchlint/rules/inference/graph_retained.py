"""TL202 graph-retained."""

from __future__ import annotations

from typing import Dict, Optional

import libcst as cst

from torchlint.analysis.graphs import Accumulation, Reach
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext


class GraphRetained(Rule):
    """
    ## What it does
    Flags a tensor that carries an autograd graph and is accumulated across
    the iterations of a training loop without `.detach()` or `.item()`:
    `total += loss`, `total = total + loss`, `losses.append(loss)`,
    `history.append(out)`. A value carries a graph when it is a model's
    output computed with gradients on in a loop that trains, a loss computed
    from one, a name `.backward()` is called on in the same loop, or
    arithmetic, indexing and tensor methods of those.

    Not flagged: values under `torch.no_grad()`/`inference_mode()`,
    `.item()`/`.detach()`/`.data` values, values we cannot follow (returned
    by a function from another module), accumulators bound again in every
    iteration, windows the loop also trims (`del window[0]`,
    `window.pop(0)`), accumulations under a periodic guard (`if step % 500 == 0:`:
    a few graphs per epoch, not one per step), and accumulators that later
    reach `.backward()`,
    `torch.autograd.grad` or a `*backward*` function (gradient accumulation
    over several losses needs their graphs); nor tests and benchmarks.

    ## Why is this bad?
    Adding a tensor that has a graph to a running total makes the total part
    of that graph, and appending it to a list keeps it alive: the graph of
    every step (its nodes, and the activations saved by any part that
    `.backward()` did not free) is kept until the loop ends. Memory grows
    with every step, and the job slows down or dies out of memory. The
    PyTorch FAQ lists `total_loss += loss` as the classic cause.

    ## Example
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    total_loss = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss
    print(total_loss / len(loader))
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    total_loss = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.detach()
    print(total_loss / len(loader))
    ```

    ## Fix safety
    Safe where the accumulator (and everything computed from it) is only
    printed, formatted, logged, converted to a number or returned: the fix
    accumulates `value.detach()`, the same numbers without the graph (a
    printed tensor no longer shows its `grad_fn`). No fix where it is handed
    to code we cannot see, stored on an object or iterated; and no finding
    at all where it reaches `.backward()`.

    ## References
    - [PyTorch FAQ: don't accumulate history across your training loop](https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory)
    - [torch.Tensor.detach](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    """

    CODE = "TL202"
    NAME = "graph-retained"
    MESSAGE = (
        "`{name}` collects `{value}`, which carries its autograd graph, across iterations: every step's graph "
        "stays alive and memory grows; accumulate `{value}.detach()` (or `.item()` only where it is read)"
    )
    TITLE = "A tensor with an autograd graph is accumulated across iterations: every step's graph stays alive"
    FIX_TITLE = "Accumulate the detached value"
    APPLICABILITY = Applicability.SAFE

    _HEAD = (
        "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(2, 2).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    )
    _STEP = "    loss = crit(model(x.to(device)), y.to(device))\n    loss.backward()\n    opt.step()\n"
    VALID = (
        # `.item()` / `.detach()`: no graph kept
        _HEAD + "total = 0.0\nfor x, y in loader:\n" + _STEP + "    total += loss.item()\nprint(total)\n",
        _HEAD + "losses = []\nfor x, y in loader:\n" + _STEP + "    losses.append(loss.detach())\nprint(losses)\n",
        # gradient accumulation: the accumulator reaches `.backward()`
        _HEAD + "for x, y in loader:\n    total = 0\n    for head in heads:\n        total += crit(head(x), y)\n"
        "    total.backward()\n",
        _HEAD + "total = 0\nfor x, y in loader:\n    total = total + crit(model(x.to(device)), y.to(device))\n"
        "(total / 4).backward()\n",
        _HEAD + "losses = []\nfor x, y in loader:\n    losses.append(crit(model(x.to(device)), y.to(device)))\n"
        "torch.stack(losses).mean().backward()\n",
        # evaluation under no_grad: no graph
        _HEAD + "total = 0.0\nwith torch.no_grad():\n    for x, y in loader:\n"
        "        total += crit(model(x.to(device)), y.to(device))\nprint(total)\n",
        # bound again every iteration: nothing kept across iterations
        _HEAD + "for x, y in loader:\n    total = 0.0\n" + _STEP + "    total += loss\n    print(total)\n",
        # a value we cannot follow
        _HEAD + "from lib import compute\ntotal = 0.0\nfor x, y in loader:\n    loss = compute(model, x)\n"
        "    opt.step()\n    total += loss\nprint(total)\n",
        # a Python number
        _HEAD + "n = 0\nfor x, y in loader:\n" + _STEP + "    n += x.shape[0]\nprint(n)\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "total = 0.0\nfor x, y in loader:\n" + _STEP + "    total += loss\nprint(total / 10)\n",
            fixed=_HEAD
            + "total = 0.0\nfor x, y in loader:\n"
            + _STEP
            + "    total += loss.detach()\nprint(total / 10)\n",
            line=11,
        ),
        Invalid(
            _HEAD + "def train(loader):\n    losses = []\n    for x, y in loader:\n        out = model(x.to(device))\n"
            "        loss = crit(out, y.to(device))\n        loss.backward()\n        opt.step()\n"
            "        losses.append(loss)\n    return sum(losses) / len(losses)\n",
            fixed=_HEAD
            + "def train(loader):\n    losses = []\n    for x, y in loader:\n        out = model(x.to(device))\n"
            "        loss = crit(out, y.to(device))\n        loss.backward()\n        opt.step()\n"
            "        losses.append(loss.detach())\n    return sum(losses) / len(losses)\n",
            line=13,
        ),
        # an output kept for later, in an epoch loop
        Invalid(
            _HEAD + "history = []\nfor epoch in range(3):\n    for x, y in loader:\n        out = model(x.to(device))\n"
            "        crit(out, y.to(device)).backward()\n        opt.step()\n        history.append(out)\n"
            "print(len(history))\n",
            fixed=_HEAD
            + "history = []\nfor epoch in range(3):\n    for x, y in loader:\n        out = model(x.to(device))\n"
            "        crit(out, y.to(device)).backward()\n        opt.step()\n        history.append(out.detach())\n"
            "print(len(history))\n",
            line=12,
        ),
        # handed to code we cannot see: reported, no fix
        Invalid(
            _HEAD + "total = 0.0\nfor x, y in loader:\n" + _STEP + "    total += loss\nreport(total)\n",
            line=11,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        graphs = a.graphs
        for acc in graphs.accumulations():
            step = a.loops.step_loop(acc.site)
            if step is None or not a.loops.trains(step) or not graphs.kept_across(acc.name, step, acc.site):
                continue
            if a.roles.excluded(acc.site) or a.grad.guarded(acc.site):
                continue
            if a.loops.periodic_guard(acc.site, step):
                continue  # kept every N steps (`if batch_idx % 500 == 0:`): a few graphs, not one per step
            if not graphs.carries_graph(acc.value, acc.site):
                continue
            reach = graphs.reach(acc)
            if reach is Reach.BACKWARD:
                continue  # gradient accumulation: the graphs are needed
            value = ctx.code(acc.value)
            fix = self._fix(acc) if reach is Reach.READ else None
            ctx.report(acc.node, self.MESSAGE.format(name=acc.name, value=value), replacements=fix)

    @staticmethod
    def _fix(acc: Accumulation) -> Optional[Dict[cst.CSTNode, Replacement]]:
        value = acc.value
        if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)) and not value.lpar:
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return {acc.value: cst.Call(cst.Attribute(value, cst.Name("detach")))}
