"""TL102 input-not-moved."""
from __future__ import annotations

import libcst as cst

from torchlint.analysis.placement import USE_ARG, USE_MOVE, USE_OTHER, call_with_to, placement, with_keyword
from torchlint.analysis.semantics import DEVICE_KWARG_FACTORIES
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext


class InputNotMoved(Rule):
    """
    ## What it does
    Flags a tensor created on the CPU (a `torch.*` factory without `device=`,
    `torch.tensor` / `torch.as_tensor` / `torch.from_numpy`, or a tokenizer
    call with `return_tensors="pt"`) that reaches a model call without being
    moved, in a file that uses a device.

    ## Why is this bad?
    The model runs where its parameters are; an input left in host memory
    either makes the forward fail with a device mismatch or, when the model
    was left on the CPU to match, keeps all the work off the GPU.

    ## Example
    ```python
    model = Net().to(device)
    x = torch.randn(64, 128)
    out = model(x)
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    x = torch.randn(64, 128, device=device)
    out = model(x)
    ```

    ## Fix safety
    Safe, offered where a device variable is in scope at the creation: the
    fix adds `device=<device>` to a factory, or appends `.to(<device>)` to a
    tokenizer call or `torch.from_numpy(...)`. Random factories then draw from
    the device's generator, so seeded values differ from the CPU's.

    ## References
    - [PyTorch: tensor creation ops](https://pytorch.org/docs/stable/torch.html#creation-ops)
    - [Hugging Face: `BatchEncoding.to`](https://huggingface.co/docs/transformers/main_classes/tokenizer#transformers.BatchEncoding.to)
    """

    CODE = "TL102"
    NAME = "input-not-moved"
    MESSAGE = "`{name}` is created on the CPU and reaches the model without being moved to the device"
    INLINE_MESSAGE = "This tensor is created on the CPU and passed to the model without being moved to the device"
    FIX_TITLE = "Create the input on the device"
    APPLICABILITY = Applicability.SAFE
    REQUIRES_DEVICE = True

    VALID = (
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\n"
        "x = torch.randn(1, 2, device=device)\ny = model(x)\n",
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\n"
        "x = torch.randn(1, 2)\nx = x.to(device)\ny = model(x)\n",
        # moved in a branch
        "import torch\nmodel = torch.nn.Linear(2, 2)\nx = torch.randn(1, 2)\nif torch.cuda.is_available():\n"
        "    model.cuda()\n    x = x.cuda()\ny = model(x)\n",
        # never reaches a model
        "import torch\ndevice = 'cuda'\ncrit = torch.nn.MSELoss()\ny = torch.randn(2)\nl = crit(out, y)\n",
        # handed to a helper first
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\nx = torch.randn(1, 2)\n"
        "x = to_device(x)\ny = model(x)\n",
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\nx = torch.randn(1, 2)\n"
        "prepare(x)\ny = model(x)\n",
        # **kwargs could carry device=
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\nx = torch.randn(1, 2, **kw)\n"
        "y = model(x)\n",
        # no device in play: a CPU script (TL100's business)
        "import torch\nmodel = torch.nn.Linear(2, 2)\nx = torch.randn(1, 2)\ny = model(x)\n",
        # a moved tokenizer output
        "import torch\ntokenizer = AutoTokenizer.from_pretrained('m')\nmodel = AutoModel.from_pretrained('m').to('cuda')\n"
        "inputs = tokenizer('hi', return_tensors='pt').to('cuda')\nout = model(**inputs)\n",
    )
    INVALID = (
        Invalid(
            "import torch\ndevice = torch.device('cuda')\nmodel = torch.nn.Linear(10, 2).to(device)\n"
            "x = torch.randn(1, 10)\ny = model(x)\n",
            fixed="import torch\ndevice = torch.device('cuda')\nmodel = torch.nn.Linear(10, 2).to(device)\n"
            "x = torch.randn(1, 10, device=device)\ny = model(x)\n",
            line=4,
        ),
        Invalid(
            "import torch\nfrom transformers import AutoModel, AutoTokenizer\ndevice = 'cuda'\n"
            "tokenizer = AutoTokenizer.from_pretrained('m')\nmodel = AutoModel.from_pretrained('m').to(device)\n"
            "inputs = tokenizer('hi', return_tensors='pt')\nout = model(**inputs)\n",
            fixed="import torch\nfrom transformers import AutoModel, AutoTokenizer\ndevice = 'cuda'\n"
            "tokenizer = AutoTokenizer.from_pretrained('m')\nmodel = AutoModel.from_pretrained('m').to(device)\n"
            "inputs = tokenizer('hi', return_tensors='pt').to(device)\nout = model(**inputs)\n",
            line=6,
        ),
        Invalid(
            "import torch as T\nfrom torch import nn\nclass Net(nn.Module):\n    pass\n"
            "def run(model, device):\n    x = T.tensor([[1.0, 2.0]]).float()\n    return model(x)\n"
            "net = Net().cuda()\nrun(net, 'cuda')\n",
            fixed="import torch as T\nfrom torch import nn\nclass Net(nn.Module):\n    pass\n"
            "def run(model, device):\n    x = T.tensor([[1.0, 2.0]], device=device).float()\n    return model(x)\n"
            "net = Net().cuda()\nrun(net, 'cuda')\n",
            line=6,
        ),
        Invalid(
            "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\ny = model(torch.ones(1, 2))\n",
            fixed="import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\n"
            "y = model(torch.ones(1, 2, device=device))\n",
            line=4,
        ),
        # no device variable in scope: no fix
        Invalid(
            "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nx = torch.zeros(1, 2)\ny = model(x)\n",
            fixed=None,
            line=3,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        pl = placement(ctx)
        if pl.silenced:
            return
        for b in ctx.facts.bindings:
            if b.kind not in ("assign", "annassign") or b.index is not None or b.value is None or "." in b.name:
                continue
            creation = pl.cpu_creation(b.value)
            if creation is None or b.name in pl.moves:
                continue
            scope = b.site.scope
            # Another binding of the name in the same scope: we can't tell which reaches the model.
            if any(o is not b and o.site.scope is scope for o in ctx.facts.bindings_of(b.name)):
                continue
            reaches = None
            escaped = False
            for use in ctx.facts.uses_of(b.name):
                if use.site.scope is not scope or use.site.order < b.site.order:
                    continue
                kind, call = pl.use_kind(use)
                if kind in (USE_MOVE, USE_OTHER):
                    escaped = True
                    break
                if kind == USE_ARG and call is not None:
                    if self._placed_forward(pl, call):
                        reaches = reaches or call
                    elif not (call.qualname or "").startswith("torch.") and not pl.is_loss_call(call):
                        escaped = True  # a helper could hand back a moved copy through state we can't see
                        break
            if escaped or reaches is None or not pl.device_near(b.site):
                continue
            ctx.report(creation.node, self.MESSAGE.format(name=b.name),
                       replacements=self._fix(pl, creation, b.site))
        # Created right in the call: `model(torch.randn(8, 4))`.
        for call in ctx.facts.calls:
            if not call.node.args or not isinstance(call.node.func, (cst.Name, cst.Attribute)):
                continue
            inline = [a for a in call.node.args if isinstance(a.value, cst.Call) and not a.star]
            if not inline or not self._placed_forward(pl, call):
                continue
            for arg in inline:
                creation = pl.cpu_creation(arg.value)
                if creation is not None and pl.device_near(call.site):
                    ctx.report(creation.node, self.INLINE_MESSAGE, replacements=self._fix(pl, creation, call.site))

    @staticmethod
    def _placed_forward(pl, call) -> bool:
        """A forward of a model that is (or may be) on the device and does not move
        its inputs itself. A callee that only reads like a model (`model` as a
        parameter) counts only with a device variable at hand."""
        if not pl.is_forward(call):
            return False
        state = pl.model_state(pl.model_expr(call), call.site)
        if state in ("unplaced", "wrapped"):
            return False
        if state == "unknown" and pl.sem.expr_kind(pl.model_expr(call), call.site) != "module":
            return pl.device_var(call.site) is not None
        return True

    @staticmethod
    def _fix(pl, creation, site):
        device = pl.device_var(site)
        if device is None:
            return None
        node: cst.Call = creation.node
        if creation.qualname in DEVICE_KWARG_FACTORIES:
            return {node: with_keyword(node, "device", cst.Name(device))}
        return {node: call_with_to(node, device)}
