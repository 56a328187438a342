"""TL106 move-in-loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Set

import libcst as cst

from torchlint.analysis.facts import Call, Loop
from torchlint.analysis.knowledge import CUDA_OR_HOST_MOVES, TENSOR_DEVICE_MOVES
from torchlint.analysis.place_kinds import ACCEL, CPU
from torchlint.analysis.value_kinds import MODULE
from torchlint.analysis.walk import descendants
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_MOVES = TENSOR_DEVICE_MOVES  # to, cuda
_OTHER_MOVES = CUDA_OR_HOST_MOVES  # to, cuda, cpu, to_empty


class MoveInLoop(Rule):
    """
    ## What it does
    Flags, inside the per-step loop (every batch of a loop that trains or runs
    inference over data):

    - a module's `.to(...)`/`.cuda()`, when the module is the same object in
      every iteration;
    - a move of a CPU tensor that does not change between iterations (bound
      before the loop, never bound, changed in place or handed to other code
      in it), to a device that does not change either.

    Not flagged: moves under an `if` in the loop (they may run once), loops
    that also move the same value back (`teacher.cpu()`: offloading on
    purpose), batches and other values bound in the loop, tensors whose place
    is not known to be the host, tests and benchmarks.

    ## Why is this bad?
    Moving a module that is already on the device still walks every parameter
    and buffer each step; moving a constant tensor copies the same bytes
    from the host to the device every step (a blocking copy from pageable
    memory). The work is the same each time: do it once, before the loop.

    ## Example
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    class_weights = torch.tensor([0.3, 0.7])
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y, weight=class_weights.to(device))
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
    class_weights = torch.tensor([0.3, 0.7])
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    class_weights_on_device = class_weights.to(device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y, weight=class_weights_on_device)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Unsafe: the fix hoists the move before the loop. For a tensor it binds
    the moved copy to a new name (`<name>_on_device`) before the loop and
    uses it where the move was, so other readers of the tensor still see the
    CPU one; for a module it moves the statement (`model.to(device)`) before
    the loop. It is offered only when the moved value and the device are
    bound before the loop and not bound in it, and (for a module) the move is
    a statement of its own in a block that keeps another statement. It is
    unsafe because code the loop calls may still change the value in ways we
    cannot see.

    ## References
    - [PyTorch performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    - [torch.nn.Module.to](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.to)
    """

    CODE = "TL106"
    NAME = "move-in-loop"
    MESSAGE = (
        "`{call}` runs every step on a value that does not change between iterations; move it once, before the loop"
    )
    TITLE = "A module or a loop-invariant tensor is moved to the device every step of the loop"
    FIX_TITLE = "Move it once, before the loop"
    APPLICABILITY = Applicability.UNSAFE
    REQUIRES_DEVICE = True

    _HEAD = (
        "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(2, 2).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nw = torch.ones(2)\n"
    )
    _STEP = "    loss = crit(model(x.to(device)), y.to(device))\n    loss.backward()\n    opt.step()\n"
    VALID = (
        # the batch changes every iteration
        _HEAD + "for x, y in loader:\n" + _STEP,
        # moved once, before the loop
        _HEAD + "wd = w.to(device)\nfor x, y in loader:\n" + _STEP + "    print(wd)\n",
        # bound again in the loop
        _HEAD + "for x, y in loader:\n    w = torch.rand(2)\n    wd = w.to(device)\n" + _STEP,
        # changed in place in the loop
        _HEAD + "for x, y in loader:\n    w.mul_(0.9)\n    wd = w.to(device)\n" + _STEP,
        # offloading on purpose: moved back every step
        _HEAD + "for x, y in loader:\n    model.to(device)\n" + _STEP + "    model.cpu()\n",
        # under an `if`: may run once
        _HEAD
        + "moved = False\nfor x, y in loader:\n    if not moved:\n        model.to(device)\n        moved = True\n"
        + _STEP,
        # once per epoch, not per step
        _HEAD
        + "for epoch in range(3):\n    model.to(device)\n    for x, y in loader:\n"
        + _STEP.replace("    ", "        "),
        # a tensor already on the device: `.to()` returns it
        _HEAD + "m = torch.ones(2, device=device)\nfor x, y in loader:\n    md = m.to(device)\n" + _STEP,
    )
    INVALID = (
        Invalid(
            _HEAD + "for x, y in loader:\n    wd = w.to(device)\n" + _STEP,
            fixed=_HEAD + "w_on_device = w.to(device)\nfor x, y in loader:\n    wd = w_on_device\n" + _STEP,
            line=8,
            unsafe=True,
        ),
        Invalid(
            _HEAD + "def train():\n    for x, y in loader:\n        model.cuda()\n"
            "        loss = crit(model(x.cuda()), y.cuda())\n        loss.backward()\n        opt.step()\n",
            fixed=_HEAD + "def train():\n    model.cuda()\n    for x, y in loader:\n"
            "        loss = crit(model(x.cuda()), y.cuda())\n        loss.backward()\n        opt.step()\n",
            line=9,
            unsafe=True,
        ),
        # the device may change in the loop... no: the receiver is invariant but the move is the only statement
        Invalid(
            _HEAD + "for x, y in loader:\n    model.train()\n    model.to(device)\n" + _STEP,
            fixed=_HEAD + "model.to(device)\nfor x, y in loader:\n    model.train()\n" + _STEP,
            line=9,
            unsafe=True,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if not a.places.accelerator_in_play():
            return
        for call in ctx.facts.calls:
            if call.method not in _MOVES or not isinstance(call.receiver, cst.Name):
                continue
            if call.method == "to" and not call.node.args:
                continue
            site = call.site
            loop = a.loops.step_loop(site)
            if loop is None or a.loops.role(loop) is None or a.roles.excluded(site):
                continue
            if a.loops.branches_in(site, loop):
                continue  # may run once, or now and then
            name = call.receiver.value
            module = a.values.expr_kind(call.receiver, site) == MODULE
            # A module's other methods may be called anywhere; a tensor read by another function may change.
            if not a.loops.invariant(name, loop, read_elsewhere=module) or not self._args_invariant(a, call, loop):
                continue
            if self._moved_otherwise(a, call, loop, name):
                continue
            if module:
                fix = self._hoist_statement(ctx, call, loop)
            elif a.places.tensor_place(call.receiver, site) == CPU and a.places.move_device(call) == ACCEL:
                fix = self._hoist_value(ctx, call, loop, name)
            else:
                continue
            ctx.report(call.node, self.MESSAGE.format(call=ctx.code(call.node)), replacements=fix)

    @staticmethod
    def _args_invariant(a: Analysis, call: Call, loop: Loop) -> bool:
        """Every name the move's arguments read is bound before the loop, not in it."""
        names: Set[str] = set()
        for arg in call.node.args:
            if isinstance(arg.value, cst.Name):
                names.add(arg.value.value)
            for node in descendants(arg.value):
                if isinstance(node, cst.Name):
                    names.add(node.value)
        scope = loop.scope
        return all(
            not any(b.site.scope is scope and loop.contains(b.site.order) for b in a.facts.visible_bindings(n, scope))
            for n in names
        )

    @staticmethod
    def _moved_otherwise(a: Analysis, call: Call, loop: Loop, name: str) -> bool:
        """Another read of `name` in the loop that is not this kind of move:
        moved back (`.cpu()`), changed in place, handed to other code."""
        for use in a.facts.scoped_uses(name, loop.scope):
            if not loop.contains(use.site.order) or use.node is call.receiver:
                continue
            parent = a.facts.parent_of(use.node)
            if isinstance(parent, cst.Attribute) and parent.value is use.node:
                other = a.facts.parent_of(parent)
                if isinstance(other, cst.Call) and other.func is parent:
                    method = parent.attr.value
                    if method in _OTHER_MOVES or method.endswith("_"):
                        return True
                    if a.values.expr_kind(use.node, use.site) == MODULE:
                        continue  # `model.train()`, `model.parameters()`: a module's methods
                    return True
                continue
            if a.values.expr_kind(use.node, use.site) == MODULE:
                continue  # `model(x)`: a forward
            return True
        return False

    @staticmethod
    def _hoist_statement(ctx: RuleContext, call: Call, loop: Loop) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """`model.to(device)` as a statement of its own: moved before the loop."""
        expr = ctx.facts.parent_of(call.node)
        line = ctx.facts.parent_of(expr) if isinstance(expr, cst.Expr) else None
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        block = ctx.facts.parent_of(line)
        if not isinstance(block, cst.IndentedBlock) or len(block.body) < 2:
            return None
        if not _in_block(ctx, loop.node):
            return None
        new_loop = loop.node.deep_remove(line)
        if isinstance(new_loop, cst.RemovalSentinel):
            return None  # (never: `line` is in the loop's body, not the loop)
        moved = line.with_changes(leading_lines=[])
        return {loop.node: cst.FlattenSentinel([moved, new_loop])}

    @staticmethod
    def _hoist_value(ctx: RuleContext, call: Call, loop: Loop, name: str) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """`w.to(device)` in the loop: `w_on_device = w.to(device)` before it, read in its place."""
        scopes = (loop.scope, ctx.facts.module_scope)
        if not _in_block(ctx, loop.node) or any(b.site.scope not in scopes for b in ctx.facts.bindings_of(name)):
            return None
        new = f"{name}_on_device"
        if ctx.facts.bindings_of(new) or ctx.facts.uses_of(new):
            return None
        assign = cst.SimpleStatementLine([cst.Assign(targets=[cst.AssignTarget(cst.Name(new))], value=call.node)])
        new_loop = loop.node.deep_replace(call.node, cst.Name(new))
        return {loop.node: cst.FlattenSentinel([assign, new_loop])}


def _in_block(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """`node` is a statement of a module or an indented block (a place to insert before it)."""
    return isinstance(ctx.facts.parent_of(node), (cst.Module, cst.IndentedBlock))
