"""TL101 model-not-moved."""
from __future__ import annotations

from torchlint.analysis.placement import call_with_to, placement
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext


class ModelNotMoved(Rule):
    """
    ## What it does
    Flags an `nn.Module` instance (a subclass defined in the file, a
    `torch.nn` layer, a `torchvision.models` / `timm.create_model` /
    `*.from_pretrained(...)` model) that is called or trained in a file that
    uses a device, but is never moved: no `.to(...)`, `.cuda()`, `device=` at
    construction or `.to_empty(...)`, and it is never handed to anything that
    could place it (an unknown function, `accelerator.prepare`,
    `DataParallel`, `DistributedDataParallel`, `fabric.setup`).

    ## Why is this bad?
    The model's parameters stay in host memory and every forward and backward
    runs on the CPU while the GPU the script selected sits idle; when the
    inputs were moved, the first forward fails with a device mismatch instead.

    ## Example
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net()
    out = model(x.to(device))
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    out = model(x.to(device))
    ```

    ## Fix safety
    Safe, and offered only where a device variable is in scope at the
    construction: `.to(device)` is appended to it. Code that relied on the
    model's parameters living on the CPU (for example `.numpy()` on them) must
    then move them back explicitly.

    ## References
    - [PyTorch: `nn.Module.to`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.to)
    - [PyTorch tutorial: saving and loading models across devices](https://pytorch.org/tutorials/beginner/saving_loading_models.html#saving-loading-model-across-devices)
    """

    CODE = "TL101"
    NAME = "model-not-moved"
    MESSAGE = "Model `{name}` is used but never moved to the device; append `.to(device)` to its construction"
    FIX_TITLE = "Append `.to(device)` to the model's construction"
    APPLICABILITY = Applicability.SAFE
    REQUIRES_DEVICE = True

    VALID = (
        # moved later, in place
        "import torch\nfrom torch import nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(2, 2)\n"
        "model.to(device)\ny = model(x)\n",
        # rebinding through a move
        "import torch.nn as nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2)\nmodel = model.to(device)\ny = model(x)\n",
        # moved only in a branch still counts
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\nif torch.cuda.is_available():\n"
        "    model.cuda()\ny = model(x)\n",
        # device= at construction
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2, device=device)\ny = model(x)\n",
        # handed to something that could place it
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2)\n"
        "model = torch.nn.DataParallel(model)\ny = model(x)\n",
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2)\nplace(model)\ny = model(x)\n",
        # accelerate places it
        "import torch\nfrom torch import nn\nfrom accelerate import Accelerator\nacc = Accelerator()\n"
        "model = nn.Linear(2, 2)\nmodel = acc.prepare(model)\ny = model(torch.zeros(2, device='cuda'))\n",
        # a loss module has nothing to move
        "import torch\nfrom torch import nn\ndevice = 'cuda'\ncrit = nn.MSELoss()\nl = crit(a.to(device), b.to(device))\n",
        # returned by a builder: the caller places it
        "import torch\nfrom torch import nn\ndef build(device):\n    model = nn.Linear(2, 2)\n    return model\n"
        "model = build('cuda')\ny = model(x)\n",
        # never used
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2)\n",
        # no device in play at all (TL100's business)
        "import torch\nfrom torch import nn\ndef f(x):\n    model = nn.Linear(2, 2)\n    return model(x).sum()\n",
        # moved in another function
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ndef setup(device):\n    model.to(device)\n"
        "def run(x):\n    return model(x)\n",
    )
    INVALID = (
        Invalid(
            "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(4, 2)\n"
            "out = model(x.to(device))\n",
            fixed="import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(4, 2).to(device)\n"
            "out = model(x.to(device))\n",
            line=4,
        ),
        Invalid(
            "import torch as T\nclass Net(T.nn.Module):\n    pass\ndevice = 'cuda'\nnet = Net()\nnet.train()\n"
            "for x in xs:\n    net(x.to(device)).sum().backward()\n",
            fixed="import torch as T\nclass Net(T.nn.Module):\n    pass\ndevice = 'cuda'\nnet = Net().to(device)\nnet.train()\n"
            "for x in xs:\n    net(x.to(device)).sum().backward()\n",
            line=5,
        ),
        # no device variable in scope: reported, no fix
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(4, 2)\nout = model(torch.zeros(4, device='cuda'))\n",
            fixed=None,
            line=3,
        ),
        Invalid(
            "from transformers import AutoModel\nimport torch\ndef main(device):\n"
            "    model = AutoModel.from_pretrained('m').eval()\n    return model(ids.to(device))\n",
            fixed="from transformers import AutoModel\nimport torch\ndef main(device):\n"
            "    model = AutoModel.from_pretrained('m').eval().to(device)\n    return model(ids.to(device))\n",
            line=4,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        pl = placement(ctx)
        if pl.silenced:
            return
        for b in ctx.facts.bindings:
            if "." in b.name:
                continue  # attributes (self.model): moved by their owner, silent
            info = pl.model_construction(b)
            if info is None or info[1]:
                continue
            ctor, _ = info
            placed, called, _ = pl.model_uses(b)
            if placed or not called or not pl.device_near(b.site):
                continue
            device = pl.device_var(b.site)
            replacements = {b.value: call_with_to(b.value, device)} if device else None
            ctx.report(ctor.node, self.MESSAGE.format(name=b.name), replacements=replacements)
