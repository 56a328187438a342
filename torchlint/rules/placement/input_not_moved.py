"""TL102 input-not-moved."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.attributes import CpuAttribute
from torchlint.analysis.facts import BindingKind, Call, NameUse
from torchlint.analysis.place_kinds import DEVICE
from torchlint.analysis.vocabulary import ACCEPTS_DEVICE, NO_DEVICE_KWARG
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import call_with_to, comment_follows, with_keyword

if TYPE_CHECKING:
    from torchlint.analysis import Analysis


class InputNotMoved(Rule):
    """
    ## What it does
    Flags a tensor created on the CPU (a `torch.*` factory without `device=`,
    `torch.tensor` / `torch.as_tensor` / `torch.from_numpy`, a legacy
    `torch.FloatTensor(...)`, or a tokenizer call with `return_tensors="pt"`)
    that reaches a model that is on the device *at that point of the
    program*, without being moved first.

    "At that point" is read in statement order (notebook cells in their
    order): a forward that runs before `model.to(device)` runs on the CPU with
    CPU inputs, on purpose, and is not flagged; neither is a model whose move
    happens only in one branch of an unrelated `if`, a model we cannot see
    (a parameter nobody in the file passes), an input handed first to a
    helper that could move it, or test code (test files, test classes and
    their helpers).

    Also flags a tensor created on the CPU and kept as a plain attribute of
    an `nn.Module` (`self.bins = torch.arange(...)` in `__init__`, not a
    parameter or buffer) that the module's methods combine with its inputs
    (`x.unsqueeze(-1) - self.bins`, `probs @ self.bins`), where the project
    runs the module on an accelerator (the file, or a project file that
    imports it, moves something to one): `model.to(device)` moves parameters
    and buffers only, so the attribute stays on the CPU. Not flagged: a
    0-dim tensor (`torch.tensor(3.0)` mixes with tensors on any device), an
    attribute the class moves (`.to`, `.cuda`, `.type_as`), registers or
    re-places (`register_buffer`, `nn.Parameter`, an `_apply`/`to` override),
    or uses only on the host (`len(self.bins)`, its shape), and a module
    without parameters of its own (it may be a transform run on the CPU
    while loading data) or that subclasses a torch layer (whose own buffers
    may have any name).

    ## Why is this bad?
    The model runs where its parameters are: an input left in host memory
    makes the forward fail with "Expected all tensors to be on the same
    device".

    ## Example
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(128, 10).to(device)
    x = torch.randn(64, 128)
    out = model(x)
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(128, 10).to(device)
    x = torch.randn(64, 128, device=device)
    out = model(x)
    ```

    ## Fix safety
    Safe, offered where a device variable is in scope at the creation: the
    fix adds `device=<device>` to a factory that accepts it, or appends
    `.to(<device>)` to a tokenizer call or `torch.from_numpy(...)` (and to
    `torch.bernoulli` / `multinomial` / `poisson`, which take no `device=`).
    Every other tensor created on the CPU in that scope that meets a tensor
    on the device (the target in the loss, the labels an accuracy compares
    the output with) is moved the same way in the same fix: moving the input
    alone would leave the script failing on the next line. No fix is offered
    when one of those cannot be moved that way, or is also read on the host
    (`.numpy()`, a NumPy function). Random factories then draw from the
    device's generator, so a seeded run gives other (equally distributed)
    numbers.

    A tensor kept as a module attribute gets an unsafe fix,
    `self.register_buffer("bins", torch.arange(...), persistent=False)`,
    offered only when the assignment is a statement of `__init__`'s own body
    after `super().__init__()` (`register_buffer` needs the module set up)
    and nothing else in the file assigns that attribute name. The buffer
    moves with the module and, being non-persistent, stays out of the
    `state_dict` (checkpoints keep loading); it is unsafe because it now
    appears in `named_buffers()` and code elsewhere may assign the name.

    ## References
    - [PyTorch: tensor creation ops](https://pytorch.org/docs/stable/torch.html#creation-ops)
    - [Hugging Face: `BatchEncoding.to`](https://huggingface.co/docs/transformers/main_classes/tokenizer#transformers.BatchEncoding.to)
    """

    CODE = "TL102"
    NAME = "input-not-moved"
    MESSAGE = "`{name}` is created on the CPU and reaches the model without being moved to the device"
    TITLE = "A tensor is created on the CPU and reaches the model without being moved to the device"
    INLINE_MESSAGE = "This tensor is created on the CPU and passed to the model without being moved to the device"
    FIX_TITLE = "Create the input on the device"
    ATTRIBUTE_MESSAGE = (
        "`self.{name}` is a tensor created on the CPU and kept as a plain attribute of `{cls}`, which `{method}` "
        "combines with its inputs: `model.to(device)` leaves it on the CPU; register it as a buffer"
    )
    ATTRIBUTE_FIX_TITLE = "Register the tensor as a (non-persistent) buffer"
    APPLICABILITY = Applicability.SAFE
    QUIET_IN_TESTS = True
    REQUIRES_DEVICE = True

    VALID = (
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\n"
        "x = torch.randn(1, 2, device=device)\ny = model(x)\n",
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\n"
        "x = torch.randn(1, 2)\nx = x.to(device)\ny = model(x)\n",
        # moved on the GPU path
        "import torch\nmodel = torch.nn.Linear(2, 2)\nx = torch.randn(1, 2)\nif torch.cuda.is_available():\n"
        "    model.cuda()\n    x = x.cuda()\ny = model(x)\n",
        # the model is still on the CPU here: a CPU check before it moves (a notebook's earlier cell)
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2)\nx = torch.randn(1, 2)\nprint(model(x).shape)\n"
        "model = model.to(device)\n",
        # moved only in one branch of an unrelated `if`: we can't tell where it is
        "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2)\nif args.big:\n    model.to(device)\n"
        "x = torch.randn(1, 2)\ny = model(x)\n",
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
        # a model we cannot see (a parameter nobody here passes)
        "import torch\ndef run(model):\n    x = torch.zeros(1, 2)\n    return model(x)\nprint(torch.zeros(1).cuda())\n",
        # a module attribute the forward moves where its input is
        "import torch\ndevice = 'cuda'\nclass Bins(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.bins = torch.arange(0, 10)\n        self.proj = torch.nn.Linear(10, 10)\n"
        "    def forward(self, x):\n        return self.proj(x.unsqueeze(-1) - self.bins.to(x.device))\n"
        "model = Bins().to(device)\n",
        # a 0-dim attribute mixes with tensors on any device
        "import torch\ndevice = 'cuda'\nclass Scale(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.scale = torch.tensor(0.5)\n        self.proj = torch.nn.Linear(2, 2)\n"
        "    def forward(self, x):\n        return self.proj(x.float() * self.scale)\n"
        "model = Scale().to(device)\n",
        # moved tokenizer output (in place)
        "import torch\ntokenizer = AutoTokenizer.from_pretrained('m')\nmodel = AutoModel.from_pretrained('m').to('cuda')\n"
        "inputs = tokenizer('hi', return_tensors='pt')\ninputs.to('cuda')\nout = model(**inputs)\n",
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
        # a model parameter every caller passes on the device
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
        # after the move, in statement order
        Invalid(
            "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2)\nmodel = model.to(device)\n"
            "x = torch.zeros(1, 2)\ny = model(x)\n",
            fixed="import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 2)\nmodel = model.to(device)\n"
            "x = torch.zeros(1, 2, device=device)\ny = model(x)\n",
            line=5,
        ),
        # the target the output meets in the loss moves too: the input alone would fail on the next line
        Invalid(
            "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 1).to(device)\nx = torch.from_numpy(a).float()\n"
            "y = torch.from_numpy(b).float()\nloss = torch.nn.functional.mse_loss(model(x), y)\n",
            fixed="import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 1).to(device)\n"
            "x = torch.from_numpy(a).to(device).float()\ny = torch.from_numpy(b).to(device).float()\n"
            "loss = torch.nn.functional.mse_loss(model(x), y)\n",
            line=4,
        ),
        # ...but not when that target is also read on the host
        Invalid(
            "import torch\ndevice = 'cuda'\nmodel = torch.nn.Linear(2, 1).to(device)\nx = torch.from_numpy(a).float()\n"
            "y = torch.from_numpy(b).float()\nloss = torch.nn.functional.mse_loss(model(x), y)\nprint(y.numpy())\n",
            line=4,
        ),
        # a CPU tensor kept as a plain module attribute, combined with the input: a buffer moves with the module
        Invalid(
            "import torch\ndevice = 'cuda'\nclass Bins(torch.nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.bins = torch.arange(0, 10)\n        self.proj = torch.nn.Linear(10, 10)\n"
            "    def forward(self, x):\n        return self.proj(x.unsqueeze(-1) - self.bins)\n"
            "model = Bins().to(device)\n",
            fixed="import torch\ndevice = 'cuda'\nclass Bins(torch.nn.Module):\n    def __init__(self):\n"
            '        super().__init__()\n        self.register_buffer("bins", torch.arange(0, 10), persistent=False)\n'
            "        self.proj = torch.nn.Linear(10, 10)\n"
            "    def forward(self, x):\n        return self.proj(x.unsqueeze(-1) - self.bins)\n"
            "model = Bins().to(device)\n",
            line=6,
            unsafe=True,
        ),
        # ...not a statement of `__init__`'s own body after `super().__init__()`: no fix
        Invalid(
            "import torch\ndevice = 'cuda'\nclass Bins(torch.nn.Module):\n    def __init__(self, big):\n"
            "        super().__init__()\n        if big:\n"
            "            self.bins = torch.arange(0, 10).float()\n        self.proj = torch.nn.Linear(10, 10)\n"
            "    def forward(self, x):\n        return self.proj(x.unsqueeze(-1) - self.bins)\n"
            "model = Bins(True).to(device)\n",
            fixed=None,
            line=7,
            unsafe=True,
        ),
        # no device variable in scope: no fix
        Invalid(
            "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nx = torch.zeros(1, 2)\ny = model(x)\n",
            fixed=None,
            line=3,
        ),
    )

    @classmethod
    def device_in_play(cls, analysis: Analysis) -> bool:
        return analysis.places.accelerator_in_play() or bool(analysis.attributes.cpu_tensors())

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if a.places.silenced:
            return
        for kept in a.attributes.cpu_tensors():
            message = self.ATTRIBUTE_MESSAGE.format(name=kept.name, cls=kept.cls.name, method=kept.method)
            ctx.report(
                kept.creation.node,
                message,
                replacements=_buffer_fix(kept) if kept.fixable else None,
                fix_message=self.ATTRIBUTE_FIX_TITLE,
                applicability=Applicability.UNSAFE,
            )
        if not a.places.accelerator_in_play():
            return
        reported = set()
        for call in ctx.facts.calls:
            mc = a.values.model_call(call)
            if mc is None or not call.node.args:
                continue
            if a.places.model_place(mc.model, call.site) != DEVICE:
                continue  # on the CPU here (or we can't tell): its CPU inputs are right
            for arg in call.node.args:
                found = a.places.cpu_input(arg.value, call.site)
                if found is None or id(found[0].node) in reported:
                    continue
                creation, name = found
                reported.add(id(creation.node))
                message = self.MESSAGE.format(name=name) if name else self.INLINE_MESSAGE
                ctx.report(creation.node, message, replacements=self._complete_fix(a, creation))

    def _complete_fix(self, a: Analysis, creation: Call) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """The input's fix, and the same fix for every other tensor created on
        the CPU in that scope that meets a tensor on the device (the loss's
        target, the labels an accuracy compares with): moving the input alone
        would leave the script failing on the next line. None when one of them
        cannot be moved, or is later read on the host (`.numpy()`)."""
        fix = self._fix(a, creation)
        companions = _companions(a, creation)
        if fix is None or companions is None:
            return None
        for other in companions:
            more = self._fix(a, other)
            if more is None:
                return None
            fix.update(more)
        return fix

    @staticmethod
    def _fix(a: Analysis, creation: Call) -> Optional[Dict[cst.CSTNode, Replacement]]:
        device = a.places.device_var(creation.site)
        if device is None:
            return None
        node: cst.Call = creation.node
        q = creation.qualname or ""
        if q in ACCEPTS_DEVICE and not (
            q == "torch.normal"
            and creation.positional
            and not isinstance(creation.positional[0].value, (cst.Integer, cst.Float))
        ):
            return {node: with_keyword(node, "device", cst.Name(device), comment_follows(a, node))}
        if q in NO_DEVICE_KWARG or a.values.is_tokenizer_call(creation) or a.places.to_tensor_transform(creation):
            return {node: call_with_to(node, device)}
        return None


_KEYWORD_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _buffer_fix(kept: CpuAttribute) -> Dict[cst.CSTNode, Replacement]:
    """`self.NAME = FACTORY(...)` -> `self.register_buffer("NAME", FACTORY(...), persistent=False)`."""
    target = kept.assign.targets[0].target
    assert isinstance(target, cst.Attribute)
    call = cst.Call(
        func=target.with_changes(attr=cst.Name("register_buffer")),
        args=[
            cst.Arg(cst.SimpleString(f'"{kept.name}"')),
            cst.Arg(kept.assign.value),
            cst.Arg(cst.Name("False"), keyword=cst.Name("persistent"), equal=_KEYWORD_EQUAL),
        ],
    )
    return {kept.assign: cst.Expr(call)}


def _companions(a: Analysis, creation: Call) -> Optional[List[Call]]:
    """CPU creations bound to a name in `creation`'s scope (other than it) that
    meet a tensor on the device: in a loss, a torch op, arithmetic or a
    comparison. None when one of them is also read on the host (moving it
    would break that)."""
    scope = creation.site.scope
    found: Dict[int, Tuple[Call, bool, bool]] = {}
    for use in a.facts.uses:
        if use.site.scope is not scope or use.site.order <= creation.site.order:
            continue
        reaching = a.places.reaching(use.node.value, use.site)
        if (
            len(reaching) != 1
            or reaching[0].kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            or reaching[0].index is not None
        ):
            continue
        other = a.places.cpu_creation(reaching[0].value)
        if other is None or other is creation:
            continue
        first, meets, host = found.get(id(other.node), (other, False, False))
        found[id(other.node)] = (first, meets or _meets_device(a, use), host or _host_read(a, use))
    out = []
    for other, meets, host in found.values():
        if meets:
            if host:
                return None
            out.append(other)
    return out


def _meets_device(a: Analysis, use: NameUse) -> bool:
    """The name is combined with a tensor on the device here."""
    parent = use.site.parent
    site = use.site
    node = use.node
    if isinstance(parent, cst.Arg):
        call = a.facts.call_of_arg(parent)
        if call is None or not (a.values.is_loss_call(call) or (call.qualname or "").startswith("torch.")):
            return False
        return any(x is not parent and a.places.tensor_place(x.value, site) == DEVICE for x in call.node.args)
    if isinstance(parent, cst.BinaryOperation):
        other = parent.right if parent.left is node else parent.left
        return a.places.tensor_place(other, site) == DEVICE
    if isinstance(parent, cst.ComparisonTarget):
        parent = a.facts.parent_of(parent)
    if isinstance(parent, cst.Comparison):
        operands = [parent.left] + [c.comparator for c in parent.comparisons]
        return any(o is not node and a.places.tensor_place(o, site) == DEVICE for o in operands)
    return False


def _host_read(a: Analysis, use: NameUse) -> bool:
    """`x.numpy()` or a NumPy function of `x`: needs host memory."""
    parent = use.site.parent
    if isinstance(parent, cst.Attribute) and parent.value is use.node and parent.attr.value == "numpy":
        return True
    if isinstance(parent, cst.Arg):
        call = a.facts.call_of_arg(parent)
        return call is not None and (call.qualname or "").split(".")[0] in ("numpy", "np")
    return False
