"""TL103 batch-not-moved."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Loop, Scope, Site, dotted_name, strip_methods
from torchlint.analysis.helpers import root_name
from torchlint.analysis.knowledge import SAME_PLACE_TENSOR_METHODS
from torchlint.analysis.place_kinds import CPU, DEVICE
from torchlint.analysis.walk import descendants
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import module_at

if TYPE_CHECKING:
    from torchlint.analysis import Analysis


class BatchNotMoved(Rule):
    """
    ## What it does
    In a loop over a `DataLoader` (also through `enumerate` / `tqdm`), or
    after `x, y = next(iter(loader))`, flags batch variables (tuple elements,
    a dict batch passed as `model(**batch)`, `batch[i]`, names unpacked from
    a batch) that are still on the CPU where they meet a model that is on the
    device at that point, or a tensor on the device in a loss, a torch op or
    arithmetic (`abs(pred - target)`). One finding per loop, at the first
    such use, naming every unmoved variable. Names bound to a view of a batch
    part (`gold = batch["labels"]`, `shifted = gold[:, 1:].contiguous()`) are
    that batch, where it is.

    A batch built in each iteration of a loop by a tokenizer call
    (`enc = tokenizer(texts[i:j], return_tensors="pt")`) is a batch too: it is
    on the CPU just as a loader's batch is. When the model gets a moved copy
    (`model(**{k: v.to(device) for k, v in enc.items()})`) and a part of the
    original (`enc["input_ids"]`, or a view of it) then meets the model's
    output in a loss, a torch op or arithmetic, that is reported. A model
    input left unmoved is TL102's finding (the root cause), so this widening
    reports nothing where the model gets the tokenizer output unmoved. (This
    widens TL103 beyond a loader's loop on purpose: the fact is the same, a
    CPU batch in every iteration, and no other rule reports it.)

    Not flagged: batches cast to a CUDA tensor type (`labels.type(LongTensor)`
    with `LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor`,
    the legacy idiom: a copy to the GPU where one is used), batches moved by
    a same-file helper they are handed to (its
    body is read: `calc_loss(batch, model, device)` that moves its argument),
    or handed to code we cannot see (`to_device(batch)`), loaders with a
    custom `collate_fn` or a dataset that places its items, loaders prepared
    by `accelerator.prepare` / Lightning / Fabric, and models that are not on
    the device at that point (a CPU check before the move, an RPC proxy);
    nor test code (test files, test classes and their helpers).

    ## Why is this bad?
    A `DataLoader` yields CPU tensors. Fed to a model on the GPU (or combined
    with its output) they fail with "Expected all tensors to be on the same
    device".

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
    loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)

    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
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
    loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)

    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Safe, offered where a device variable is in scope: one statement moving
    every unmoved batch variable is inserted as the loop body's first
    statement (or right after `next(...)`): `x, y = x.to(device), y.to(device)`,
    or for a dict batch
    `batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}`
    (non-tensor values such as lists of strings stay as they are; this form
    needs `torch` imported as a module). No fix is offered for batches
    reached through `batch[i]` or unpacked later, or when a moved variable is
    later handed to NumPy (`.numpy()` needs host memory) or read with
    `.item()`/`.tolist()` (on the device each read would become a host-device
    sync in the loop: the message still names the mismatch).

    ## References
    - [PyTorch: data loading and `pin_memory`](https://pytorch.org/docs/stable/data.html#memory-pinning)
    """

    CODE = "TL103"
    NAME = "batch-not-moved"
    MESSAGE = "Batch {names} from the loader reach{s} the model (or a tensor) on the device without being moved"
    BUILT_MESSAGE = (
        "Batch {names} built in the loop by a tokenizer call reach{s} a tensor on the device without being moved"
    )
    TITLE = "A batch from the loader reaches the model (or a tensor) on the device without being moved"
    FIX_TITLE = "Move the batch to the device at the top of the loop"
    APPLICABILITY = Applicability.SAFE
    QUIET_IN_TESTS = True
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
        # a same-file helper, read: its first line moves the batch
        _PRE + "def calc_loss(x, y, model, device):\n    x, y = x.to(device), y.to(device)\n"
        "    return crit(model(x), y)\nfor x, y in loader:\n    loss = calc_loss(x, y, model, device)\n",
        # a comprehension moves a dict batch
        _PRE
        + "for batch in loader:\n    batch = {k: v.to(device) for k, v in batch.items()}\n    out = model(**batch)\n",
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
        # a collate_fn we cannot see into
        "import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\n"
        "model = torch.nn.Linear(4, 2).to(device)\nloader = DataLoader(ds, collate_fn=collate)\n"
        "for x, y in loader:\n    out = model(x)\n",
        # the model is not on the device at that point (moved after the loop)
        "import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\nmodel = torch.nn.Linear(4, 2)\n"
        "for x, y in DataLoader(ds):\n    print(model(x).shape)\n    break\nmodel.to(device)\n",
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
            "    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}\n"
            "    out = model(**batch)\n",
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
        # a model parameter moved in the training function
        Invalid(
            "import torch\ndef train(model, train_loader, device):\n    model.to(device)\n    for x, y in train_loader:\n"
            "        loss = model(x).sum()\n        loss.backward()\n",
            fixed="import torch\ndef train(model, train_loader, device):\n    model.to(device)\n    for x, y in train_loader:\n"
            "        x = x.to(device)\n        loss = model(x).sum()\n        loss.backward()\n",
            line=5,
        ),
        # a target combined with the model's output in arithmetic
        Invalid(
            _PRE + "for img, gt in loader:\n    pred = model(img.to(device))\n    err = abs(pred.sum() - gt)\n",
            fixed=_PRE + "for img, gt in loader:\n    gt = gt.to(device)\n    pred = model(img.to(device))\n"
            "    err = abs(pred.sum() - gt)\n",
            line=8,
        ),
        # a target reshaped for the loss: it is still the batch, on the CPU
        Invalid(
            _PRE + "for x, y in loader:\n    out = model(x.to(device))\n    loss = crit(out.flatten(), y.flatten())\n",
            fixed=_PRE + "for x, y in loader:\n    y = y.to(device)\n    out = model(x.to(device))\n"
            "    loss = crit(out.flatten(), y.flatten())\n",
            line=8,
        ),
        # a batch drawn with next(iter(...))
        Invalid(
            _PRE + "x, y = next(iter(loader))\nout = model(x)\n",
            fixed=_PRE + "x, y = next(iter(loader))\nx = x.to(device)\nout = model(x)\n",
            line=7,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if a.places.silenced:
            return
        for loop in ctx.facts.loops:
            node = loop.node
            if not isinstance(node, cst.For):
                continue
            site = ctx.facts.site_of_statement(node)
            if site is None or not a.places.batch_source(node.iter, site):
                continue
            targets = _loop_targets(a, node)
            if targets and not self._check_region(ctx, targets, site.scope, loop.order, loop.end_order, loop=loop):
                self._check_split(ctx, targets, loop)
        # A batch built in each iteration by a tokenizer call (`return_tensors="pt"`).
        for loop in ctx.facts.loops:
            built = _built_batches(a, loop)
            if built:
                start = min(b.site.order for b in built)
                names = list(dict.fromkeys(b.name for b in built))
                self._check_region(ctx, names, built[0].site.scope, start, loop.end_order, built=True)
        # `x, y = next(iter(loader))`
        for b in ctx.facts.bindings:
            if b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and a.places.next_batch(b.value, b.site):
                names = [
                    x.name
                    for x in ctx.facts.bindings
                    if x.site.stmt is b.site.stmt and x.value is b.value and "." not in x.name
                ]
                end = _scope_end(ctx, b.site.scope)
                self._check_region(ctx, names, b.site.scope, b.site.order, end, anchor=b)

    def _check_region(
        self,
        ctx: RuleContext,
        targets: List[str],
        scope: Scope,
        start: int,
        end: int,
        loop: Optional[Loop] = None,
        anchor: Optional[Binding] = None,
        built: bool = False,
    ) -> bool:
        """Report the first use, between `start` and `end` in `scope`, of a batch
        name (or a name derived from one) that is still on the CPU where it meets
        a model on the device or a tensor on the device. A batch `built` in the
        loop by a tokenizer call: its model inputs are TL102's, so only its
        meetings with device tensors count, and only where every model call got
        it moved (otherwise TL102 reports the root cause)."""
        a = ctx.analysis
        roots = _derived_names(ctx, targets, scope, start, end)
        unmoved: List[str] = []
        first = None
        dict_like: Set[str] = set()
        derived: Set[str] = set()  # reached through `batch[0]` / `batch["x"]`: no fix
        for call in a.helpers.calls_in_scope(scope):
            if not (start < call.site.order <= end):
                continue
            if built and a.values.model_call(call) is not None:
                if any(
                    _batch_ref(arg)[0] in roots and a.places.tensor_place(arg.value, call.site) != DEVICE
                    for arg in call.node.args
                ):
                    return False  # the model gets it unmoved (or we can't tell): TL102's finding
                continue
            meets = self._meets_device(a, call)
            if not meets:
                continue
            for arg in call.node.args:
                name, how = _batch_ref(arg)
                if name is None or name not in roots:
                    continue
                if self._still_on_cpu(a, arg.value, call.site, name, start):
                    if name not in unmoved:
                        unmoved.append(name)
                    if how in (_Ref.DICT, _Ref.KEY):
                        dict_like.add(name)  # `model(**batch)`, `batch["input_ids"]`: move the dict
                    if how is _Ref.INDEX or name not in targets:
                        derived.add(name)
                    if first is None or call.site.order < first[0]:
                        first = (call.site.order, arg.value)
        # `abs(pred - gt)`: arithmetic with a tensor on the device.
        for use in ctx.facts.uses_in(scope):
            if not (start < use.site.order <= end) or use.node.value not in roots:
                continue
            parent = use.site.parent
            if isinstance(parent, cst.BinaryOperation):
                other = parent.right if parent.left is use.node else parent.left
                if a.places.tensor_place(other, use.site) == DEVICE and self._still_on_cpu(
                    a, use.node, use.site, use.node.value, start
                ):
                    if use.node.value not in unmoved:
                        unmoved.append(use.node.value)
                    if use.node.value not in targets:
                        derived.add(use.node.value)
                    if first is None or use.site.order < first[0]:
                        first = (use.site.order, use.node)
        if first is None:
            return False
        order = {n: i for i, n in enumerate(targets)}
        unmoved.sort(key=lambda n: order.get(n, len(order)))
        shown = ", ".join(f"`{n}`" for n in unmoved)
        template = self.BUILT_MESSAGE if built else self.MESSAGE
        message = template.format(names=shown, s="es" if len(unmoved) == 1 else "")
        fix = (
            None
            if derived or built
            else self._fix(ctx, loop, anchor, unmoved, targets, dict_like, roots, start, end, scope)
        )
        ctx.report(first[1], message, replacements=fix)
        return True

    def _check_split(self, ctx: RuleContext, targets: List[str], loop: Loop) -> None:
        """`if a: x = x.cuda()` / `elif b: y = y.cuda()`: on the branch that moves only
        `x`, `y` stays on the CPU; report where `y` then meets `x` (or what the
        iteration computed from it) in a model, loss or torch call."""
        a = ctx.analysis
        for split in a.places.split_moves(targets, loop):
            head_site = ctx.facts.site_of_statement(split.head)
            if head_site is None:
                continue
            chain = {id(n) for n in descendants(split.head) if isinstance(n, cst.If)} | {id(split.head)}
            derived = {split.moved}
            for b in ctx.facts.bindings_in(head_site.scope):
                if b.site.order > head_site.order and loop.contains(b.site.order) and b.value is not None:
                    if any(isinstance(n, cst.Name) and n.value in derived for n in descendants(b.value)):
                        derived.add(b.name)
            for call in a.helpers.calls_in_scope(head_site.scope):
                if call.site.order <= head_site.order or not loop.contains(call.site.order):
                    continue
                if any(id(owner) in chain for owner, _ in call.site.region):
                    continue
                if not (
                    a.values.model_call(call) is not None
                    or a.values.is_loss_call(call)
                    or (call.qualname or "").startswith("torch.")
                ):
                    continue
                left = [arg for arg in call.node.args if _batch_ref(arg) == (split.unmoved, _Ref.PLAIN)]
                if not left or not any(
                    arg not in left
                    and any(isinstance(n, cst.Name) and n.value in derived for n in descendants(arg.value))
                    for arg in call.node.args
                ):
                    continue
                if _handed_on(a, split.unmoved, head_site, call.site):
                    break
                where = f"`if {ctx.code(split.test)}`" if split.test is not None else "the final `else`"
                ctx.report(
                    left[0].value,
                    f"Batch tensor `{split.unmoved}` stays on the CPU on the branch {where}, which moves only "
                    f"`{split.moved}` to the device: there it meets device values here (device mismatch)",
                )
                return

    @staticmethod
    def _meets_device(a: Analysis, call: Call) -> bool:
        """The call runs a model that is on the device, or mixes its tensor
        arguments with one that is (a loss, a torch op)."""
        mc = a.values.model_call(call)
        if mc is not None:
            return a.places.model_place(mc.model, call.site) == DEVICE
        if a.values.is_loss_call(call) or (call.qualname or "").startswith("torch."):
            return any(a.places.tensor_place(arg.value, call.site) == DEVICE for arg in call.node.args)
        return False

    @staticmethod
    def _still_on_cpu(a: Analysis, expr: cst.BaseExpression, site: Site, name: str, start: int) -> bool:
        if a.places.tensor_place(expr, site) != CPU:
            return False
        # `x.to(device)` as a statement (its result thrown away): TL105 reports that root cause.
        for call in a.helpers.calls_in_scope(site.scope):
            if (
                start < call.site.order < site.order
                and isinstance(call.site.stmt, cst.Expr)
                and call.site.stmt.value is call.node
                and dotted_name(call.receiver) == name
                and call.method in ("to", "cuda")
            ):
                return False
        # Handed to code we cannot see before this use (`to_device(batch)`, `move(x)`): it may be placed.
        for use in a.facts.scoped_uses(name, site.scope):
            if not (start < use.site.order < site.order):
                continue
            parent = use.site.parent
            if isinstance(parent, cst.Arg):
                callee = a.facts.call_of_arg(parent)
                if callee is None:
                    continue
                if (
                    a.values.model_call(callee) is not None
                    or a.values.is_loss_call(callee)
                    or (callee.qualname or "").startswith("torch.")
                ):
                    continue
                fn = a.helpers.function(callee)
                if fn is not None and not a.helpers.summary(fn).moves:
                    continue
                if isinstance(callee.node.func, cst.Name) and callee.node.func.value in ("print", "len", "isinstance"):
                    continue
                return False
        return True

    @staticmethod
    def _fix(
        ctx: RuleContext,
        loop: Optional[Loop],
        anchor: Optional[Binding],
        unmoved: List[str],
        targets: List[str],
        dict_like: Set[str],
        roots: Dict[str, str],
        start: int,
        end: int,
        scope: Scope,
    ) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """Move every unmoved batch name where the batch arrives: the loop body's
        first statement, or the statement after `next(...)`."""
        a = ctx.analysis
        if any(n not in targets for n in unmoved):
            return None  # derived names (`batch[0]`, `x = batch["x"]`): no fix
        anchor_site = anchor.site if anchor is not None else None
        site = ctx.facts.site_of_statement(loop.node) if loop is not None else anchor_site
        device = a.places.device_var(site) if site is not None else None
        if device is None:
            return None
        # A later `.numpy()` (or numpy call) on a moved name would fail on the device;
        # a later `.item()`/`.tolist()` would become a host-device sync in the loop.
        for call in a.helpers.calls_in_scope(scope):
            if start < call.site.order <= end:
                if call.method in ("numpy", "item", "tolist") and root_name(call.receiver) in unmoved:
                    return None
                if (call.qualname or "").split(".")[0] in ("numpy", "np") and any(
                    root_name(x.value) in unmoved for x in call.node.args
                ):
                    return None
        lines = []
        tensors = [n for n in unmoved if n not in dict_like]
        if tensors:
            lines.append(f"{', '.join(tensors)} = {', '.join(f'{n}.to({device})' for n in tensors)}\n")
        imports: Dict[cst.CSTNode, Replacement] = {}
        torch = None
        if any(n in dict_like for n in unmoved):
            found = module_at(ctx, "torch", site, add_missing=False) if site is not None else None
            if found is None:
                return None
            torch, imports = found
        for n in unmoved:
            if n in dict_like:
                lines.append(
                    f"{n} = {{k: v.to({device}) if isinstance(v, {torch}.Tensor) else v for k, v in {n}.items()}}\n"
                )
        stmts = [cst.parse_statement(line) for line in lines]
        if loop is not None:
            body = loop.node.body
            if not isinstance(body, cst.IndentedBlock):
                return None
            return {**imports, body: body.with_changes(body=[*stmts, *body.body])}
        line = _statement_line(ctx, anchor_site.stmt if anchor_site is not None else None)
        if line is None:
            return None
        return {**imports, line: cst.FlattenSentinel([line, *stmts])}


def _loop_targets(a: Analysis, node: cst.For) -> List[str]:
    """The names a `for` over a loader binds to batch contents (the enumerate index left out)."""
    expr: cst.BaseExpression = node.iter
    target: cst.BaseExpression = node.target
    while isinstance(expr, cst.Call):
        name = dotted_name(expr.func) or ""
        if name == "enumerate":
            if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
                return []
            target = target.elements[1].value
        if not expr.args:
            break
        expr = expr.args[0].value
    return [n for n, _ in _names_in(target)]


def _built_batches(a: Analysis, loop: Loop) -> List[Binding]:
    """Names bound in `loop`'s own body (not a nested loop's) to a tokenizer
    call's tensors (`return_tensors="pt"`): a batch built on the CPU in each
    iteration, as a loader's loop variable is."""
    out = []
    for b in a.facts.bindings_in(loop.scope):
        if (
            b.site.loop is loop
            and isinstance(b.value, cst.Call)
            and b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            and b.index is None
            and "." not in b.name
            and _tokenizer_creation(a, b.value)
        ):
            out.append(b)
    return out


