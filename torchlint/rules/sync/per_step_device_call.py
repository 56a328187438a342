"""TL403 per-step-device-call."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.facts import Call, Loop
from torchlint.analysis.value_kinds import MODULE
from torchlint.analysis.vocabulary import CLOCKS
from torchlint.analysis.walk import descendants
from torchlint.rules.base import Invalid, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_EMPTY_CACHE = "torch.cuda.empty_cache"
_SYNCHRONIZE = "torch.cuda.synchronize"
_SAVE = "torch.save"
# Calls that time a region: a synchronize next to one is there to measure.
_TIMERS = frozenset({"elapsed_time", "record"})


class PerStepDeviceCall(Rule):
    """
    ## What it does
    Flags, on every iteration of the per-step loop (a loop that trains or runs
    inference over data, or a same-file helper it calls every iteration):

    - `torch.cuda.empty_cache()`;
    - `torch.cuda.synchronize()`, outside timing code (a loop or a function
      that reads a clock or CUDA events, a loop over what a logger's method
      yields and times, `metric_logger.log_every(loader, 10)`, a benchmark, a
      profile; a function that synchronizes and does not train is taken as
      timing code);
    - `torch.save(...)` of a model, a `state_dict()` or a dict holding one.

    Not flagged: calls under an `if` in the loop (a periodic guard such as
    `if step % 1000 == 0:`, a best-so-far check), once per epoch, tests and
    benchmarks, and `torch.save` of other values (predictions per batch).

    ## Why is this bad?
    `empty_cache()` hands the caching allocator's free blocks back to the
    driver, so the next step pays `cudaMalloc` again for the same memory, and
    synchronizes. `synchronize()` stops the host from queueing the next
    step's work until the GPU has drained. Saving a checkpoint copies every
    parameter to the host and writes it to disk: every step, that is most of
    the step's time. Each belongs every N steps, or once per epoch.

    ## Example
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()
        torch.save(model.state_dict(), "checkpoint.pt")
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 1000 == 0:
            torch.save(model.state_dict(), "checkpoint.pt")
    ```

    ## Fix safety
    No fix: how often to save (or whether to empty the cache at all) is the
    author's choice. The message says what to do: drop `empty_cache()` (or
    call it once, between phases), keep `synchronize()` for timing code, save
    every N steps or once per epoch.

    ## References
    - [CUDA semantics: memory management](https://pytorch.org/docs/stable/notes/cuda.html#memory-management)
    - [Saving and loading a general checkpoint](https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html)
    """

    CODE = "TL403"
    ACCELERATOR_COST = True
    NAME = "per-step-device-call"
    MESSAGE = "`{call}` runs every step of the loop{via}: {why}"
    TITLE = "`torch.cuda.empty_cache()`, `torch.cuda.synchronize()` or a checkpoint save runs every step of the loop"

    _HEAD = (
        "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(2, 2).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    )
    _STEP = "    loss = crit(model(x.to(device)), y.to(device))\n    loss.backward()\n    opt.step()\n"
    VALID = (
        # a periodic guard
        _HEAD + "for step, (x, y) in enumerate(loader):\n" + _STEP + "    if step % 100 == 0:\n"
        "        torch.save(model.state_dict(), 'ck.pt')\n",
        # once per epoch
        _HEAD
        + "for epoch in range(3):\n    for x, y in loader:\n"
        + _STEP.replace("    ", "        ")
        + "    torch.cuda.empty_cache()\n    torch.save(model.state_dict(), 'ck.pt')\n",
        # timing code
        _HEAD
        + "import time\nfor x, y in loader:\n    t0 = time.perf_counter()\n"
        + _STEP
        + "    torch.cuda.synchronize()\n    print(time.perf_counter() - t0)\n",
        # per-batch outputs saved in an inference pass: not a checkpoint
        _HEAD + "with torch.no_grad():\n    for i, (x, y) in enumerate(loader):\n"
        "        torch.save(model(x.to(device)).cpu(), f'out{i}.pt')\n",
        # a best-so-far check
        _HEAD + "best = 1e9\nfor x, y in loader:\n" + _STEP + "    if loss < best:\n"
        "        torch.save(model.state_dict(), 'best.pt')\n",
    )
    INVALID = (
        Invalid(_HEAD + "for x, y in loader:\n" + _STEP + "    torch.cuda.empty_cache()\n", line=10),
        Invalid(_HEAD + "for x, y in loader:\n" + _STEP + "    torch.cuda.synchronize()\n", line=10),
        Invalid(
            _HEAD + "for x, y in loader:\n" + _STEP + "    torch.save({'model': model.state_dict()}, 'ck.pt')\n",
            line=10,
        ),
        # in a helper called every step
        Invalid(
            _HEAD
            + "def checkpoint():\n    torch.save(model, 'model.pt')\nfor x, y in loader:\n"
            + _STEP
            + "    checkpoint()\n",
            line=12,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        done = set()
        for call in ctx.facts.calls:
            q = call.qualname
            if q not in (_EMPTY_CACHE, _SYNCHRONIZE, _SAVE):
                continue
            if q == _SAVE and not self._saves_state(a, call):
                continue
            hot = a.loops.hot_context(call.site)
            if hot is None or a.loops.role(hot.loop) is None or a.roles.excluded(call.site):
                continue
            where = hot.call if hot.call is not None else call
            if a.roles.excluded(where.site) or self._branched(a, where, hot.loop):
                continue
            if q == _SYNCHRONIZE and (a.roles.benchmark_file or a.places.xla or self._timed(a, hot.loop, call)):
                continue
            if id(where.node) in done:
                continue
            done.add(id(where.node))
            via = f" (in `{hot.via}()`)" if hot.via else ""
            message = self.MESSAGE.format(call=ctx.code(call.node.func) + "()", via=via, why=_WHY[q])
            ctx.report(where.node, message)

    @staticmethod
    def _branched(a: Analysis, call: Call, loop: Loop) -> bool:
        """Under an `if` in the loop that is not a test of the device in play."""
        return any(not a.places.device_test(node) for node in a.loops.branches_in(call.site, loop))

    @staticmethod
    def _timed(a: Analysis, loop: Loop, call: Call) -> bool:
        """The loop (or the function holding the call) reads a clock or CUDA events, or
        a loop around the call iterates a logger that times each step: timing code."""
        calls = list(a.loops.calls_in(loop)) + a.helpers.calls_in_scope(call.site.scope)
        if any(c.qualname in CLOCKS or c.method in _TIMERS or "profil" in (c.qualname or "") for c in calls):
            return True
        around = [*loop.chain(), *(call.site.loop.chain() if call.site.loop is not None else ())]
        return any(a.loops.iterates_timer(each) for each in around)

    @staticmethod
    def _saves_state(a: Analysis, call: Call) -> bool:
        """`torch.save` of a module, a `state_dict()`, or a dict (or name bound to one) holding one."""
        if not call.positional:
            return False
        return _holds_state(a, call.positional[0].value, call, 0)


def _holds_state(a: Analysis, expr: cst.BaseExpression, call: Call, depth: int) -> bool:
    if depth > 2:
        return False
    if isinstance(expr, cst.Name):
        if a.values.expr_kind(expr, call.site) == MODULE:
            return True
        found = a.places.single_value(expr.value, call.site)
        return found is not None and _holds_state(a, found[0], call, depth + 1)
    if isinstance(expr, (cst.Attribute,)) and a.values.expr_kind(expr, call.site) == MODULE:
        return True
    return any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "state_dict"
        for n in [expr, *descendants(expr)]
    )


_WHY = {
    _EMPTY_CACHE: "it returns the cached blocks to the driver, so the next step allocates them again, and it "
    "synchronizes; drop it (or call it once, between phases)",
    _SYNCHRONIZE: "the host waits for the GPU to drain before it queues the next step; keep it for timing code",
    _SAVE: "every checkpoint copies the model to the host and writes it to disk; save every N steps "
    "(`if step % N == 0:`) or once per epoch",
}
