"""TL104 create-then-move."""
from __future__ import annotations

from typing import List

import libcst as cst

from torchlint.analysis.devices import is_dtype_expr, move_target
from torchlint.analysis.semantics import DEVICE_KWARG_FACTORIES
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext

# `.to()` keywords that only matter for a copy; allocating in place makes them moot.
_MOOT_KWARGS = frozenset({"non_blocking", "copy", "memory_format"})


class CreateThenMove(Rule):
    """
    ## What it does
    Flags a tensor that is created on the CPU and moved to a device at once,
    such as `torch.randn(n, d).to(device)` or `torch.zeros(n).cuda()`.

    ## Why is this bad?
    The tensor is first allocated and filled in host memory, then copied over
    PCIe to the device: an extra allocation, an extra host-to-device copy and,
    for random factories, CPU work the GPU could do much faster. Inside a
    training loop the copy runs every iteration. Factories accept `device=` and
    create the tensor where it is needed.

    ## Example
    ```python
    noise = torch.randn(batch_size, 128).to(device)
    ```

    ## Use instead
    ```python
    noise = torch.randn(batch_size, 128, device=device)
    ```

    ## Fix safety
    The fix is safe: it moves the device (and any dtype given to `.to`) into
    the factory call. Note that random factories draw from the device's
    generator instead of the CPU's, so seeded values differ from before; the
    distribution is the same.

    ## References
    - [PyTorch: Tensor creation ops](https://pytorch.org/docs/stable/torch.html#creation-ops)
    - [PyTorch performance tuning guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL104"
    NAME = "create-then-move"
    MESSAGE = "Tensor is created on the CPU and then moved; create it on the device directly"
    FIX_TITLE = "Pass `device=` to the factory"
    APPLICABILITY = Applicability.SAFE

    VALID = (
        "import torch\nx = torch.randn(3, device='cuda')\n",
        "import torch\nx = torch.randn(3).to(torch.float16)\n",
        "import torch\nx = torch.from_numpy(a).to('cuda')\n",
        "import torch\ny = torch.randn(3)\nz = y.to('cuda')\n",
        "import torch\nx = torch.randn_like(y).to('cuda')\n",
        "def randn(*a): ...\nx = randn(3).to('cuda')\n",
        "import torch\nx = torch.randn(3).to(other)\n",
    )
    INVALID = (
        Invalid(
            "import torch\ndevice = torch.device('cuda')\nx = torch.randn(1, 10).to(device)\n",
            fixed="import torch\ndevice = torch.device('cuda')\nx = torch.randn(1, 10, device=device)\n",
            line=3,
        ),
        Invalid(
            "import torch as T\nx = T.zeros(4).cuda()\n",
            fixed='import torch as T\nx = T.zeros(4, device="cuda")\n',
            line=2,
        ),
        Invalid(
            "import torch\nx = torch.tensor([1, 2]).to(dev, dtype=torch.float16)\n",
            fixed="import torch\nx = torch.tensor([1, 2], device=dev, dtype=torch.float16)\n",
            line=2,
        ),
        Invalid(
            "from torch import ones\nx = ones(2, 2).to('cuda', non_blocking=True)\n",
            fixed="from torch import ones\nx = ones(2, 2, device='cuda')\n",
            line=2,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        for call in ctx.facts.calls:
            if call.method not in ("to", "cuda") or not isinstance(call.receiver, cst.Call):
                continue
            inner = ctx.facts.call_for(call.receiver)
            if inner is None or inner.qualname not in DEVICE_KWARG_FACTORIES:
                continue
            device = move_target(ctx.sem, call)
            if device is None:
                continue
            replacement = self._fixed_factory(ctx, call, inner.node, device)
            ctx.report(inner.node, replacements={call.node: replacement} if replacement is not None else None)

    @staticmethod
    def _fixed_factory(ctx: RuleContext, move, factory: cst.Call, device: cst.BaseExpression):
        extra: List[cst.Arg] = []
        positional = move.positional
        for i, arg in enumerate(move.node.args):
            if arg.star:
                return None
            name = arg.keyword.value if arg.keyword else None
            if name == "device" or (name is None and i == 0 and move.method == "to"):
                continue
            if name in _MOOT_KWARGS:
                continue
            if name == "dtype" or (name is None and i == 1 and is_dtype_expr(ctx.sem, arg.value)):
                extra.append(cst.Arg(arg.value, keyword=cst.Name("dtype"), equal=_EQ))
                continue
            return None  # something we don't understand: no fix
        if move.method == "cuda" and positional and not isinstance(positional[0].value, cst.Integer):
            return None
        replaced = {"device"} | ({"dtype"} if extra else set())
        args = [a for a in factory.args if not (a.keyword and a.keyword.value in replaced)]
        new_args = args + [cst.Arg(device, keyword=cst.Name("device"), equal=_EQ)] + extra
        # Commas: every arg but the last gets ", ".
        fixed = []
        for i, a in enumerate(new_args):
            last = i == len(new_args) - 1
            comma = cst.MaybeSentinel.DEFAULT if last else (
                a.comma if isinstance(a.comma, cst.Comma) else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            fixed.append(a.with_changes(comma=comma))
        return factory.with_changes(args=fixed)


_EQ = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