def _tokenizer_creation(a: Analysis, value: cst.BaseExpression) -> bool:
    creation = a.places.cpu_creation(value)
    return creation is not None and a.values.is_tokenizer_call(creation)


def _names_in(target: cst.BaseExpression) -> List[Tuple[str, cst.Name]]:
    if isinstance(target, cst.Name):
        return [(target.value, target)]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[Tuple[str, cst.Name]] = []
        for el in target.elements:
            if isinstance(el, cst.StarredElement):
                return []
            sub = _names_in(el.value)
            if not sub:
                return []
            out.extend(sub)
        return out
    return []


def _derived_names(ctx: RuleContext, targets: List[str], scope: Scope, start: int, end: int) -> Dict[str, str]:
    """Batch names and the names unpacked or indexed from them in the region
    (`x, y = batch`, `x = batch["x"]`): name -> the batch name it comes from."""
    roots = {n: n for n in targets}
    for b in ctx.facts.bindings_in(scope):
        if not (start < b.site.order <= end) or b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN):
            continue
        src = _view_root(b.value) if b.value is not None else None
        if src is not None and src.value in roots and b.name not in roots and "." not in b.name:
            roots[b.name] = roots[src.value]
    return roots


def _view_root(expr: cst.BaseExpression) -> Optional[cst.Name]:
    """The name under a chain of indexing and same-place tensor methods
    (`labels[:, 1:].contiguous()`, `batch["y"].long()`): a view or copy of
    that name's tensor, where it is; None for anything else (a move, a call)."""
    while True:
        if isinstance(expr, cst.Name):
            return expr
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _SAME_PLACE_METHODS
        ):
            expr = expr.func.value
        else:
            return None


