"""TL303 loader-no-pin-memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional

import libcst as cst

from torchlint.analysis.facts import Call
from torchlint.analysis.loader_calls import could_call_loader
from torchlint.analysis.loader_kinds import (
    CPU_COLLATE,
    NESTED_COLLATE,
    NO_COLLATE,
    PIN_MEMORY_POSITION,
    PLACES,
    BatchUse,
    Workers,
)
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import comment_follows, module_at, with_keyword

if TYPE_CHECKING:
    from torchlint.analysis import Analysis
    from torchlint.analysis.project import FileView

_NO_BENEFIT_YET = (
    "; pinning pays off with worker processes (`num_workers`) or `non_blocking=True` copies, so add one of them with it"
)


class LoaderNoPinMemory(Rule):
    """
    ## What it does
    Flags a `torch.utils.data.DataLoader` built without `pin_memory=True` (or
    an expression that could enable it) whose batches are copied to a CUDA
    device: the file puts something on an accelerator, and the loader's
    batches are moved to the device in this file (or the loader is handed on,
    returned or stored, to be used elsewhere). A loader factory's loader (a
    top-level function returns it) counts too in a file that names no
    device, when another project file imports the function and the project
    puts work on an accelerator. A batch cast to a CUDA tensor type
    (`imgs.type(torch.cuda.FloatTensor)`, or a name bound to one under a
    condition) is copied to the device.

    Not flagged: loaders whose `collate_fn` we cannot see into (a same-file
    function is read, and so is the nested one a same-file factory returns:
    `collate_fn = get_collate_fn(pad_index)`), or that
    places batches on the device itself (pinning a CUDA tensor raises),
    datasets whose items are already on the device (also a dataset class
    of the file handed any argument already on the device, as a tensor a
    helper moved), batches the loop remakes on the host before it copies
    them (`img = augment(img)`), loaders iterated here
    whose batches are never moved to the device nor fed to a model on it, loaders that are never used
    or only peeked at (`next(iter(loader))` outside a loop),
    calls passing `**kwargs` that could carry `pin_memory`, TPU/XLA code
    (pinned memory is CUDA advice), unit tests, export and benchmark code.

    ## Why is this bad?
    Batches in pageable host memory are first copied by the driver into a
    pinned staging buffer, then to the GPU, and `.to(device,
    non_blocking=True)` cannot overlap the copy with compute. With
    `pin_memory=True` the loader hands out page-locked batches that copy
    faster and asynchronously.

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
        loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4)
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
        train_set = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
        loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4, pin_memory=torch.cuda.is_available())
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
    Offered only where pinning pays off: the loader has worker processes
    (the pinning runs in its pin thread, beside the step) or some batch is
    copied with `non_blocking=True`. Loading and pinning in the main process
    before a blocking copy is one more copy, not a faster one: such a loader
    is reported with that advice (add workers or `non_blocking=True` with
    the pinning) and no fix.

    Safe: it adds `pin_memory=torch.cuda.is_available()` (or sets an explicit
    `pin_memory=False` to it), which pins where a GPU exists and changes
    nothing, without a warning, on a machine without one. Pinning changes
    where host batches live, not their values. Pinning a tensor that is
    already on the device raises ("cannot pin 'torch.cuda.FloatTensor'") on
    every batch, so the fix is offered only where the dataset's tensors are
    known to be on the host: a `TensorDataset`'s tensors are followed
    through assignments, `torch.stack`/`torch.cat`, list literals and
    repetition (`[x] * n`), slices, views and moves; one that is on the device
    (`x = x.to(device)` before `TensorDataset(torch.stack([x] * n))`) is not
    reported at all, and one whose place is not known (a parameter,
    `torch.load(...)`) is reported without a fix. It needs `torch` imported
    as a module (when it is imported only after the loader, in a later
    notebook cell, the fix imports it at the top of the loader's cell);
    otherwise no fix is offered.

    ## References
    - [torch.utils.data: memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    - [PyTorch performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL303"
    NAME = "loader-no-pin-memory"
    MESSAGE = "DataLoader without `pin_memory=True`: host-to-device copies go through pageable memory"
    FIX_TITLE = "Add `pin_memory=torch.cuda.is_available()`"
    APPLICABILITY = Applicability.SAFE
    REQUIRES_DEVICE = True

    @classmethod
    def device_in_play(cls, analysis: "Analysis") -> bool:
        """Also a file of loader factories whose callers' files put work on an accelerator."""
        return analysis.loaders.may_feed_any_accelerator()

    _LOOP = "for x, y in loader:\n    x = x.cuda(non_blocking=True)\n    loss = model(x).sum()\n    loss.backward()\n"
    VALID = (
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=True)\n" + _LOOP,
        # one batch drawn once to look at
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=1024)\n"
        "x, y = next(iter(loader))\nprint(model(x.cuda()).shape)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\nfor x, y in loader:\n    out = model(x)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, **cfg)\n" + _LOOP,
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.randn(8, 2, device='cuda'))\nloader = DataLoader(ds)\n" + _LOOP,
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=flag)\n" + _LOOP,
        # A collate_fn that returns device tensors (pinning them raises).
        "import torch\nfrom functools import partial\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, collate_fn=partial(collate, device=device))\n" + _LOOP,
        # A collate_fn we cannot see into.
        "import torch\nfrom torch.utils.data import DataLoader\nfrom mypkg import collate\n"
        "loader = DataLoader(ds, collate_fn=collate)\n" + _LOOP,
        # TPU/XLA
        "import torch\nimport torch_xla.core.xla_model as xm\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds)\nfor x, y in loader:\n    x = x.to(xm.xla_device(), non_blocking=True)\n"
        "    model(x).sum().backward()\n",
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n" + _LOOP,
            fixed="import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, batch_size=8, pin_memory=torch.cuda.is_available())\n" + _LOOP,
            line=3,
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader as DL\nloader = DL(\n    ds,\n    batch_size=8,\n)\n"
            + _LOOP,
            fixed="import torch\nfrom torch.utils.data import DataLoader as DL\nloader = DL(\n    ds,\n    batch_size=8,\n"
            "    pin_memory=torch.cuda.is_available(),\n)\n" + _LOOP,
            line=3,
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=False)\n"
            + _LOOP,
            fixed="import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, pin_memory=torch.cuda.is_available())\n" + _LOOP,
            line=3,
        ),
        # an evaluation pass with blocking copies, loaded by workers
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=4)\n"
            "with torch.no_grad():\n    for x, y in loader:\n        out = model(x.cuda())\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, num_workers=4, pin_memory=torch.cuda.is_available())\nwith torch.no_grad():\n"
            "    for x, y in loader:\n        out = model(x.cuda())\n",
            line=3,
        ),
        # blocking copies of batches loaded in the main process: pinning alone gains nothing,
        # reported with that advice and no fix
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\nwith torch.no_grad():\n"
            "    for x, y in loader:\n        out = model(x.cuda())\n",
            line=3,
        ),
        # no `import torch`: reported, no fix
        Invalid(
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n" + _LOOP,
            line=2,
        ),
    )

    @classmethod
    def may_report(cls, text: str, project: FileView) -> bool:
        """Only a DataLoader call is reported: its file says "loader" or names
        a project class (or re-export) that builds one."""
        return could_call_loader(text, project)

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if a.places.xla:
            return  # TPU/XLA: pinned host memory is CUDA advice
        for call in a.loaders.calls():
            if call.has_star_kwargs or any(arg.star for arg in call.node.args):
                continue
            if len(call.positional) > PIN_MEMORY_POSITION:
                continue
            kw = call.keyword("pin_memory")
            if kw is not None and not (isinstance(kw.value, cst.Name) and kw.value.value == "False"):
                continue
            if a.roles.excluded(call.site) or not a.loaders.may_feed_accelerator(call):
                continue
            info = a.loaders.info(call)
            if not info.used or info.dataset == PLACES:
                continue  # unused, or items already on the device (pinning them would fail)
            if info.batches in (BatchUse.KEPT, BatchUse.SAMPLED) or info.peeked:
                continue  # never copied to the device here, or one batch drawn once: nothing to pin for
            if info.batches is not BatchUse.ELSEWHERE or a.loaders.loops_over(call):
                if not info.copied_as_loaded:
                    continue  # the copies are of tensors made on the host first (sliced, converted): pinning buys nothing
            if info.collate not in (NO_COLLATE, CPU_COLLATE, NESTED_COLLATE):
                continue  # a collate_fn whose output device we cannot see, or that places batches
            # Pinning needs host tensors: no fix where a TensorDataset's tensors may be on the device.
            # It pays off where the pinning runs beside the step (worker processes: the loader's pin
            # thread) or the copies are asynchronous (`non_blocking=True`); in the main process before
            # a blocking copy it is one more copy: reported, with that advice and no fix.
            if not (info.non_blocking or a.loaders.workers(call) is not Workers.NONE):
                ctx.report(call.node, self.MESSAGE + _NO_BENEFIT_YET)
                continue
            ctx.report(call.node, replacements=self._fix(ctx, call) if info.host_items else None)

    @staticmethod
    def _fix(ctx: RuleContext, call: Call) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """`pin_memory=torch.cuda.is_available()`: pinned where a GPU exists,
        and no warning on a machine without one."""
        found = module_at(ctx, "torch", call.site, add_missing=False)
        if found is None:
            return None
        torch, imports = found
        value = cst.parse_expression(f"{torch}.cuda.is_available()")
        return {**imports, call.node: with_keyword(call.node, "pin_memory", value, comment_follows(ctx, call.node))}
