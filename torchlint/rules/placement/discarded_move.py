"""TL105 discarded-move."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional

import libcst as cst

from torchlint.analysis.facts import Call, Site, dotted_name
from torchlint.analysis.knowledge import TENSOR_CUDA_OR_HOST_MOVES
from torchlint.analysis.value_kinds import TENSOR
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_TENSOR_MOVES = TENSOR_CUDA_OR_HOST_MOVES  # to, cuda, cpu


class DiscardedMove(Rule):
    """
    ## What it does
    Flags a tensor move whose result is thrown away: `x.cuda()`,
    `x.to(device)` or `x.cpu()` written as a statement of its own (not in
    test code: test files, test classes and their helpers).

    ## Why is this bad?
    `Tensor.to` and friends return a new tensor; they do not change `x`. The
    statement copies the data to the device, discards the copy, and `x` stays
    where it was, so the code after it keeps running on the CPU (or fails
    with a device mismatch). Modules are different: `model.to(device)` moves
    the module in place and is not flagged.

    ## Example
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    for x, y in loader:
        x.to(device)
        y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
    ```

    ## Fix safety
    Safe: the fix assigns the result back to the moved name, which is what
    the statement was meant to do. It is offered only for a plain name (an
    attribute such as `self.weight` may be a registered `nn.Parameter`, which
    refuses a plain tensor), and only when every later reader of the name
    works with it where the move sends it: a model on that device (not one
    built on the CPU and never moved, which `if cuda: x.cuda()` would feed a
    device tensor), tensors it meets in arithmetic, comparisons and torch
    functions that are there, place-indifferent code (`print`, `.shape`,
    `.item()`, a condition), and host code (`.numpy()`, NumPy) only after
    `.cpu()`. Values computed from the name are followed a few steps, and
    same-file helpers it is handed to are read; a reader we cannot see (a
    function from another module, a value stored on an object, returned or
    put in a container) means no fix. A notebook cell's displayed last
    expression (`y.cpu()` as a cell's output) is not a discarded move at all.

    ## References
    - [PyTorch: `Tensor.to`](https://pytorch.org/docs/stable/generated/torch.Tensor.to.html)
    """

    CODE = "TL105"
    NAME = "discarded-move"
    MESSAGE = "`{name}.{method}(...)` returns a moved copy that is thrown away; `{name}` stays where it was"
    TITLE = "A tensor move (`x.to(...)`, `x.cuda()`) returns a copy that is thrown away; the tensor stays where it was"
    FIX_TITLE = "Assign the moved tensor back"
    APPLICABILITY = Applicability.SAFE
    QUIET_IN_TESTS = True

    VALID = (
        "import torch\nx = torch.randn(3)\nx = x.cuda()\n",
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\nmodel.to('cuda')\n",
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n",
        # unknown kind: stay silent
        "def f(x):\n    x.cuda()\n",
        "model.to(device)\n",
        # tokenizer output (BatchEncoding) moves in place
        "inputs = tokenizer('a', return_tensors='pt')\ninputs.to('cuda')\n",
        # a whole batch from a loader: a collate_fn may return a BatchEncoding (`.to()` in place)
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, collate_fn=collate)\n"
        "for batch in loader:\n    batch.to('cuda')\n    out = model(**batch)\n",
        "import torch\nx = torch.randn(3)\ny = x.to('cuda')\n",
    )
    INVALID = (
        # an attribute (perhaps an nn.Parameter): reported, no fix
        Invalid(
            "import torch\nclass M(torch.nn.Module):\n    def go(self):\n        self.h = torch.zeros(3)\n"
            "        self.h.cuda()\n",
            line=5,
        ),
        # later read on the host: moving it would break `.numpy()`
        Invalid("import torch\nx = torch.randn(3)\nx.cuda()\nprint(x.numpy())\n", line=3),
        Invalid(
            "import torch\nx = torch.randn(3)\nx.cuda()\n",
            fixed="import torch\nx = torch.randn(3)\nx = x.cuda()\n",
            line=3,
        ),
        Invalid(
            "import torch as T\ndevice = T.device('cuda')\nx = T.zeros(3)\nx.to(device, non_blocking=True)\ny = x * 2\n",
            fixed="import torch as T\ndevice = T.device('cuda')\nx = T.zeros(3)\nx = x.to(device, non_blocking=True)\ny = x * 2\n",
            line=4,
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
            "for x, y in loader:\n    x.cuda()\n    y.cuda()\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
            "for x, y in loader:\n    x = x.cuda()\n    y = y.cuda()\n",
            line=5,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        for stmt, site in ctx.facts.statements:
            if not isinstance(stmt, cst.Expr) or not isinstance(stmt.value, cst.Call):
                continue
            call = ctx.facts.call_for(stmt.value)
            if call is None or call.method not in _TENSOR_MOVES or call.receiver is None:
                continue
            if a.displayed(stmt):
                continue  # a notebook cell's last expression: its value is shown, not thrown away
            name = dotted_name(call.receiver)
            if not isinstance(call.receiver, (cst.Name, cst.Attribute)) or not self._is_tensor(a, call.receiver, site):
                continue
            fix: Optional[Dict[cst.CSTNode, Replacement]] = None
            if self._assignable(ctx, call, site):
                assign = cst.Assign(
                    targets=[cst.AssignTarget(call.receiver)], value=call.node, semicolon=stmt.semicolon
                )
                fix = {stmt: assign}
            ctx.report(call.node, self.MESSAGE.format(name=name, method=call.method), replacements=fix)

    @staticmethod
    def _assignable(ctx: RuleContext, call: Call, site: Site) -> bool:
        """`x = x.cuda()` keeps working code working: `x` is a plain name (an
        attribute may be a registered `nn.Parameter`, which refuses a plain
        tensor), and every later reader of `x` works with it where the move
        sends it (a model on that device, tensors there, place-indifferent
        code; host code after `.cpu()`): the shared consumers fact."""
        if not isinstance(call.receiver, cst.Name):
            return False
        target = ctx.analysis.places.move_device(call)
        return ctx.analysis.consumers.all_on(call.receiver.value, site, target)

    @staticmethod
    def _is_tensor(a: Analysis, receiver: cst.BaseExpression, site: Site) -> bool:
        """A tensor (not a module, which moves in place, nor tokenizer output,
        whose `.to()` moves in place too, nor a whole batch from a loader, which
        may be a `BatchEncoding` or another object whose `.to()` works in place)."""
        kind = a.values.expr_kind(receiver, site)
        if kind is not None:
            return kind == TENSOR
        if a.values.is_container(receiver, site):
            return False  # a whole batch (a dict-like `BatchEncoding`, a tuple), a list: not a tensor
        return a.places.tensor_place(receiver, site) is not None
