"""TL402 tensor-python-loop."""
from __future__ import annotations

from typing import Dict, Optional

import libcst as cst

from torchlint.analysis.facts import Loop, dotted_name
from torchlint.analysis.tensors import Tensors
from torchlint.rules.base import Invalid, Rule, RuleContext

_NOT_WORK_ATTRS = frozenset({"shape", "device", "dtype", "ndim", "requires_grad", "is_cuda"})


def parent_map(root: cst.CSTNode) -> Dict[int, cst.CSTNode]:
    parents: Dict[int, cst.CSTNode] = {}

    class _V(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            for child in node.children:
                parents[id(child)] = node
            return True

    root.visit(_V())
    return parents


class TensorPythonLoop(Rule):
    """
    ## What it does
    Flags a Python `for` loop that walks a tensor element by element --
    `for x in t:`, or `for i in range(len(t))` / `range(t.shape[0])` /
    `range(t.size(0))` with `t[i]` in the body -- and does tensor work on
    each element. `t` must be known to be a tensor (created by torch, a model
    output, or a parameter that every caller in the same file passes a tensor
    to). Loops over lists of tensors, `named_parameters()`, `ModuleList`s and
    dict items are not flagged.

    ## Why is this bad?
    Every element becomes its own tiny tensor and every operation its own
    kernel launch (or its own host round trip): thousands of launches where
    one vectorised operation over the whole tensor would do.

    ## Example
    ```python
    sums = []
    for row in batch:
        sums.append(row.sum())
    ```

    ## Use instead
    ```python
    sums = batch.sum(dim=1)
    ```

    ## Fix safety
    No fix: vectorising needs to know what the loop computes; the message
    suggests it.

    ## References
    - [PyTorch broadcasting semantics](https://pytorch.org/docs/stable/notes/broadcasting.html)
    """

    CODE = "TL402"
    NAME = "tensor-python-loop"
    MESSAGE = "Python loop over a tensor's elements does tensor work per element; vectorize it"

    VALID = (
        "import torch\nxs = [torch.randn(3), torch.randn(3)]\nfor x in xs:\n    y = x.sum()\n",
        "import torch\nfor name, p in model.named_parameters():\n    p.grad.zero_()\n",
        "import torch\nt = torch.randn(4, 3)\nfor row in t:\n    rows.append(row)\n",
        "import torch\nd = {'a': torch.randn(2)}\nfor k, v in d.items():\n    v.mul_(2)\n",
        "import torch\nt = torch.randn(4)\nfor i in range(len(t)):\n    print(i)\n",
    )
    INVALID = (
        Invalid("import torch\nt = torch.randn(8, 3)\nfor row in t:\n    total = row.sum()\n", line=3),
        Invalid("import torch\nt = torch.randn(8, 3)\nfor i in range(t.shape[0]):\n    y = torch.relu(t[i])\n",
                line=3),
        Invalid(
            "import torch\ndef f(batch):\n    for item in batch:\n        out.append(item.mean())\n"
            "x = torch.randn(4, 2)\nf(x)\n",
            line=3,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        tensors = Tensors.of(ctx.sem)
        for loop in ctx.facts.loops:
            if not isinstance(loop.node, cst.For):
                continue
            site = ctx.facts.site_of_statement(loop.node)
            if site is None:
                continue
            it = loop.node.iter
            if isinstance(loop.node.target, cst.Name) and tensors.is_tensor(it, site) \
                    and not tensors.is_forward_output(it, site):  # a model may return a tuple
                if self._element_work(ctx, loop, loop.node.target.value, None):
                    ctx.report(loop.node, f"Python loop over the elements of tensor `{ctx.code(it)}` does tensor "
                                          "work per element; vectorize it (one op over the whole tensor)")
                continue
            tensor = self._range_over(tensors, it, site)
            if tensor is not None and isinstance(loop.node.target, cst.Name):
                if self._element_work(ctx, loop, loop.node.target.value, tensor):
                    ctx.report(loop.node, f"Python index loop over tensor `{tensor}` does tensor work per "
                                          "element; vectorize it (one op over the whole tensor)")

    @staticmethod
    def _range_over(tensors: Tensors, it: cst.BaseExpression, site) -> Optional[str]:
        """`range(len(t))`, `range(t.shape[0])`, `range(t.size(0))`: the name `t`."""
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"
                and len(it.args) == 1):
            return None
        arg = it.args[0].value
        t = None
        if isinstance(arg, cst.Call) and isinstance(arg.func, cst.Name) and arg.func.value == "len" and len(arg.args) == 1:
            t = arg.args[0].value
            if tensors.is_forward_output(t, site):
                return None  # `len()` of a model output: it may be a tuple
        elif isinstance(arg, cst.Subscript) and isinstance(arg.value, cst.Attribute) and arg.value.attr.value == "shape":
            t = arg.value.value
        elif isinstance(arg, cst.Call) and isinstance(arg.func, cst.Attribute) and arg.func.attr.value == "size":
            t = arg.func.value
        name = dotted_name(t) if t is not None else None
        if name is None or not tensors.is_tensor(t, site):
            return None
        return name

    @staticmethod
    def _element_work(ctx: RuleContext, loop: Loop, var: str, tensor: Optional[str]) -> bool:
        parents = None
        for use in ctx.facts.uses_of(var):
            if use.site.scope is not loop.scope or not loop.contains(use.site.order) or use.site.order <= loop.order:
                continue
            if parents is None:
                parents = parent_map(loop.node.body)
            node: cst.CSTNode = use.node
            if tensor is not None:
                # `t[i]`: the element is the subscript.
                index = parents.get(id(node))
                sub_el = parents.get(id(index)) if isinstance(index, cst.Index) else None
                sub = parents.get(id(sub_el)) if isinstance(sub_el, cst.SubscriptElement) else None
                if not (isinstance(sub, cst.Subscript) and dotted_name(sub.value) == tensor
                        and sub.slice and sub.slice[0] is sub_el):
                    continue
                node = sub
            if _is_tensor_work(ctx, node, parents):
                return True
        return False


def _is_tensor_work(ctx: RuleContext, node: cst.CSTNode, parents: Dict[int, cst.CSTNode]) -> bool:
    parent = parents.get(id(node))
    if isinstance(parent, cst.Attribute) and parent.value is node:
        return parent.attr.value not in _NOT_WORK_ATTRS
    if isinstance(parent, (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget)):
        return True
    if isinstance(parent, cst.Subscript) and parent.value is node:
        return True
    if isinstance(parent, cst.Arg):
        call = parents.get(id(parent))
        if isinstance(call, cst.Call):
            c = ctx.facts.call_for(call)
            if c is not None and ((c.qualname or "").startswith("torch.") or ctx.sem.is_model_forward(c)):
                return True
    return False
