"""TL104 create-then-move."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call, Function, ScopeKind, Site, dotted_name
from torchlint.analysis.helpers import root_name
from torchlint.analysis.knowledge import (
    FRESH_KEEPING_METHODS,
    NUMPY_ARRAY_FACTORIES,
    TENSOR_WRAPPERS,
    allocates_on_cpu,
    is_move_call,
)
from torchlint.analysis.place_kinds import ACCEL, CPU, DEVICE
from torchlint.analysis.vocabulary import (
    ACCEPTS_DEVICE,
    LEGACY_TENSOR_TYPES,
    RANDOM_FACTORIES,
)
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import comment_follows, with_keyword

# `.to()` keywords that only matter for a copy; allocating in place makes them moot.
_MOOT_KWARGS = frozenset({"non_blocking", "copy", "memory_format"})


# Calls that seed a random number generator, a local `torch.Generator()` too: a program that makes
# its random numbers reproducible. Not `loaders.seeds_rngs` (the run's global generators, which
# worker processes change): a dataset seeding a generator per item stays reproducible with workers.
_SEEDING = frozenset({"manual_seed", "seed", "seed_everything", "set_seed", "manual_seed_all"})


def _seeds_its_rng(ctx: RuleContext) -> bool:
    """The file seeds a random number generator (`torch.manual_seed(0)`, `np.random.seed`,
    `pl.seed_everything`, a `torch.Generator().manual_seed(...)`)."""
    return any((call.method or (call.qualname or "").rsplit(".", 1)[-1]) in _SEEDING for call in ctx.facts.calls)


def _step(head: str, body: str) -> str:
    """`body` (indented lines) inside a training loop, after `head`."""
    return head + "for x in loader:\n" + body + "    model(x, h).sum().backward()\n"


_NUMPY_MESSAGE = (
    "Array is made with NumPy on the host every step and copied to the GPU by the CUDA tensor type; "
    "create it with torch on the device (`torch.randn(..., device=...)`, `torch.ones(..., device=...)`)"
)
_EQ = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


class CreateThenMove(Rule):
    """
    ## What it does
    Flags a tensor that an allocating factory creates on the CPU and that is
    then moved to an accelerator: `torch.randn(n, d).to(device)`,
    `torch.zeros(n).cuda()`, `torch.arange(n).expand(b, n).to(device)`,
    `nn.Parameter(torch.zeros(n)).to(device)`, a factory result whose only use
    is its move, or one handed to a same-file helper that moves it. Also a
    call moved to an accelerator of a function (of this file or another
    project file) whose every `return` hands back such a fresh CPU tensor:
    `get_points(n, 3).to(device)`, reported at the call. And, every step of
    a loop, an array NumPy makes from sizes on the host and hands to a CUDA
    tensor type (`Tensor(np.random.normal(0, 1, (b, d)))` with `Tensor =
    torch.cuda.FloatTensor if cuda else torch.FloatTensor`), reported at the
    NumPy call, without a fix.

    Not flagged: data constructors (`torch.tensor(host_list)`,
    `torch.from_numpy(array)`), where the host-to-device copy is inherent;
    factories given an explicit `device=` or a `generator=` (created on the
    CPU on purpose, e.g. for reproducible random streams); unit tests, the
    `__main__` smoke block of a model module, and export or benchmark code.
    Nor an allocation that runs once for certain in a file whose loop does
    the per-step work (set-up before the loop, a helper the file calls once
    from such code): it costs nothing per step. In a file with no such loop
    (a snippet, a one-off script) the code is the work, and is reported.

    ## Why is this bad?
    The tensor is first allocated and filled in host memory, then copied over
    PCIe to the device: an extra allocation, an extra host-to-device copy and,
    for random factories, CPU work the GPU could do much faster. Inside a
    training loop or a model's `forward` the copy runs every iteration.
    Factories accept `device=` and create the tensor where it is needed.

    ## Example
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    num_layers, hidden = 2, 256
    for x, y in loader:
        h0 = torch.zeros(num_layers, x.size(0), hidden).to(device)
        loss = criterion(model(x.to(device), h0), y.to(device))
        loss.backward()
    ```

    ## Use instead
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    num_layers, hidden = 2, 256
    for x, y in loader:
        h0 = torch.zeros(num_layers, x.size(0), hidden, device=device)
        loss = criterion(model(x.to(device), h0), y.to(device))
        loss.backward()
    ```

    ## Fix safety
    Offered when the move follows the factory directly (or through
    shape/dtype methods such as `.expand()` or `.long()`) and only sets the
    device (and optionally the dtype, when the factory sets none): `device=`
    (and `dtype=`) goes into the factory call after its last argument,
    keeping its layout, and the `.to()`/`.cuda()` goes. Safe for
    deterministic factories (`zeros`, `ones`, `full`, `empty`, `arange`,
    `linspace`, `eye`): the values are the same. Unsafe for random factories
    (`randn`, `rand`, `randint`, `randperm`, `normal`): they then draw from
    the device's generator, so a seeded run gives other (equally distributed)
    numbers than before, e.g. a different data split. Factories given a
    `generator=` are not flagged at all, because a CPU generator must stay
    with CPU tensors. No fix is offered where the factory does not take
    `device=` (`torch.normal` with tensor arguments, legacy
    `torch.FloatTensor(n)`), where the move passes anything else (`copy=`,
    `**kwargs`, `.cuda(i)` with a non-literal `i`), for moves through a name
    or a helper (the factory of another file's function is named in the
    message), or for `nn.Parameter` wrappers. Sampling ops that take a
    tensor (`torch.bernoulli`, `torch.multinomial`, `torch.poisson`) are not
    allocating factories and are not flagged.

    ## References
    - [PyTorch: Tensor creation ops](https://pytorch.org/docs/stable/torch.html#creation-ops)
    - [PyTorch performance tuning guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL104"
    NAME = "create-then-move"
    MESSAGE = "Tensor is created on the CPU and then moved; create it on the device directly"
    FIX_TITLE = "Pass `device=` to the factory"
    APPLICABILITY = Applicability.SAFE
    QUIET_IN_TESTS = True

    VALID = (
        "import torch\nx = torch.zeros(3, device='cuda')\n",
        # a dtype conversion, not a move
        "import torch\nx = torch.zeros(3).to(torch.float16)\n",
        # data constructors: the host-to-device copy is inherent
        "import torch\nx = torch.from_numpy(a).to('cuda')\n",
        "import torch\nx = torch.tensor([1, 2, 3]).to('cuda')\n",
        "import torch\nx = torch.LongTensor([[1, 2]]).cuda()\n",
        # created, used on the CPU, then moved
        "import torch\ny = torch.zeros(3)\nprint(y)\nz = y.to('cuda')\n",
        "import torch\nx = torch.randn_like(y).to('cuda')\n",
        # sampling from a tensor is not an allocating factory
        "import torch\nprob = torch.ones(10)\nx = torch.multinomial(prob, 1).to('cuda')\n",
        "def randn(*a): ...\nx = randn(3).to('cuda')\n",
        "import torch\nx = torch.zeros(3).to(other)\n",
        # created on the CPU on purpose: an explicit device, a CPU generator
        "import torch\nx = torch.randn(3, device='cpu').to('cuda')\n",
        "import torch\ng = torch.Generator().manual_seed(0)\nx = torch.randn(3, generator=g).to('cuda')\n",
        # moved to the CPU
        "import torch\nx = torch.zeros(3).to('cpu')\n",
        # once, for certain, before the loop that does the work: set-up, a helper called once
        "import torch\ndevice = torch.device('cuda')\nh0 = torch.zeros(1, 10).to(device)\n"
        "for x, y in loader:\n    model(x.to(device), h0).sum().backward()\n",
        "import torch\ndef plot(n):\n    ldj = torch.zeros(n).to('cuda')\n    show(ldj)\nplot(8)\n"
        "for x in loader:\n    model(x.cuda()).sum().backward()\n",
        # read on the CPU before it is moved
        "import torch\nfor x in loader:\n    h = torch.zeros(4)\n    h[0] = 1\n    h = h.cuda()\n    model(x, h).sum().backward()\n",
        # a unit test
        "import torch\ndef test_shapes():\n    x = torch.zeros(2, 3).cuda()\n    assert x.shape == (2, 3)\n",
        # the smoke block of a model module
        "import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n"
        "if __name__ == '__main__':\n    print(Net()(torch.zeros(1, 3).cuda()).shape)\n",
    )
    INVALID = (
        # a function nobody in the file calls (another file may, every step): reported, no fix
        Invalid("import torch\ndef plot(n):\n    ldj = torch.zeros(n).to('cuda')\n    show(ldj)\n", line=3),
        # a one-off allocation in a file with no loop (the snippet is the work): reported, no fix
        Invalid("import torch\ndef plot(n):\n    ldj = torch.zeros(n).to('cuda')\n    show(ldj)\nplot(8)\n", line=3),
        # a script's module-level code, with no loop, is its work: fixed
        Invalid(
            "import torch\ndevice = torch.device('cuda')\nh0 = torch.zeros(1, 10).to(device)\n",
            fixed="import torch\ndevice = torch.device('cuda')\nh0 = torch.zeros(1, 10, device=device)\n",
            line=3,
        ),
        # `x = torch.zeros(n)` then `x = x.cuda()`, nothing reading the CPU tensor in between
        Invalid(
            _step("import torch\n", "    h = torch.zeros(4)\n    if use_cuda:\n        h = h.cuda()\n"),
            line=3,
        ),
        # a fresh tensor scaled by the step counter (`(torch.ones(n) * i).long()`): reported, no fix
        Invalid(
            "import torch\nfor i in range(1000):\n    t = (torch.ones(8) * i).long().to('cuda')\n"
            "    model(x, t).sum().backward()\n",
            line=3,
        ),
        Invalid(
            _step("import torch\ndevice = torch.device('cuda')\n", "    h = torch.zeros(1, 10).to(device)\n"),
            fixed=_step("import torch\ndevice = torch.device('cuda')\n", "    h = torch.zeros(1, 10, device=device)\n"),
            line=4,
        ),
        Invalid(
            _step("import torch as T\n", "    h = T.zeros(4).cuda()\n"),
            fixed=_step("import torch as T\n", '    h = T.zeros(4, device="cuda")\n'),
            line=3,
        ),
        Invalid(
            _step("import torch\nfrom torch import ones\n", "    h = ones(2, 2).to('cuda', non_blocking=True)\n"),
            fixed=_step("import torch\nfrom torch import ones\n", "    h = ones(2, 2, device='cuda')\n"),
            line=4,
        ),
        Invalid(
            _step("import torch\n", "    h = torch.zeros(2).to(dev, dtype=torch.float16)\n"),
            fixed=_step("import torch\n", "    h = torch.zeros(2, device=dev, dtype=torch.float16)\n"),
            line=3,
        ),
        # in a model's forward: every step
        Invalid(
            "import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def forward(self, x):\n"
            "        pos = torch.arange(x.size(1)).expand(x.size(0), -1).to('cuda')\n        return x + pos\n",
            fixed="import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def forward(self, x):\n"
            "        pos = torch.arange(x.size(1), device='cuda').expand(x.size(0), -1)\n        return x + pos\n",
            line=5,
        ),
        # a random factory drawn every step: unsafe (the device's generator gives other numbers)
        Invalid(
            _step("import torch\ndevice = 'cuda'\n", "    z = torch.randn(8, 100).to(device)\n"),
            fixed=_step("import torch\ndevice = 'cuda'\n", "    z = torch.randn(8, 100, device=device)\n"),
            line=4,
            unsafe=True,
        ),
        # ... in a seeded program: reported, no fix (reproducible numbers would change)
        Invalid(
            _step("import torch\ntorch.manual_seed(0)\ndevice = 'cuda'\n", "    z = torch.randn(8, 100).to(device)\n"),
            line=5,
        ),
        # a call over several lines keeps its layout
        Invalid(
            _step("import torch\ndevice = 'cuda'\n", "    h = torch.zeros(\n        (2, 3)\n    ).to(device)\n"),
            fixed=_step(
                "import torch\ndevice = 'cuda'\n",
                "    h = torch.zeros(\n        (2, 3),\n        device=device\n    )\n",
            ),
            line=4,
        ),
        # the factory result's only use is its move, in a helper called every step
        Invalid(
            _step(
                "import torch\ndef mask(n, device):\n    m = torch.tril(torch.ones(n, n))\n    return m.to(device)\n",
                "    h = mask(8, 'cuda')\n",
            ),
            line=3,
        ),
        # a same-file helper moves it
        Invalid(
            _step(
                "import torch\ndef cuda_variable(t):\n    return t.cuda()\n",
                "    h = cuda_variable(torch.zeros(2, 4))\n",
            ),
            line=5,
        ),
        # bernoulli takes no device=: reported, no fix
        Invalid(_step("import torch\n", "    m = torch.bernoulli(torch.full((3,), 0.5)).cuda()\n"), line=3),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        reported = set()

        def report(
            factory: Call,
            replacements: Optional[Dict[cst.CSTNode, Replacement]] = None,
            message: Optional[str] = None,
            move: Optional[Call] = None,
        ) -> None:
            if id(factory.node) in reported or a.roles.excluded(factory.site):
                return
            if a.cost.set_up(factory.site) and (move is None or a.cost.set_up(move.site)):
                return  # set-up before the file's loop (allocated and moved once) costs nothing per step
            reported.add(id(factory.node))
            random = (factory.qualname or "") in RANDOM_FACTORIES
            if random and (not a.cost.per_step(factory.site) or _seeds_its_rng(ctx)):
                # Drawing on the device uses the device's generator: other (equally distributed)
                # numbers. Worth an unsafe fix for per-step data; not where the file seeds its
                # random numbers for reproducibility, nor for a one-off draw.
                replacements = None
            elif factory.site.scope.kind != ScopeKind.MODULE and not a.cost.per_step(factory.site):
                # A one-off allocation in a function (a plotting helper, one decoding call): the edit
                # would gain nothing measurable. A script's own module-level code is its work: fixed.
                replacements = None
            ctx.report(
                factory.node,
                message,
                replacements=replacements,
                applicability=Applicability.UNSAFE if random and replacements else None,
            )

        for call in ctx.facts.calls:
            if not is_move_call(call) or a.places.move_device(call) != ACCEL:
                continue
            if call.method == "to" and a.places.move_target(call) is None:
                continue
            factory, direct = self._factory_under(ctx, call.receiver, call.site)
            if factory is not None:
                fix = self._fix(ctx, call, factory) if direct else None
                report(factory, fix)
                continue
            # `m = torch.ones(...)` ... `m.to(device)`: the factory's only use is its move.
            if isinstance(call.receiver, cst.Name):
                factory = self._only_use_is_move(ctx, call) or self._moved_before_use(ctx, call)
                if factory is not None:
                    report(factory, move=call)
                    continue
            # `helper(...).to(device)` where the helper returns a fresh CPU factory result.
            if isinstance(call.receiver, cst.Call):
                inner = ctx.facts.call_for(call.receiver)
                fn = a.helpers.function(inner) if inner is not None else None
                if inner is not None and fn is not None and self._returns_factory(ctx, fn):
                    report(inner)
                elif inner is not None and fn is None:
                    # ... a function of another project file (no fix: the factory is there)
                    message = self._project_allocation(ctx, inner)
                    if message is not None:
                        report(inner, message=message)
        # `Tensor(np.random.normal(0, 1, shape))` with `Tensor = torch.cuda.FloatTensor if cuda else ...`:
        # an array drawn on the host every step, then copied to the GPU.
        for call in ctx.facts.calls:
            if len(call.node.args) != 1 or call.node.args[0].keyword is not None or call.node.args[0].star:
                continue
            data = call.node.args[0].value
            array = ctx.facts.call_for(data) if isinstance(data, cst.Call) else None
            if array is None or array.qualname not in NUMPY_ARRAY_FACTORIES or not a.cost.per_step(call.site):
                continue
            if a.places.cuda_type_constructor(call):
                report(array, message=_NUMPY_MESSAGE)
        # `torch.ones(1, 1).type_as(t)` with `t` on the device: a move, spelled as a type change.
        for call in ctx.facts.calls:
            if call.method != "type_as" or len(call.node.args) != 1 or call.receiver is None:
                continue
            if a.places.tensor_place(call.node.args[0].value, call.site) == DEVICE:
                factory, _ = self._factory_under(ctx, call.receiver, call.site)
                if factory is not None:
                    report(factory)
        # A factory handed straight to a same-file helper that moves that argument.
        for call in ctx.facts.calls:
            fn = a.helpers.function(call)
            if fn is None:
                continue
            moved = a.helpers.summary(fn).moves
            if not moved:
                continue
            for param in moved:
                arg = a.values.argument_for(call, fn, param)
                if arg is None:
                    continue
                factory, _ = self._factory_under(ctx, arg, call.site)
                if factory is None and isinstance(arg, cst.Name) and _returns_argument(ctx, fn, param):
                    # `h = torch.zeros(...)` whose only use is being handed to a helper that
                    # returns it moved (`return t.cuda()`), not one that moves it to do its own work
                    factory = self._only_use(ctx, arg, call.site)
                if factory is not None and self._helper_moves_to_accel(ctx, fn, param):
                    report(factory)

    # -- finding the factory ---------------------------------------------------------------

    def _factory_under(
        self, ctx: RuleContext, expr: Optional[cst.BaseExpression], site: Site
    ) -> Tuple[Optional[Call], bool]:
        """The allocating factory call `expr` is (through shape/dtype methods and
        Parameter/Variable wrappers), and whether the move can absorb it (no
        wrapper on the way)."""
        direct = True
        for _ in range(8):
            if isinstance(expr, cst.BinaryOperation):
                # `(torch.ones(n) * i).long()`: a fresh CPU tensor scaled by a number
                expr = _scaled_operand(ctx, expr, site)
                direct = False
            if not isinstance(expr, cst.Call):
                return None, False
            call = ctx.facts.call_for(expr)
            if call is None:
                return None, False
            if call.qualname in TENSOR_WRAPPERS and call.positional:
                direct = False
                expr = call.positional[0].value
                continue
            if (
                call.receiver is not None
                and isinstance(call.receiver, (cst.Call, cst.BinaryOperation))
                and call.method in FRESH_KEEPING_METHODS
            ):
                expr = call.receiver
                continue
            if self._is_allocating(ctx, call):
                return call, direct
            q = call.qualname or ""
            if (
                q.startswith("torch.")
                and q.count(".") == 1
                and call.positional
                and isinstance(call.positional[0].value, cst.Call)
                and call.keyword("device") is None
            ):
                direct = False  # `torch.tril(torch.ones(n, n))`: an op on a fresh CPU tensor
                expr = call.positional[0].value
                continue
            return None, False
        return None, False

    @staticmethod
    def _is_allocating(ctx: RuleContext, call: Call) -> bool:
        q = call.qualname or ""
        if call.keyword("device") is not None or call.keyword("generator") is not None or call.has_star_kwargs:
            return False  # placed on purpose (a CPU generator must stay with CPU tensors)
        if ctx.analysis.places.under_device_context(call.site):
            return False
        if allocates_on_cpu(q, [a.keyword.value for a in call.node.args if a.keyword is not None]):
            return True  # (`bernoulli`, `multinomial`, `poisson` sample from a tensor: not allocating factories)
        if q.startswith("torch.") and q.rsplit(".", 1)[-1] in LEGACY_TENSOR_TYPES and not q.startswith("torch.cuda."):
            # `torch.FloatTensor(3, 4)` allocates; `torch.FloatTensor(data)` copies host data.
            return bool(call.positional) and _sizes_only(ctx, call)
        if q.startswith("torch.") and q.endswith("_like") and call.positional:
            return ctx.analysis.places.tensor_place(call.positional[0].value, call.site) == CPU
        return False

    def _only_use_is_move(self, ctx: RuleContext, move: Call) -> Optional[Call]:
        return self._only_use(ctx, move.receiver, move.site)  # type: ignore[arg-type]

    def _only_use(self, ctx: RuleContext, use: cst.Name, site: Site) -> Optional[Call]:
        """The factory bound once to `use`'s name, in `site`'s scope, when `use` is its only read."""
        name = use.value
        scope = site.scope
        bindings = ctx.facts.scoped_bindings(name, scope)
        if (
            len(bindings) != 1
            or bindings[0].kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            or bindings[0].index is not None
        ):
            return None
        b = bindings[0]
        uses = ctx.facts.scoped_uses(name, scope)
        if len(uses) != 1 or uses[0].node is not use or b.site.order > site.order:
            return None
        factory, _ = self._factory_under(ctx, b.value, b.site)
        return factory

    def _moved_before_use(self, ctx: RuleContext, move: Call) -> Optional[Call]:
        """`x = torch.zeros(n)` ... `x = x.cuda()` (under `if use_cuda:` too): the
        factory bound to the move's receiver, when the move rebinds the name and
        nothing reads the CPU tensor in between."""
        receiver = move.receiver
        assert isinstance(receiver, cst.Name)
        name, scope = receiver.value, move.site.scope
        rebinds = any(
            b.kind == BindingKind.ASSIGN and b.index is None and b.value is move.node
            for b in ctx.facts.scoped_bindings(name, scope)
        )
        reaching = ctx.facts.reaching(name, move.site)
        if not rebinds or len(reaching) != 1:
            return None
        b = reaching[0]
        if b.kind != BindingKind.ASSIGN or b.index is not None or b.site.scope is not scope:
            return None
        for use in ctx.facts.scoped_uses(name, scope):
            if use.node is not receiver and b.site.order <= use.site.order <= move.site.order:
                return None
        factory, _ = self._factory_under(ctx, b.value, b.site)
        return factory

    def _returns_factory(self, ctx: RuleContext, fn: Function) -> bool:
        returns = ctx.facts.returns_of(fn)
        if not returns:
            return False
        for r, s in returns:
            value = r.value
            if isinstance(value, cst.Name):
                bs = [b for b in ctx.facts.bindings_of(value.value) if b.site.scope is s.scope]
                if len(bs) != 1 or bs[0].value is None or bs[0].index is not None:
                    return False
                value = bs[0].value
            factory, _ = self._factory_under(ctx, value, s)
            if factory is None:
                return False
        return True

    @staticmethod
    def _project_allocation(ctx: RuleContext, call: Call) -> Optional[str]:
        """The message for `call` of an imported function of another project file
        that returns, in every `return`, a tensor it allocates on the CPU (the
        project index's `allocates`); None when it does not, or is not known to."""
        project = ctx.analysis.values.project
        if project is None or call.qualname is None:
            return None
        if not ctx.facts.calls_import(call):
            return None  # a parameter or local that shadows the import
        factories = project.allocates(call.qualname)
        if not factories:
            return None
        module, _, name = call.qualname.rpartition(".")
        module = module.lstrip(".")
        made = ", ".join(f"`{f}`" for f in dict.fromkeys(factories))
        where = f" in `{module}`" if module else ""
        return (
            f"Tensor is created on the CPU by `{name}()` ({made}{where}) and then moved; "
            "create it on the device directly (`device=` in that factory)"
        )

    @staticmethod
    def _helper_moves_to_accel(ctx: RuleContext, fn: Function, param: str) -> bool:
        """The helper moves `param` to an accelerator (not to a device it is handed)."""
        for call in ctx.analysis.helpers.calls_in(fn):
            if is_move_call(call) and dotted_name(call.receiver) == param:
                return ctx.analysis.places.move_device(call) == ACCEL
        return False

    # -- fix -------------------------------------------------------------------------------

    @staticmethod
    def _fix(ctx: RuleContext, move: Call, factory: Call) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """Replace the move call by its receiver with `device=` (and `dtype=`) in
        the factory; None when the move does more than that."""
        q = factory.qualname or ""
        if q not in ACCEPTS_DEVICE or (
            q == "torch.normal"
            and factory.positional
            and not isinstance(factory.positional[0].value, (cst.Integer, cst.Float))
        ):
            return None
        device = ctx.analysis.places.move_target(move)
        if device is None:
            return None
        extra: List[cst.Arg] = []
        for i, arg in enumerate(move.node.args):
            if arg.star:
                return None
            name = arg.keyword.value if arg.keyword else None
            if name == "device" or (name is None and i == 0 and move.method == "to"):
                continue
            if name in _MOOT_KWARGS:
                continue
            if name == "dtype" or (name is None and i == 1 and ctx.analysis.places.is_dtype_expr(arg.value)):
                if move.receiver is not factory.node or factory.keyword("dtype") is not None:
                    return None
                extra.append(cst.Arg(arg.value, keyword=cst.Name("dtype"), equal=_EQ))
                continue
            return None  # something we don't understand: no fix
        if move.method == "cuda" and move.positional and not isinstance(move.positional[0].value, cst.Integer):
            return None
        new_factory = with_keyword(factory.node, "device", device, comment_follows(ctx, move.node))
        for arg in extra:
            new_factory = with_keyword(new_factory, "dtype", arg.value)
        if move.receiver is None or move.receiver is factory.node:
            return {move.node: new_factory}
        # Through methods: the chain stays, the move goes.
        return {move.node: _replace_inner(move.receiver, factory.node, new_factory)}


_SIZE_NAME = re.compile(r"(size|len|dim|num|count|width|height|channel|hidden|layer|^n$|^n_|_n$|^[a-z]$)", re.I)
# Calls whose result is a size.
_SIZE_CALLS = frozenset({"len", "int", "min", "max", "round", "sum", "abs"})


def _returns_argument(ctx: RuleContext, fn: Function, param: str) -> bool:
    """Every `return` of the helper gives back `param` (moved, or wrapped: `Variable(t.cuda())`)."""

    def gives_back(value: Optional[cst.BaseExpression]) -> bool:
        if root_name(value) == param:
            return True  # `t`, `t.cuda()`, `t.to(device)`
        if isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("Variable") and value.args:
            return root_name(value.args[0].value) == param  # `Variable(t.cuda())`: the legacy wrapper
        return False

    returns = ctx.facts.returns_of(fn)
    return bool(returns) and all(gives_back(r.value) for r, _ in returns)


def _sizes_only(ctx: RuleContext, call: Call) -> bool:
    """`torch.FloatTensor(n, 3)`: every argument is a size (an int literal, an
    arithmetic expression, or a name that reads as one), not host data."""
    for a in call.positional:
        value = a.value
        if isinstance(value, cst.Integer):
            continue
        if isinstance(value, cst.BinaryOperation):
            if any(isinstance(side, (cst.List, cst.Tuple, cst.ListComp)) for side in (value.left, value.right)):
                return False  # `[[start]] * k`: host data
            continue
        if _size_call(value):
            continue
        name = dotted_name(value)
        if name is None or not _SIZE_NAME.search(name.rsplit(".", 1)[-1]):
            return False
        if isinstance(value, cst.Name) and not _bound_as_size(ctx, value, call.site):
            return False
    return True


def _bound_as_size(ctx: RuleContext, name: cst.Name, site: Site) -> bool:
    """No binding of `name` that reaches `site` holds data: each is a parameter,
    a number, arithmetic, or a call that returns a size (`len(x)`, `x.size(0)`,
    `x.shape[0]`); an element unpacked from a call (`states, actions =
    memory.sample(n)`) or any other call's result may be host data."""
    for b in ctx.facts.reaching(name.value, site):
        value = b.value
        if b.kind in (BindingKind.PARAM, BindingKind.FOR) or value is None:
            continue
        if b.index is not None:
            return False  # unpacked from a tuple: `a, b = f()`
        if isinstance(value, (cst.Integer, cst.BinaryOperation, cst.Attribute, cst.Subscript, cst.Name)):
            continue
        if _size_call(value):
            continue
        return False
    return True


def _size_call(value: cst.BaseExpression) -> bool:
    """`len(x)`, `int(n)`, `x.size(0)`, `x.numel()`: a call that returns a size."""
    if not isinstance(value, cst.Call):
        return False
    func = dotted_name(value.func) or ""
    return func in _SIZE_CALLS or func.rsplit(".", 1)[-1] in ("size", "numel", "dim")


def _scaled_operand(ctx: RuleContext, expr: cst.BinaryOperation, site: Site) -> Optional[cst.BaseExpression]:
    """The call of `call * k`, `k + call`, where the other operand is a number, or
    a name not known to hold a tensor on the device (a loop counter, a scale:
    the product of a fresh CPU tensor is on the CPU); None otherwise."""
    for call, other in ((expr.left, expr.right), (expr.right, expr.left)):
        if not isinstance(call, cst.Call):
            continue
        if isinstance(other, (cst.Integer, cst.Float)):
            return call
        if isinstance(other, (cst.Name, cst.Attribute)) and ctx.analysis.places.tensor_place(other, site) != DEVICE:
            return call
    return None


def _replace_inner(expr: cst.BaseExpression, old: cst.CSTNode, new: cst.CSTNode) -> cst.BaseExpression:
    """`expr` (a method chain) with its innermost receiver `old` replaced by `new`."""
    if expr is old:
        return new  # type: ignore[return-value]
    assert isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
    return expr.with_changes(func=expr.func.with_changes(value=_replace_inner(expr.func.value, old, new)))
