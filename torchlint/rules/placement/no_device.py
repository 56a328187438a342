"""TL100 no-device."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, List, Optional, Set

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Loop, ScopeKind, Site, TopStatement, dotted_name
from torchlint.analysis.vocabulary import ACCEPTS_DEVICE
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import call_with_to, comment_follows, with_keyword
from torchlint.rules.placement.model_not_moved import ModelNotMoved

if TYPE_CHECKING:
    from torchlint.analysis import Analysis


class NoDevice(Rule):
    """
    ## What it does
    Flags a script that builds a model and runs it at module level (or under
    `if __name__ == "__main__":`, or in a module-level function the script
    calls) on the CPU although it looks at devices: it reads `x.device` or
    `.is_cuda`, or calls `torch.cuda.*`, but never selects a device and never
    hands the model to anything that could place it.

    Not flagged: library code (models built inside functions), scripts that
    choose the CPU (`torch.device("cpu")`, `device = "cpu"`, or device code
    left commented out), scripts that never mention devices at all (running on
    the CPU may well be the intent; we cannot tell), unit tests, the
    `__main__` smoke block of a model-definition module, and export or
    benchmark scripts.

    ## Why is this bad?
    Without a device, every tensor and parameter lives in host memory and all
    the work runs on the CPU, even on a machine with an idle GPU; a script
    that prints where its tensors live expects that to matter.

    ## Example
    ```python
    import torch

    model = torch.nn.Linear(10, 2)
    out = model(torch.randn(1, 10))
    print(out.device)
    ```

    ## Use instead
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(10, 2).to(device)
    out = model(torch.randn(1, 10, device=device))
    print(out.device)
    ```

    ## Fix safety
    Unsafe (it changes where the script runs), and offered only when it is
    complete: the fix adds
    `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`
    after the last import before the model, below a blank line that ends the
    import block (with `import torch` when torch is not imported by then),
    `.to(device)` to the model's construction,
    `device=` to every tensor the script creates at that level, and a move
    of every loader batch it feeds the model, so nothing is left on the CPU
    to meet the model. It is not offered when the script feeds the model
    anything else (a tensor from another module, a helper's result), when a
    loss compares the output with something it cannot move that way, when a
    factory takes no `device=`, when the script hands tensors to NumPy or
    Matplotlib (they need host memory), or when no import precedes the
    model. On a machine without a GPU the fixed script still runs, on the
    CPU.

    ## References
    - [PyTorch: CUDA semantics](https://pytorch.org/docs/stable/notes/cuda.html)
    """

    CODE = "TL100"
    NAME = "no-device"
    MESSAGE = "Model `{name}` runs on the CPU: this script looks at devices but never selects one"
    TITLE = "A model runs on the CPU: the script looks at devices but never selects one"
    FIX_TITLE = "Select a device and move the model and its inputs to it"
    APPLICABILITY = Applicability.UNSAFE
    QUIET_IN_TESTS = True

    _SHOW = "print(out.device)\n"
    VALID = (
        # a library function: legitimate CPU code
        "import torch\ndef make():\n    model = torch.nn.Linear(10, 2)\n    out = model(torch.randn(1, 10))\n"
        "    print(out.device)\n",
        # a device is selected: the CPU, on purpose
        "import torch\ndevice = torch.device('cpu')\nmodel = torch.nn.Linear(10, 2).to(device)\nout = model(x)\n"
        + _SHOW,
        "import torch\ndevice = 'cpu'\nmodel = torch.nn.Linear(10, 2)\nout = model(x)\n" + _SHOW,
        # device code left commented out: the CPU is a choice
        "import torch\n# device = torch.device('cuda')\nmodel = torch.nn.Linear(10, 2)\nout = model(x)\n" + _SHOW,
        # never mentions a device: we cannot tell the CPU is not the intent
        "import torch\nmodel = torch.nn.Linear(10, 2)\nfor x, y in loader:\n    loss = (model(x) - y).pow(2).mean()\n"
        "    loss.backward()\n",
        # handed to something that places it (Lightning)
        "import torch\nimport lightning as L\nmodel = torch.nn.Linear(10, 2)\nL.Trainer().fit(model)\n" + _SHOW,
        "import torch\nmodel = torch.nn.Linear(10, 2)\ntrainer.fit(model)\nout = model(x)\n" + _SHOW,
        # built but never run
        "import torch\nmodel = torch.nn.Linear(10, 2)\nprint(model, torch.cuda.is_available())\n",
        # built by a builder whose kind we cannot see
        "import torch\nmodel = build_model()\nout = model(x)\n" + _SHOW,
        # the smoke block of a model-definition module
        "import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n"
        "if __name__ == '__main__':\n    net = Net()\n    out = net(torch.zeros(2, 3))\n    print(out.shape, out.device)\n",
    )
    INVALID = (
        Invalid(
            "import torch\n\nmodel = torch.nn.Linear(10, 2)\nx = torch.randn(1, 10)\nout = model(x)\nprint(out.device)\n",
            fixed='import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "model = torch.nn.Linear(10, 2).to(device)\nx = torch.randn(1, 10, device=device)\nout = model(x)\n"
            "print(out.device)\n",
            line=3,
            unsafe=True,
        ),
        # a training loop over a loader: the batches move too
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nprint(torch.cuda.is_available())\n"
            "model = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for x, y in DataLoader(ds, batch_size=8):\n    loss = torch.nn.functional.mse_loss(model(x), y)\n"
            "    loss.backward()\n    opt.step()\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nprint(torch.cuda.is_available())\n'
            "model = torch.nn.Linear(4, 1).to(device)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for x, y in DataLoader(ds, batch_size=8):\n    x, y = x.to(device), y.to(device)\n"
            "    loss = torch.nn.functional.mse_loss(model(x), y)\n    loss.backward()\n    opt.step()\n",
            line=4,
            unsafe=True,
        ),
        # fed something we cannot move: reported, no fix
        Invalid(
            "from torch import nn\nmodel = nn.Sequential(nn.Linear(2, 2))\nout = model(load_batch())\n"
            "print(out.is_cuda)\n",
            line=2,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if a.places.silenced or a.places.selects_device() or not self._device_aware(ctx):
            return
        if _DELIBERATE_CPU.search(ctx.source):
            return  # commented-out device code: running on the CPU is a choice
        facts = ctx.facts
        module_scope = facts.module_scope
        runners = self._module_level_runners(ctx)
        events = a.places._model_events()
        for b in facts.bindings:
            if b.site.scope is not module_scope or "." in b.name:
                continue
            ctor = ModelNotMoved._construction(a, b)
            if ctor is None or a.roles.excluded(b.site):
                continue
            if any(e.site.order > b.site.order or e.site.scope is not module_scope for e in events.get(b.name, [])):
                continue
            forwards = [
                c
                for c in facts.calls
                if self._runs(a, c, b.name)
                and (
                    c.site.scope is module_scope
                    or (
                        c.site.scope.kind == ScopeKind.FUNCTION
                        and c.site.scope.parent is module_scope
                        and c.site.scope.name in runners
                    )
                )
            ]
            if not forwards:
                continue
            ctx.report(ctor.node, self.MESSAGE.format(name=b.name), replacements=self._fix(ctx, b, forwards, runners))

    @staticmethod
    def _runs(a: Analysis, call: Call, name: str) -> bool:
        mc = a.values.model_call(call)
        if mc is not None:
            return dotted_name(mc.model) == name
        return False

    @staticmethod
    def _device_aware(ctx: RuleContext) -> bool:
        """The script looks at where things run (`x.device`, `.is_cuda`,
        `torch.cuda.is_available()`) without ever choosing a device: it expects
        the GPU to matter."""
        for use in ctx.facts.uses:
            parent = use.site.parent
            if (
                isinstance(parent, cst.Attribute)
                and parent.value is use.node
                and parent.attr.value in ("device", "is_cuda")
            ):
                return True
        for call in ctx.facts.calls:
            q = call.qualname or ""
            if q.startswith("torch.cuda.") or q.startswith("torch.backends.mps.") or call.method == "get_device":
                return True
        return False

    @staticmethod
    def _module_level_runners(ctx: RuleContext) -> Set[str]:
        """Names of module-level functions called at module level."""
        facts = ctx.facts
        out: Set[str] = set()
        for call in facts.calls:
            func = call.node.func
            if call.site.scope is facts.module_scope and isinstance(func, cst.Name):
                if any(
                    b.kind == BindingKind.DEF and b.site.scope is facts.module_scope
                    for b in facts.bindings_of(func.value)
                ):
                    out.add(func.value)
        return out

    # -- the fix: a device, the model on it, and every input the script feeds it ---------------

    def _fix(
        self, ctx: RuleContext, b: Binding, forwards: List[Call], runners: Set[str]
    ) -> Optional[Dict[cst.CSTNode, Replacement]]:
        a = ctx.analysis
        facts = ctx.facts
        if facts.module_scope is None or b.value is None:
            return None
        scopes = {id(facts.module_scope.node)} | {
            id(f.scope.node) for f in facts.functions if f.name in runners and f.scope.parent is facts.module_scope
        }
        in_script = [c for c in facts.calls if id(c.site.scope.node) in scopes]
        if any(c.method == "numpy" or (c.qualname or "").split(".")[0] in ("numpy", "matplotlib") for c in in_script):
            return None  # host-only code would meet device tensors
        creations = [c for c in in_script if a.places.cpu_creation(c.node) is c and not _inside_creation(a, c)]
        if any(c.qualname not in ACCEPTS_DEVICE for c in creations):
            return None
        # Every input of every forward must be one we move: a creation here or a batch of a loop here.
        loops: Dict[Loop, List[str]] = {}
        for call in forwards:
            for arg in call.node.args:
                if not self._movable(a, arg.value, call.site, creations, loops):
                    return None
        # A loss that compares the (moved) output with a target needs the target moved too.
        outputs = {id(c.node) for c in forwards}
        for call in in_script:
            if not a.values.is_loss_call(call):
                continue
            for arg in call.node.args:
                if not (
                    self._is_output(a, arg.value, call.site, outputs)
                    or self._movable(a, arg.value, call.site, creations, loops)
                ):
                    return None
        anchor = self._import_anchor(ctx, b)
        if anchor is None:
            return None
        torch = facts.module_alias("torch")
        lines = []
        at = facts.site_of_statement(anchor.body[0])
        if (
            torch is None
            or at is None
            or not any(x.kind == BindingKind.IMPORT and x.site.order <= at.order for x in facts.bindings_of(torch))
        ):
            # Not imported by the time the device is selected (or imported in a later notebook cell).
            if any(x.kind != BindingKind.IMPORT for x in facts.bindings_of("torch")):
                return None
            torch = "torch"
            lines.append("import torch\n")
        lines.append(f'device = {torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")\n')
        new = [cst.parse_statement(line) for line in lines]
        replacements: Dict[cst.CSTNode, Replacement] = {b.value: call_with_to(b.value, "device")}
        # A blank line between the imports and the device line (PEP 8's layout): the blank
        # lines that already end the import block, or a new one.
        follower = _follower(ctx.module, anchor)
        lead = list(follower.leading_lines) if follower is not None else []
        blank = 0
        while blank < len(lead) and lead[blank].comment is None:
            blank += 1
        if follower is not None and blank:
            device_line = new.pop().with_changes(leading_lines=lead[:blank])
            replacements[follower] = cst.FlattenSentinel(
                [device_line, follower.with_changes(leading_lines=lead[blank:])]
            )
        else:
            new[-1] = new[-1].with_changes(leading_lines=[cst.EmptyLine()])
        if new:
            replacements[anchor] = cst.FlattenSentinel([anchor, *new])
        for c in creations:
            replacements[c.node] = with_keyword(c.node, "device", cst.Name("device"), comment_follows(a, c.node))
        for loop, names in loops.items():
            body = loop.node.body
            if not isinstance(body, cst.IndentedBlock):
                return None
            move = cst.parse_statement(f"{', '.join(names)} = {', '.join(n + '.to(device)' for n in names)}\n")
            replacements[body] = body.with_changes(body=[move] + list(body.body))
        return replacements

    @staticmethod
    def _movable(
        a: Analysis, expr: cst.BaseExpression, site: Site, creations: List[Call], loops: Dict[Loop, List[str]]
    ) -> bool:
        creation = a.places.cpu_creation(expr)
        if creation is not None:
            return creation in creations
        if not isinstance(expr, cst.Name):
            return False
        reaching = a.places.reaching(expr.value, site)
        if not reaching:
            return False
        for r in reaching:
            if r.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and r.value is not None and r.index is None:
                creation = a.places.cpu_creation(r.value)
                if creation is None or creation not in creations:
                    return False
            elif r.kind == BindingKind.FOR and r.site.loop is not None and a.places.batch_source(r.value, r.site):
                loop = r.site.loop
                loops.setdefault(loop, [])
                if r.name not in loops[loop]:
                    loops[loop].append(r.name)
            else:
                return False
        return True

    @staticmethod
    def _is_output(a: Analysis, expr: cst.BaseExpression, site: Site, outputs: Set[int]) -> bool:
        """The model's output (directly or through a name bound to it)."""
        if isinstance(expr, cst.Call):
            return id(expr) in outputs
        if isinstance(expr, cst.Name):
            reaching = a.places.reaching(expr.value, site)
            return bool(reaching) and all(
                isinstance(r.value, cst.Call) and id(r.value) in outputs and r.index is None for r in reaching
            )
        return False

    @staticmethod
    def _import_anchor(ctx: RuleContext, b: Binding) -> Optional[cst.SimpleStatementLine]:
        facts = ctx.facts
        anchor = None
        for stmt in ctx.module.body:
            first = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else stmt
            site = facts.site_of_statement(first)
            if site is None or site.order > b.site.order:
                break
            if isinstance(stmt, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
            ):
                anchor = stmt
        return anchor


def _follower(module: cst.Module, stmt: cst.CSTNode) -> Optional[TopStatement]:
    """The top-level statement after `stmt`, if any."""
    body = list(module.body)
    for i, s in enumerate(body[:-1]):
        if s is stmt:
            return body[i + 1]
    return None


def _inside_creation(a: Analysis, call: Call) -> bool:
    """A factory nested in another creation's arguments (`torch.tensor(torch.zeros(2))`)."""
    outer = a.facts.call_of_arg(call.site.parent) if isinstance(call.site.parent, cst.Arg) else None
    return outer is not None and a.places.cpu_creation(outer.node) is not None


_DELIBERATE_CPU = re.compile(r"^[ \t]*#.*(\.cuda\(|\.to\(\s*['\"]?(cuda|device)|torch\.device\(|\bdevice\s*=)", re.M)
