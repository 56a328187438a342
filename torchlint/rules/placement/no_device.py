"""TL100 no-device."""
from __future__ import annotations

from typing import Optional, Set

import libcst as cst

from torchlint.analysis.placement import USE_CALL, call_with_to, placement
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext


class NoDevice(Rule):
    """
    ## What it does
    Flags a script that builds a model and runs it (a forward, `.backward()`
    or `optimizer.step()`) at module level or under
    `if __name__ == "__main__":`, in a file that never selects any device and
    hands the model to nothing that could place it. Library code (models
    built inside functions) is not a script: a CPU-only helper is legitimate.

    ## Why is this bad?
    Without a device, every tensor and parameter lives in host memory and all
    the work runs on the CPU, even on a machine with an idle GPU.

    ## Example
    ```python
    import torch

    model = torch.nn.Linear(10, 2)
    out = model(torch.randn(1, 10))
    ```

    ## Use instead
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(10, 2).to(device)
    out = model(torch.randn(1, 10, device=device))
    ```

    ## Fix safety
    Unsafe: the fix adds
    `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`
    after the imports and `.to(device)` on the model's construction, which
    changes where the script runs. Inputs are then flagged by TL102/TL103
    and fixed by their own (safe) fixes.

    ## References
    - [PyTorch: CUDA semantics](https://pytorch.org/docs/stable/notes/cuda.html)
    """

    CODE = "TL100"
    NAME = "no-device"
    MESSAGE = "Model `{name}` runs on the CPU: this script never selects a device"
    FIX_TITLE = "Select a device and move the model to it"
    APPLICABILITY = Applicability.UNSAFE

    VALID = (
        # a library function: legitimate CPU code
        "import torch\ndef make():\n    model = torch.nn.Linear(10, 2)\n    return model(torch.randn(1, 10))\n",
        # a device is selected
        "import torch\ndevice = torch.device('cpu')\nmodel = torch.nn.Linear(10, 2).to(device)\ny = model(x)\n",
        "import torch\ndevice = 'cpu'\nmodel = torch.nn.Linear(10, 2)\ny = model(x)\n",
        # handed to something that places it (Lightning)
        "import torch\nimport lightning as L\nmodel = torch.nn.Linear(10, 2)\nL.Trainer().fit(model)\n",
        "import torch\nmodel = torch.nn.Linear(10, 2)\ntrainer.fit(model)\ny = model(x)\n",
        # built but never run
        "import torch\nmodel = torch.nn.Linear(10, 2)\nprint(model)\n",
        # built by a builder whose kind we cannot see
        "import torch\nmodel = build_model()\ny = model(x)\n",
        # a loss module is not a model
        "import torch\ncrit = torch.nn.MSELoss()\nl = crit(a, b)\n",
    )
    INVALID = (
        Invalid(
            "import torch\n\nmodel = torch.nn.Linear(10, 2)\nout = model(x)\n",
            fixed='import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "model = torch.nn.Linear(10, 2).to(device)\nout = model(x)\n",
            line=3,
            unsafe=True,
        ),
        Invalid(
            "import torch as T\nfrom torch import nn\nclass Net(nn.Module):\n    pass\n"
            "if __name__ == '__main__':\n    net = Net()\n    loss = net(x).sum()\n    loss.backward()\n",
            fixed="import torch as T\nfrom torch import nn\n"
            'device = T.device("cuda" if T.cuda.is_available() else "cpu")\nclass Net(nn.Module):\n    pass\n'
            "if __name__ == '__main__':\n    net = Net().to(device)\n    loss = net(x).sum()\n    loss.backward()\n",
            line=6,
            unsafe=True,
        ),
        Invalid(
            "from torch import nn\nmodel = nn.Sequential(nn.Linear(2, 2))\ndef step(x):\n    return model(x)\nstep(1)\n",
            fixed="from torch import nn\nimport torch\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "model = nn.Sequential(nn.Linear(2, 2)).to(device)\ndef step(x):\n    return model(x)\nstep(1)\n",
            line=2,
            unsafe=True,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        if ctx.sem.device_in_play():
            return
        pl = placement(ctx)
        if pl.silenced or pl.has_device_binding():
            return
        facts = ctx.facts
        module_scope = facts.module_scope
        runners: Optional[Set[str]] = None
        for b in facts.bindings:
            if b.site.scope is not module_scope or "." in b.name:
                continue
            info = pl.model_construction(b)
            if info is None or info[1]:
                continue
            placed, called, uses = pl.model_uses(b)
            if placed:
                continue
            if runners is None:
                runners = self._module_level_runners(ctx)
            runs = False
            for use in uses:
                if pl.use_kind(use)[0] != USE_CALL:
                    continue
                scope = use.site.scope
                if scope is module_scope or (scope.kind == "function" and scope.parent is module_scope
                                             and scope.name in runners):
                    runs = True
                    break
            if not runs:
                continue
            ctx.report(info[0].node, self.MESSAGE.format(name=b.name), replacements=self._fix(ctx, b))

    @staticmethod
    def _module_level_runners(ctx: RuleContext) -> Set[str]:
        """Names of module-level functions called at module level."""
        facts = ctx.facts
        out: Set[str] = set()
        for call in facts.calls:
            func = call.node.func
            if call.site.scope is facts.module_scope and isinstance(func, cst.Name):
                if any(b.kind == "def" and b.site.scope is facts.module_scope for b in facts.bindings_of(func.value)):
                    out.add(func.value)
        return out

    @staticmethod
    def _fix(ctx: RuleContext, b):
        facts = ctx.facts
        anchor = None
        for stmt in ctx.module.body:
            first = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else stmt
            site = facts.site_of_statement(first)
            if site is None or site.order > b.site.order:
                break
            if isinstance(stmt, cst.SimpleStatementLine) and all(
                    isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
                anchor = stmt
        if anchor is None:
            return None
        torch = facts.module_alias("torch")
        lines = []
        if torch is None:
            torch = "torch"
            lines.append("import torch\n")
        lines.append(f'device = {torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")\n')
        new = [cst.parse_statement(line) for line in lines]
        return {anchor: cst.FlattenSentinel([anchor] + new), b.value: call_with_to(b.value, "device")}