def _handed_on(a: Analysis, name: str, after: Site, before: Site) -> bool:
    """`name` is handed to code other than a model, loss or torch op between the two sites."""
    for use in a.facts.scoped_uses(name, before.scope):
        if not (after.order < use.site.order < before.order) or not isinstance(use.site.parent, cst.Arg):
            continue
        call = a.facts.call_of_arg(use.site.parent)
        if call is None or a.values.model_call(call) is not None or a.values.is_loss_call(call):
            continue
        if (call.qualname or "").startswith("torch.") or dotted_name(call.node.func) in ("print", "len"):
            continue
        return True
    return False


def _scope_end(ctx: RuleContext, scope: Scope) -> int:
    """An order past every node of `scope` (regions are also filtered by scope)."""
    return 1 << 62


def _statement_line(ctx: RuleContext, stmt: Optional[cst.CSTNode]) -> Optional[cst.SimpleStatementLine]:
    """The line holding the small statement `stmt`, when it holds only that."""
    site = ctx.facts.site_of_statement(stmt) if stmt is not None else None
    line = site.parent if site is not None else None
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return line
    return None


# Methods whose result stays where the tensor is (`type`/`type_as` may move it).
_SAME_PLACE_METHODS = SAME_PLACE_TENSOR_METHODS


class _Ref(enum.Enum):
    """How an argument refers to a batch name."""

    PLAIN = "plain"  # `x`, `y.long()`
    DICT = "dict"  # `**batch`
    KEY = "key"  # `batch["x"]`
    INDEX = "index"  # `batch[0]`


def _batch_ref(arg: cst.Arg) -> Tuple[Optional[str], Optional[_Ref]]:
    """(name, how) for an argument that is a batch name itself: `x`, `**batch`, `batch[0]`."""
    value = arg.value
    if isinstance(value, cst.Name):
        if arg.star == "**":
            return value.value, _Ref.DICT
        if arg.star:
            return None, None
        return value.value, _Ref.PLAIN
    if isinstance(value, cst.Call) and not arg.star:
        root = _view_root(value)
        if root is None:
            return None, None
        # `target.flatten()`, `y.long()`: still the batch, where it was; `labels[:, 1:].view(-1)`: a part of it.
        plain = isinstance(strip_methods(value, _SAME_PLACE_METHODS), cst.Name)
        return root.value, (_Ref.PLAIN if plain else _Ref.INDEX)
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and not arg.star:
        sl = value.slice
        key = sl[0].slice if len(sl) == 1 and isinstance(sl[0].slice, cst.Index) else None
        if key is not None and isinstance(key.value, cst.SimpleString):
            return value.value.value, _Ref.KEY
        return value.value.value, _Ref.INDEX
    return None, None
