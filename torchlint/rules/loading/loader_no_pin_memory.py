"""TL303 loader-no-pin-memory."""
from __future__ import annotations

import libcst as cst

from torchlint.analysis.loaders import (
    class_places_on_device,
    dataset_class,
    dataset_expr,
    loader_calls,
    tensor_dataset_call,
    with_keyword,
)
from torchlint.analysis.tensors import TENSOR, Tensors
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
_PIN_MEMORY_POSITION = 7


class LoaderNoPinMemory(Rule):
    """
    ## What it does
    Flags a `torch.utils.data.DataLoader` built without `pin_memory=True` in a
    file where a device is in play. Calls passing `**kwargs` that could carry
    `pin_memory`, and loaders over a `TensorDataset` of tensors already on the
    device (which cannot be pinned), are not flagged.

    ## Why is this bad?
    Batches in pageable host memory are first copied by the driver into a
    pinned staging buffer, then to the GPU, and `.to(device,
    non_blocking=True)` cannot overlap the copy with compute. With
    `pin_memory=True` the loader hands out page-locked batches that copy
    faster and asynchronously.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=4)
    ```

    ## Use instead
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    ```

    ## Fix safety
    The fix is safe: pinning changes where host batches live, not their
    values. On a machine without an accelerator PyTorch ignores it with a
    warning.

    ## References
    - [torch.utils.data: memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    - [PyTorch performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL303"
    NAME = "loader-no-pin-memory"
    MESSAGE = "DataLoader without `pin_memory=True`: host-to-device copies go through pageable memory"
    FIX_TITLE = "Add `pin_memory=True`"
    APPLICABILITY = Applicability.SAFE
    REQUIRES_DEVICE = True

    VALID = (
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=True)\nx.cuda()\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, **cfg)\nx.cuda()\n",
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.randn(8, 2, device='cuda'))\nloader = DataLoader(ds)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=flag)\nx.cuda()\n",
        # A dataset whose items are already on the GPU cannot be pinned.
        "from torch.utils.data import DataLoader, Dataset\nclass D(Dataset):\n    def __getitem__(self, i):\n"
        "        return self.x[i].to('cuda')\nloader = DataLoader(D())\n",
    )
    INVALID = (
        Invalid(
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\nx.cuda()\n",
            fixed="from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8, pin_memory=True)\nx.cuda()\n",
            line=2,
        ),
        Invalid(
            "from torch.utils.data import DataLoader as DL\nloader = DL(\n    ds,\n    batch_size=8,\n)\nx.cuda()\n",
            fixed="from torch.utils.data import DataLoader as DL\nloader = DL(\n    ds,\n    batch_size=8,\n    pin_memory=True,\n)\n"
            "x.cuda()\n",
            line=2,
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=False)\nx.cuda()\n",
            fixed="from torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=True)\nx.cuda()\n",
            line=2,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        tensors = Tensors.of(ctx.sem)
        for call in loader_calls(ctx.sem):
            if call.has_star_kwargs or any(a.star for a in call.node.args):
                continue
            if len(call.positional) > _PIN_MEMORY_POSITION:
                continue
            kw = call.keyword("pin_memory")
            if kw is not None and not (isinstance(kw.value, cst.Name) and kw.value.value == "False"):
                continue
            cls = dataset_class(ctx.sem, dataset_expr(call), call.site)
            if cls is not None and class_places_on_device(ctx.sem, cls):
                continue  # items may already be on the device: pinning them would fail
            td = tensor_dataset_call(ctx.sem, dataset_expr(call), call.site)
            if td is not None and any(tensors.place(a.value, call.site) == TENSOR for a in td.args):
                continue  # device tensors cannot be pinned
            ctx.report(call.node, replacements={call.node: with_keyword(call.node, "pin_memory", cst.Name("True"))})
