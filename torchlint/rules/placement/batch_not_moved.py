"""TL103 batch-not-moved."""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import Loop
from torchlint.analysis.placement import USE_ARG, USE_MOVE, placement
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext


class BatchNotMoved(Rule):
    """
    ## What it does
    In a loop over a `DataLoader` (also through `enumerate` / `tqdm`), flags
    batch variables (tuple elements, a dict batch passed as `model(**batch)`,
    `batch[i]`) that reach a model or a loss without being moved to the
    device first, in a file that uses a device. One finding per loop, at the
    first such use, naming every unmoved variable.

    Batches that go through a helper (`batch = to_device(batch)`), loaders
    prepared by `accelerator.prepare` / Lightning / Fabric, project-local
    loader classes and datasets that already live on the device are not
    flagged.

    ## Why is this bad?
    A `DataLoader` yields CPU tensors. Fed to a model on the GPU they fail
    with a device mismatch; fed to a model left on the CPU to match, they keep
    the whole training loop off the GPU.

    ## Example
    ```python
    for inputs, targets in loader:
        loss = criterion(model(inputs), targets)
    ```

    ## Use instead
    ```python
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        loss = criterion(model(inputs), targets)
    ```

    ## Fix safety
    Safe, offered where a device variable is in scope: one statement moving
    every unmoved batch variable is inserted as the loop body's first
    statement (`x, y = x.to(device), y.to(device)`, or
    `batch = {k: v.to(device) for k, v in batch.items()}` for a dict batch).
    No fix is offered for batches indexed by position or unpacked later.

    ## References
    - [PyTorch: data loading and `pin_memory`](https://pytorch.org/docs/stable/data.html#memory-pinning)
    """

    CODE = "TL103"
    NAME = "batch-not-moved"
    MESSAGE = "Batch {names} from the loader reach{s} the model without being moved to the device"
    FIX_TITLE = "Move the batch to the device at the top of the loop"
    APPLICABILITY = Applicability.SAFE
    REQUIRES_DEVICE = True

    _PRE = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "device = torch.device('cuda')\nmodel = torch.nn.Linear(4, 2).to(device)\nloader = DataLoader(ds)\n"
    )
    VALID = (
        _PRE + "for x, y in loader:\n    x, y = x.to(device), y.to(device)\n    loss = crit(model(x), y)\n",
        _PRE + "for x, y in loader:\n    loss = crit(model(x.to(device)), y.to(device))\n",
        # a helper moves it
        _PRE + "for batch in loader:\n    batch = to_device(batch, device)\n    out = model(**batch)\n",
        _PRE + "for batch in loader:\n    move(batch)\n    out = model(batch[0])\n",
        # a comprehension moves a dict batch
        _PRE + "for batch in loader:\n    batch = {k: v.to(device) for k, v in batch.items()}\n    out = model(**batch)\n",
        # a project-local DataLoader class
        "import torch\nclass DataLoader:\n    pass\ndevice = 'cuda'\nmodel = torch.nn.Linear(4, 2).to(device)\n"
        "loader = DataLoader()\nfor x, y in loader:\n    out = model(x)\n",
        # accelerate prepares loaders
        "import torch\nfrom accelerate import Accelerator\nacc = Accelerator()\nmodel = torch.nn.Linear(4, 2)\n"
        "model, loader = acc.prepare(model, loader)\nfor x, y in loader:\n    out = model(x.to('cuda'))\n",
        # dataset already on the device
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndevice = 'cuda'\n"
        "model = torch.nn.Linear(4, 2).to(device)\nds = TensorDataset(a.to(device), b.to(device))\n"
        "loader = DataLoader(ds)\nfor x, y in loader:\n    out = model(x)\n",
        # a wrapper that places batches
        _PRE + "loader = DeviceDataLoader(loader, device)\nfor x, y in loader:\n    out = model(x)\n",
        # no model use at all
        _PRE + "for x, y in loader:\n    print(x.shape)\n",
    )
    INVALID = (
        Invalid(
            _PRE + "for inputs, targets in loader:\n    out = model(inputs)\n    loss = crit(out, targets)\n",
            fixed=_PRE + "for inputs, targets in loader:\n    inputs, targets = inputs.to(device), targets.to(device)\n"
            "    out = model(inputs)\n    loss = crit(out, targets)\n",
            line=7,
        ),
        Invalid(
            _PRE + "for step, batch in enumerate(loader):\n    out = model(**batch)\n",
            fixed=_PRE + "for step, batch in enumerate(loader):\n"
            "    batch = {k: v.to(device) for k, v in batch.items()}\n    out = model(**batch)\n",
            line=7,
        ),
        Invalid(
            _PRE + "for i, (x, y) in enumerate(tqdm(loader)):\n    x = x.to(device)\n"
            "    loss = torch.nn.functional.mse_loss(model(x), y)\n",
            fixed=_PRE + "for i, (x, y) in enumerate(tqdm(loader)):\n    y = y.to(device)\n    x = x.to(device)\n"
            "    loss = torch.nn.functional.mse_loss(model(x), y)\n",
            line=8,
        ),
        # positional batch: reported, no fix
        Invalid(
            _PRE + "for batch in loader:\n    out = model(batch[0])\n",
            fixed=None,
            line=7,
        ),
        # a model parameter in a training function
        Invalid(
            "import torch\ndef train(model, train_loader, device):\n    model.to(device)\n    for x, y in train_loader:\n"
            "        loss = model(x).sum()\n        loss.backward()\n",
            fixed="import torch\ndef train(model, train_loader, device):\n    model.to(device)\n    for x, y in train_loader:\n"
            "        x = x.to(device)\n        loss = model(x).sum()\n        loss.backward()\n",
            line=5,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        pl = placement(ctx)
        if pl.silenced:
            return
        for loop in ctx.facts.loops:
            node = loop.node
            if not isinstance(node, cst.For):
                continue
            site = ctx.facts.site_of_statement(node)
            if site is None or not ctx.sem.is_loader_expr(node.iter, site):
                continue
            base, _ = pl.unwrap_iter(node.iter)
            if base is None or not pl.trusted_loader(base, site):
                continue
            names = pl.loop_batch_vars(loop)
            if names and pl.device_near(site):
                self._check_loop(ctx, pl, loop, [n for n, _ in names])

    def _check_loop(self, ctx: RuleContext, pl, loop: Loop, direct: List[str]) -> None:
        scope = loop.scope
        # Derived names: `x, y = batch`, `x = batch[0]` inside the loop.
        root: Dict[str, str] = {n: n for n in direct}
        moved: Set[str] = set()
        for b in pl.loop_bindings(loop.node):
            if b.site.scope is not scope:
                continue
            if b.kind == "for" and b.site.loop is loop:
                continue
            src = _source_name(b.value)
            if src in root and b.name not in root and b.kind in ("assign", "annassign"):
                root[b.name] = root[src]
                continue
            # Any other rebinding of a batch name: moved, or something we can't follow.
            if b.name in root:
                moved.add(b.name)
        if not (set(root) - moved):
            return
        calls = [c for c in pl.loop_calls(loop.node) if c.site.scope is scope]
        forwards = []
        has_device = None
        for c in calls:
            if not pl.is_forward(c):
                continue
            state = pl.model_state(pl.model_expr(c), c.site)
            if state == "unknown" and pl.sem.expr_kind(pl.model_expr(c), c.site) != "module":
                # A name that only reads like a model: only with a device at hand.
                if has_device is None:
                    site = ctx.facts.site_of_statement(loop.node)
                    has_device = site is not None and pl.device_var(site) is not None
                if not has_device:
                    continue
            if state not in ("unplaced", "wrapped"):
                forwards.append(c)
        if not forwards:
            return
        # Moves of, and helpers handed, batch names.
        for use in pl.loop_uses(loop.node):
            name = use.node.value
            if name not in root or use.site.scope is not scope:
                continue
            kind, call = pl.use_kind(use)
            if kind == USE_MOVE:
                moved.add(name)
            elif kind == USE_ARG and call is not None and not pl.is_forward(call) and not pl.is_loss_call(call) \
                    and not (call.qualname or "").startswith("torch."):
                moved.add(name)
        # A moved root moves what is derived from it afterwards and vice versa: stay silent then.
        for name in list(root):
            if root[name] in moved:
                moved.add(name)
        name_order = {id(u.node): u.site.order for u in pl.loop_uses(loop.node)}
        dict_like: Set[str] = set()
        positional: Set[str] = set()
        uses: List[Tuple[int, str, cst.CSTNode]] = []
        for call in calls:
            is_fwd = call in forwards
            if not is_fwd and not pl.is_loss_call(call):
                continue
            for arg in call.node.args:
                name, how = _batch_ref(arg)
                if name is None or name not in root or name in moved:
                    continue
                if how == "dict":
                    dict_like.add(name)
                elif how == "index":
                    positional.add(name)
                ref = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
                uses.append((name_order.get(id(ref), call.site.order), name, arg.value))
        if not uses:
            return
        uses.sort(key=lambda u: u[0])  # source order of the names
        unmoved: List[str] = []
        for _, name, _ in uses:
            if name not in unmoved:
                unmoved.append(name)
        shown = ", ".join(f"`{n}`" for n in unmoved)
        message = self.MESSAGE.format(names=shown, s="es" if len(unmoved) == 1 else "")
        ctx.report(uses[0][2], message, replacements=self._fix(pl, loop, unmoved, direct, dict_like, positional))

    @staticmethod
    def _fix(pl, loop: Loop, unmoved: List[str], direct: List[str], dict_like: Set[str], positional: Set[str]):
        node = loop.node
        if not isinstance(node.body, cst.IndentedBlock):
            return None
        if any(n not in direct or n in positional for n in unmoved):
            return None
        site = pl.facts.site_of_statement(node)
        device = pl.device_var(site) if site is not None else None
        if device is None:
            return None
        lines = []
        tensors = [n for n in unmoved if n not in dict_like]
        if tensors:
            lhs = ", ".join(tensors)
            rhs = ", ".join(f"{n}.to({device})" for n in tensors)
            lines.append(f"{lhs} = {rhs}\n")
        for n in unmoved:
            if n in dict_like:
                lines.append(f"{n} = {{k: v.to({device}) for k, v in {n}.items()}}\n")
        stmts = [cst.parse_statement(line) for line in lines]
        body = node.body
        return {body: body.with_changes(body=stmts + list(body.body))}


def _source_name(value: Optional[cst.BaseExpression]) -> Optional[str]:
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name):
        return value.value.value
    return None


def _batch_ref(arg: cst.Arg) -> Tuple[Optional[str], str]:
    """(name, how) for an argument that is a batch name itself: `x`, `**batch`, `batch[0]`."""
    value = arg.value
    if isinstance(value, cst.Name):
        if arg.star == "**":
            return value.value, "dict"
        if arg.star:
            return None, ""
        return value.value, "plain"
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and not arg.star:
        sl = value.slice
        key = sl[0].slice if len(sl) == 1 and isinstance(sl[0].slice, cst.Index) else None
        if key is not None and isinstance(key.value, cst.SimpleString):
            return value.value.value, "dict"
        return value.value.value, "index"
    return None, ""
