"""TL101 model-not-moved."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, List, Optional, Set

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Part, Scope, ScopeKind, Site, dotted_name
from torchlint.analysis.place_kinds import ACCEL, CPU, DEVICE, Event, EventKind
from torchlint.analysis.value_kinds import MODULE
from torchlint.analysis.values import bound_value
from torchlint.analysis.vocabulary import MODEL_NAME, MOVE_METHODS, STATELESS_LAYER
from torchlint.analysis.walk import descendants
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext
from torchlint.rules.nodes import call_with_to

if TYPE_CHECKING:
    from torchlint.analysis import Analysis


class ModelNotMoved(Rule):
    """
    ## What it does
    Flags a model (an instance of a same-file `nn.Module` subclass, a
    `torch.nn` layer, a `torchvision.models` / `timm.create_model` /
    `*.from_pretrained(...)` model) that is never moved and that runs either
    on inputs that *are* on the device (the forward fails with a device
    mismatch), or in a training loop or an inference pass over data while a
    device variable is at hand (the GPU sits idle).

    Never moved means: no `.to(...)`, `.cuda()`, `device=` at construction or
    `.to_empty(...)` anywhere in the file, and it is not handed to anything
    that could place it (an unknown function, `accelerator.prepare`,
    `DataParallel`, `DistributedDataParallel`, `fabric.setup`).

    Also flagged: a model that the file moves only under a condition that has
    nothing to do with the device (`if args.word_vectors: model.to(device)`),
    with no move on the other path, and that then trains or runs over data:
    on that other path it stays on the CPU. This holds for instances of
    imported classes too, since the file itself shows that the model needs
    moving.

    Also flagged, at `self.model = model`: a plain class that keeps a model
    argument and runs it in a loop on inputs it moves to the device, without
    ever moving, wrapping or handing on the model itself, when every call of
    the class in the project hands it a model that the caller builds (a
    project module class that builds layers and places nothing, a `torch.nn`
    layer, a torchvision or timm model) and never moves, wraps or hands to
    anything else. A run that does not read the callers says nothing.

    Not flagged: an instance of a class imported from another module that is
    otherwise never moved (its constructor, which we cannot see, may place
    its own layers), a module whose constructor places its own layers, a
    module fed `x.cpu()` on purpose (an equivalence check against the CPU),
    forward-only demos and smoke blocks in the second case, and test code
    (test files, test classes and their helpers) in either. A model made by
    `copy.deepcopy` or by a library wrapper handed a moved base model
    (`PeftModel.from_pretrained(base, path)`) is where its base is.

    ## Why is this bad?
    The model's parameters stay in host memory: either the first forward on
    device inputs raises "Expected all tensors to be on the same device", or
    every forward and backward runs on the CPU while the GPU the script
    selected sits idle.

    ## Example
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    x = torch.randn(32, 128, device=device)
    out = model(x)
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    x = torch.randn(32, 128, device=device)
    out = model(x)
    ```

    ## Fix safety
    Safe, and offered only for a model built in this file (a same-file
    class, a `torch.nn` layer, a pretrained loader) with a device variable in
    scope at the construction, when its input is already on the device (the
    forward fails today with a device mismatch) or every input follows the
    model (`x.to(next(model.parameters()).device)`): `.to(device)` is
    appended to the construction. Where an input is still on the CPU, moving the model
    alone would break the forward, so no fix is offered; move the model and
    its inputs together. An instance of a class imported from another
    module gets no fix either (we cannot see what it holds).

    ## References
    - [PyTorch: `nn.Module.to`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.to)
    - [PyTorch tutorial: saving and loading models across devices](https://pytorch.org/tutorials/beginner/saving_loading_models.html#saving-loading-model-across-devices)
    """

    CODE = "TL101"
    NAME = "model-not-moved"
    MESSAGE = "Model `{name}` is used without being moved to the device"
    TITLE = "A model is used without being moved to the device"
    FIX_TITLE = "Append `.to(device)` to the model's construction"
    APPLICABILITY = Applicability.SAFE
    QUIET_IN_TESTS = True
    REQUIRES_DEVICE = True

    _LOOP = "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n"
    VALID = (
        # a layer with no parameters or buffers runs where its input is
        "import torch\nfrom torch import nn\ndevice = torch.device('cuda')\nupsample = nn.UpsamplingBilinear2d((299, 299))\n"
        "for x in loader:\n    y = upsample(x.to(device))\n",
        # moved later, in place
        "import torch\nfrom torch import nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(2, 2)\n"
        "model.to(device)\ny = model(x.to(device))\n",
        # rebinding through a move
        "import torch.nn as nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2)\nmodel = model.to(device)\ny = model(x.to(device))\n",
        # moved only on the GPU path still counts
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\nif torch.cuda.is_available():\n"
        "    model.cuda()\ny = model(x.cuda())\n",
        # device= at construction
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2, device=device)\ny = model(x.to(device))\n",
        # handed to something that could place it
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2)\n"
        "model = torch.nn.DataParallel(model)\ny = model(x.to(device))\n",
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nmodel = nn.Linear(2, 2)\nplace(model)\ny = model(x.to(device))\n",
        # accelerate places it
        "import torch\nfrom torch import nn\nfrom accelerate import Accelerator\nacc = Accelerator()\n"
        "model = nn.Linear(2, 2)\nmodel = acc.prepare(model)\ny = model(torch.zeros(2, device='cuda'))\n",
        # a loss module has nothing to move
        "import torch\nfrom torch import nn\ndevice = 'cuda'\ncrit = nn.MSELoss()\nl = crit(a.to(device), b.to(device))\n",
        # a forward-only demo on CPU inputs in a file that uses a GPU elsewhere
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nprobe = nn.Linear(2, 2)\nprint(probe(torch.zeros(1, 2)).shape)\n",
        # deliberately on the CPU: an equivalence check against CPU tensors
        "import torch\nfrom torch import nn\ndevice = 'cuda'\nref = nn.Linear(2, 2)\n"
        "for x, y in loader:\n    expected = ref(x.cpu())\n    loss = crit(expected, y)\n    loss.backward()\n",
        # its constructor places its own layers
        "import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.layers = [nn.Linear(2, 2).cuda()]\nnet = Net()\ny = net(x.cuda())\n",
        # a unit test in a file that uses a device
        "import torch\nfrom torch import nn\ndevice = 'cuda'\ndef test_shapes():\n    model = nn.Linear(2, 2)\n"
        "    assert model(torch.zeros(1, 2)).shape == (1, 2)\n",
        # moved in another function
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ndef setup(device):\n    model.to(device)\n"
        "def run(x):\n    return model(x.cuda())\n",
    )
    INVALID = (
        # its inputs are on the device: the forward fails
        Invalid(
            "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(4, 2)\n"
            "out = model(x.to(device))\n",
            fixed="import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(4, 2).to(device)\n"
            "out = model(x.to(device))\n",
            line=4,
        ),
        Invalid(
            "from transformers import AutoModel\nimport torch\ndef main(device):\n"
            "    model = AutoModel.from_pretrained('m').eval()\n    return model(ids.to(device))\n",
            fixed="from transformers import AutoModel\nimport torch\ndef main(device):\n"
            "    model = AutoModel.from_pretrained('m').eval().to(device)\n    return model(ids.to(device))\n",
            line=4,
        ),
        # an attribute model fed tokenizer output on the device
        Invalid(
            "import torch\nfrom transformers import AutoModel, AutoTokenizer\ndevice = 'cuda'\nclass Scorer:\n"
            "    def __init__(self):\n        self.tok = AutoTokenizer.from_pretrained('m')\n"
            "        self.model = AutoModel.from_pretrained('m')\n    def score(self, texts):\n"
            "        inputs = self.tok(texts, return_tensors='pt').to(device)\n        return self.model(**inputs)\n",
            fixed="import torch\nfrom transformers import AutoModel, AutoTokenizer\ndevice = 'cuda'\nclass Scorer:\n"
            "    def __init__(self):\n        self.tok = AutoTokenizer.from_pretrained('m')\n"
            "        self.model = AutoModel.from_pretrained('m').to(device)\n    def score(self, texts):\n"
            "        inputs = self.tok(texts, return_tensors='pt').to(device)\n        return self.model(**inputs)\n",
            line=7,
        ),
        # training on the CPU with a GPU at hand: reported, no fix (the batches would stay behind)
        Invalid(
            "import torch as T\nclass Net(T.nn.Module):\n    pass\ndevice = T.device('cuda')\nmodel = Net()\n" + _LOOP,
            line=5,
        ),
        # moved only on a path that has nothing to do with the device
        Invalid(
            "import torch\nfrom mypkg.model import Classifier\ndevice = torch.device('cuda')\n"
            "model = Classifier(cfg)\nif args.word_vectors:\n    model.embed.weight.data.copy_(vectors)\n"
            "    model.to(device)\nfor x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n",
            line=4,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if a.places.silenced:
            return
        events = a.places._model_events()
        forwards: Optional[Dict[str, List[Call]]] = None
        for b in ctx.facts.bindings:
            self._kept_argument(ctx, b)
            seen = self._construction(a, b)
            ctor = seen or self._imported_construction(a, b)
            if ctor is None:
                continue
            later = [
                e for e in events.get(b.name, []) if e.site.order > b.site.order or e.site.scope is not b.site.scope
            ]
            if later:
                condition = self._moved_only_if(ctx, b, later)
                if condition is not None and not a.roles.excluded(ctor.site):
                    ctx.report(
                        ctor.node,
                        f"Model `{b.name}` is moved to the device only when `{condition}` holds: "
                        "on the other path it runs on the CPU",
                    )
                continue  # moved, or handed on, somewhere: not "never moved"
            if seen is None:
                continue  # an imported class may place its own layers: we cannot see it
            crash = speed = False
            follow = True  # every input follows the model's own device (or is on the device already)
            if forwards is None:
                forwards = self._forwards_by_model(a, ctx.facts.calls)
            for call in forwards.get(b.name, []):
                mc = a.values.model_call(call)
                if mc is None or call.site.order < b.site.order:
                    continue
                if a.places.model_place(mc.model, call.site) != CPU:
                    continue
                if self._deliberately_on_cpu(a, call):
                    continue
                follow = follow and all(self._follows(a, arg.value, call.site, b.name) for arg in call.node.args)
                if any(a.places.tensor_place(arg.value, call.site) == DEVICE for arg in call.node.args):
                    crash = True
                    break
                if a.roles.does_work(call.site) and a.places.device_var(b.site) is not None:
                    speed = True
            if not (crash or speed):
                continue
            device = a.places.device_var(b.site)
            fix: Optional[Dict[cst.CSTNode, cst.CSTNode]] = (
                {b.value: call_with_to(b.value, device)}
                if b.value is not None and (crash or follow) and device
                else None
            )
            message = self.MESSAGE.format(name=b.name) + (
                ", but its inputs are on the device: the forward fails with a device mismatch" if crash else ""
            )
            ctx.report(ctor.node, message, replacements=fix)

    @staticmethod
    def _forwards_by_model(a: Analysis, calls: List[Call]) -> Dict[str, List[Call]]:
        """The file's forward calls, in source order, by the dotted name of their model."""
        out: Dict[str, List[Call]] = {}
        for call in calls:
            mc = a.values.model_call(call)
            name = dotted_name(mc.model) if mc is not None else None
            if name is not None:
                out.setdefault(name, []).append(call)
        return out

    @staticmethod
    def _kept_argument(ctx: RuleContext, b: Binding) -> None:
        """`self.model = model` in the `__init__` of a plain module-level class
        that never moves, wraps or hands on either, and then runs the model in a
        loop on inputs it moved to the device: reported when every project call of
        the class hands it a module built and left on the CPU (the project index's
        `unmoved_callers`): the first batch fails with a device mismatch."""
        a = ctx.analysis
        project = a.project
        value, scope = b.value, b.site.scope
        if (
            project is None
            or not a.places.accelerator_in_play()
            or b.kind is not BindingKind.ASSIGN
            or b.index is not None
            or not isinstance(value, cst.Name)
        ):
            return
        owner, attr = b.name.split(".", 1) if "." in b.name else ("", "")
        if owner != "self" or "." in attr or scope.kind != ScopeKind.FUNCTION or scope.name != "__init__":
            return
        cls = scope.parent
        if cls is None or cls.kind != ScopeKind.CLASS or cls.parent is None or cls.parent.kind != ScopeKind.MODULE:
            return
        if cls.name in a.values.module_classes() or len(ctx.facts.bindings_of(b.name)) != 1:
            return
        param = value.value
        bound = ctx.facts.visible_bindings(param, scope)
        if len(bound) != 1 or bound[0].kind is not BindingKind.PARAM or bound[0].site.scope is not scope:
            return
        events = a.places._model_events()
        if any(e.site.stmt is not b.site.stmt for e in events.within(param, scope)):
            return  # moved, wrapped or handed on in `__init__`
        for use in ctx.facts.uses_of("self"):
            in_class = any(s is cls for s in use.site.scope.chain())
            if in_class and not (isinstance(use.site.parent, cst.Attribute) and use.site.parent.value is use.node):
                return  # `self` handed on or returned: its model may be placed there
        later = events.get(b.name, [])
        for call in ctx.facts.calls:
            mc = a.values.model_call(call)
            if mc is None or dotted_name(mc.model) != b.name or call.site.loop is None:
                continue
            if not any(a.places.tensor_place(arg.value, call.site) == DEVICE for arg in call.node.args):
                continue
            if any(ModelNotMoved._follows_a_value(a, arg.value, call.site, cls) for arg in call.node.args):
                return  # the inputs go where a value is (`next(model.parameters()).device`): maybe the CPU
            if not all(
                e.kind is EventKind.ESCAPE and e.site.scope is call.site.scope and e.site.order > call.site.order
                for e in later
            ):
                continue  # moved, or handed on before its first forward
            callers = project.unmoved_callers(project.local(cls.name), param)
            if callers:
                ctx.report(
                    b.target,
                    f"Model `{b.name}` is used without being moved to the device, but its inputs are on the "
                    f"device: every caller hands `{cls.name}` a model it never moves ({', '.join(callers)})",
                )
            return

    @staticmethod
    def _follows_a_value(a: Analysis, arg: cst.BaseExpression, site: Site, cls: Scope) -> bool:
        """`arg` is moved (`x.to(dev)`, directly or through the name it is bound
        to) to a device read from a value: `dev` is bound from a `.device` or a
        `.parameters()` call (`next(model.parameters()).device`), or is a
        property of the class; it goes where that value is."""
        values: List[cst.BaseExpression] = [arg]
        name = dotted_name(arg)
        if name is not None:
            values = [v for v in (bound_value(b) for b in a.values.bindings_for(name, site)) if v is not None]
        for value in values:
            call = a.facts.call_for(value) if isinstance(value, cst.Call) else None
            target = a.places.move_target(call) if call is not None else None
            device = dotted_name(target) if target is not None else None
            if device is None:
                continue
            if device.startswith("self.") and a.facts.function_named_in(device[len("self.") :], cls) is not None:
                return True  # a property (or method) of the class
            for bound in a.values.bindings_for(device, call.site) if call is not None else []:
                found = bound_value(bound)
                if found is not None and any(
                    isinstance(n, cst.Attribute) and n.attr.value in ("device", "parameters")
                    for n in descendants(found)
                ):
                    return True
        return False

    @staticmethod
    def _moved_only_if(ctx: RuleContext, b: Binding, later: List[Event]) -> Optional[str]:
        """The test of the one `if` (with no `else`, about something other than
        the device) under which every later move of the model sits, when the model
        then trains or runs over data on both paths; None otherwise."""
        a = ctx.analysis
        if b.site.scope.kind != ScopeKind.MODULE or not a.places.accelerator_in_play():
            return None
        owner = None
        for e in later:
            if e.kind is not EventKind.MOVE or e.place != DEVICE or e.site.scope is not b.site.scope:
                return None
            ifs = [o for o, part in e.site.region if isinstance(o, cst.If) and part is Part.BODY]
            if not ifs or (owner is not None and ifs[-1] is not owner):
                return None
            owner = ifs[-1]
        if owner is None or owner.orelse is not None:
            return None
        test = ctx.code(owner.test)
        if _DEVICE_WORDS.search(test):
            return None  # `if use_cuda:`, `if not args.cpu:`: a device choice
        owner_site = ctx.facts.site_of_statement(owner)
        if owner_site is None or owner_site.region != b.site.region:
            return None  # the construction itself is conditional
        for call in ctx.facts.calls:
            mc = a.values.model_call(call)
            if mc is None or dotted_name(mc.model) != b.name or call.site.order < owner_site.order:
                continue
            if any(o is owner for o, _ in call.site.region) or not a.roles.does_work(call.site):
                continue  # under the move's own condition, or not real work
            loop = a.roles.work_loop(call.site)
            if loop is not None and loop.scope is b.site.scope:
                return test
        return None

    @staticmethod
    def _follows(a: Analysis, expr: cst.BaseExpression, site: Site, model: str) -> bool:
        """The input is on the device, or moved to wherever the model is
        (`x.to(next(model.parameters()).device)`): moving the model takes it along."""
        if a.places.tensor_place(expr, site) == DEVICE:
            return True
        value = expr
        if isinstance(expr, cst.Name):
            reaching = a.places.reaching(expr.value, site)
            if len(reaching) != 1 or reaching[0].value is None or reaching[0].index is not None:
                return False
            value = reaching[0].value
        call = a.facts.call_for(value) if isinstance(value, cst.Call) else None
        if call is None or call.method != "to" or not call.node.args:
            return False
        target = call.node.args[0].value
        return model in _names(target)

    @staticmethod
    def _construction(a: Analysis, b: Binding) -> Optional[Call]:
        """For `model = Net(...)` (a module that is built, not loaded or wrapped,
        and has parameters): the construction call."""
        if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.index is not None or b.value is None:
            return None
        if a.places._value_place(b.value, b.site) != CPU:
            return None
        ctor, _ = a.places.unwrap(b.value)
        if ctor is None or a.values.call_kind(ctor) != MODULE or ctor.method in MOVE_METHODS:
            return None
        last = (ctor.qualname or dotted_name(ctor.node.func) or "").rsplit(".", 1)[-1]
        if STATELESS_LAYER.match(last) or last.endswith("Loss"):
            return None
        return ctor

    @staticmethod
    def _imported_construction(a: Analysis, b: Binding) -> Optional[Call]:
        """`model = Imported(...)`: an instance of a class from another module of the
        project, named like a model and given no device (we can't see the class:
        only the file's own conditional move tells that it needs moving)."""
        if (
            b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            or b.index is not None
            or not isinstance(b.value, cst.Call)
        ):
            return None
        if "." in b.name or not MODEL_NAME.search(b.name):
            return None
        call = a.facts.call_for(b.value)
        if call is None or call.method is not None or not isinstance(call.node.func, cst.Name):
            return None
        name = call.node.func.value
        q = call.qualname or ""
        if not name[:1].isupper() or q.startswith(("torch", "transformers", "timm")) or name in a.facts.classes:
            return None
        if not any(x.kind == BindingKind.IMPORT for x in a.facts.bindings_of(name)):
            return None
        for arg in call.node.args:
            if arg.keyword is not None and "device" in arg.keyword.value:
                return None
            if arg.star == "**" and not _dict_without_device(a, arg.value, call.site):
                return None
            if arg.star == "*" or (
                arg.keyword is None
                and a.places.device_of(arg.value, call.site) == ACCEL
                and not isinstance(arg.value, cst.Integer)
            ):
                return None
        return call

    @staticmethod
    def _deliberately_on_cpu(a: Analysis, call: Call) -> bool:
        """`layer(x.cpu())`, `layer(x).cuda()`, or a device variable that is the
        CPU: a model kept on the CPU on purpose."""
        for arg in call.node.args:
            if isinstance(arg.value, cst.Call):
                inner = a.facts.call_for(arg.value)
                if inner is not None and inner.method == "cpu":
                    return True
        site = call.site
        for c in a.helpers.calls_in_scope(site.scope):
            if c.method in ("to", "cuda") and c.receiver is call.node:
                return True
        return False


_DEVICE_WORDS = re.compile(r"cuda|gpu|cpu|device|mps|xla|accelerat|distributed|rank|half|fp16|amp", re.I)


def _dict_without_device(a: Analysis, expr: cst.BaseExpression, site: Site) -> bool:
    """`**params` where `params` is bound once to a dict literal with no key that
    mentions a device."""
    if not isinstance(expr, cst.Name):
        return False
    bs = a.facts.visible_bindings(expr.value, site.scope)
    if len(bs) != 1 or not isinstance(bs[0].value, cst.Dict):
        return False
    for el in bs[0].value.elements:
        if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
            return False
        if "device" in str(el.key.evaluated_value):
            return False
    return True


def _names(expr: cst.CSTNode) -> Set[str]:
    return {node.value for node in descendants(expr) if isinstance(node, cst.Name)}
