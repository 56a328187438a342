"""TL404 compile-in-loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.analysis.facts import Call, Loop
from torchlint.analysis.walk import descendants
from torchlint.rules.base import Invalid, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_COMPILE = "torch.compile"


class CompileInLoop(Rule):
    """
    ## What it does
    Flags `torch.compile(...)` called in every iteration of a loop, or in a
    same-file function that the per-step loop calls every iteration, when it
    compiles the same thing each time: every name its arguments read is bound
    before the loop and not rebound in it.

    Not flagged: a loop that runs once, a compile under an `if` in the loop
    (a lazy `if compiled is None:` cache), a loop that compiles a different
    model or with different options each iteration (a loop over configs in a
    benchmark), `@torch.compile` decorators, tests, benchmarks and other
    tooling.

    ## Why is this bad?
    `torch.compile` wraps its target in a new compiled module or function
    each call. The first call of the result traces and compiles (seconds to
    minutes); later wrappers of the same code look up Dynamo's cache and
    evaluate its guards, and a target whose guards fail (a new object, new
    options, a changed attribute) is compiled again, until the recompile
    limit makes it fall back to eager mode. Compile once, before the loop,
    and call the compiled object in it.

    ## Example
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for x, y in loader:
        compiled = torch.compile(model)
        loss = nn.functional.cross_entropy(compiled(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model)

    for x, y in loader:
        loss = nn.functional.cross_entropy(compiled(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    No fix: where the compiled object is kept (a name, an attribute, a cache)
    is the author's choice.

    ## References
    - [torch.compile tutorial](https://pytorch.org/tutorials/intermediate/torch_compile_tutorial.html)
    - [torch.compile: programming model, recompilations](https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html)
    """

    CODE = "TL404"
    NAME = "compile-in-loop"
    MESSAGE = "`torch.compile(...)` runs every iteration{via}: {why}"
    TITLE = "`torch.compile(...)` called inside a loop or a function called every step"

    _HEAD = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    _STEP = "    fast(x).sum().backward()\n    opt.step()\n"
    VALID = (
        _HEAD + "fast = torch.compile(model)\nfor x in loader:\n" + _STEP,
        # a lazy cache
        _HEAD + "fast = None\nfor x in loader:\n    if fast is None:\n        fast = torch.compile(model)\n" + _STEP,
        # a different model each iteration
        "import torch\nfor cfg in configs:\n    fast = torch.compile(build(cfg))\n    print(bench(fast))\n",
        "import torch\nfor m in models:\n    fast = torch.compile(m)\n    print(bench(fast))\n",
        # different options each iteration
        _HEAD
        + "for mode in ('default', 'max-autotune'):\n    fast = torch.compile(model, mode=mode)\n    print(fast(x))\n",
        # a loop that runs once
        _HEAD + "for x in loader:\n    fast = torch.compile(model)\n" + _STEP + "    break\n",
    )
    INVALID = (
        Invalid(_HEAD + "for x in loader:\n    fast = torch.compile(model)\n" + _STEP, line=6),
        Invalid(
            _HEAD + "def step(x):\n    fast = torch.compile(model)\n    fast(x).sum().backward()\n"
            "for x in loader:\n    step(x)\n    opt.step()\n",
            line=6,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if a.roles.benchmark_file:
            return
        for call in ctx.facts.calls:
            if call.qualname != _COMPILE or not call.positional or a.roles.excluded(call.site):
                continue
            loop = self._own_loop(call)
            if loop is not None:
                if a.loops.runs_once(loop) or a.loops.branches_in(call.site, loop):
                    continue
                if not self._same_each_time(a, call, loop):
                    continue
                ctx.report(call.node, self.MESSAGE.format(via="", why=_WHY))
                continue
            if call.site.loop is not None or call.site.ifs or a.loops.occasional_guard(call.site):
                continue
            hot = a.loops.hot_context(call.site)
            if hot is None or not hot.via or a.loops.runs_once(hot.loop):
                continue
            if hot.call is not None and a.loops.branches_in(hot.call.site, hot.loop):
                continue
            ctx.report(call.node, self.MESSAGE.format(via=f" of the loop that calls `{hot.via}()`", why=_WHY))

    @staticmethod
    def _own_loop(call: Call) -> Optional[Loop]:
        loop = call.site.loop
        return loop if loop is not None and loop.scope is call.site.scope else None

    @staticmethod
    def _same_each_time(a: Analysis, call: Call, loop: Loop) -> bool:
        """Every name the call's arguments read is bound before the loop and not
        rebound in it: the same target, with the same options, every iteration."""
        for arg in call.node.args:
            value = arg.value
            if isinstance(value, (cst.Lambda, cst.Call)) and arg.keyword is None:
                return False  # a target built in the loop: a new object each time
            for node in [value, *descendants(value)]:
                if (
                    isinstance(node, cst.Name)
                    and not _constant(node)
                    and not a.loops.invariant(node.value, loop, read_elsewhere=True)
                ):
                    if _attribute_name(node, value):
                        continue
                    return False
        return True


def _constant(node: cst.Name) -> bool:
    return node.value in ("True", "False", "None")


def _attribute_name(node: cst.Name, root: cst.BaseExpression) -> bool:
    """`node` is the `.attr` of an attribute in `root`, not a name read."""
    return any(isinstance(n, cst.Attribute) and n.attr is node for n in [root, *descendants(root)])


_WHY = (
    "each call wraps the target again and, on its first call, looks it up in Dynamo's cache or compiles it "
    "again; compile once before the loop and call the compiled object in it"
)
