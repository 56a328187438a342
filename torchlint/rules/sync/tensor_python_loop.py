"""TL402 tensor-python-loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, AbstractSet, Iterable, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call, Loop, NameUse, Site, dotted_name
from torchlint.analysis.knowledge import HOST_COPIES, Effect, doing
from torchlint.analysis.place_kinds import CPU
from torchlint.analysis.value_kinds import MODULE
from torchlint.analysis.walk import descendants
from torchlint.rules.base import Invalid, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_NOT_WORK_ATTRS = frozenset({"shape", "device", "dtype", "ndim", "requires_grad", "is_cuda"})
# Copying a row to the host to hand it to Python code (decoding tokens, building
# references) is the point of such loops, not per-element tensor work.
_HOST_COPIES = HOST_COPIES  # tolist, cpu, numpy
# Operations whose work scales with another tensor: an element that drives one is a
# group in a dispatch (a direction, an expert), not a small per-element step.
_BIG_OPS = doing(Effect.BIG_OP)


class TensorPythonLoop(Rule):
    """
    ## What it does
    Flags a Python loop that walks a tensor element by element and does
    small work on each element: a host read (`.item()`, `int(x)`,
    `float(x)`, `bool(x)`, a comparison in an `if`), a scalar op, indexing,
    or a small tensor op. It recognises `for x in t:`, `for i, x in
    enumerate(t)`, `for a, x in zip(xs, t)`, index loops (`for i in
    range(len(t))`, `range(t.size(0))`, or any `range(n)` whose body reads
    `t[i]` of a tensor, also through `label = labels[i]`) and comprehensions
    (`[int(i) for i in t]`, `[i for i, w in enumerate(t) if w != end]`).

    Not flagged: loops whose body runs a model per element, itself or
    through a same-file helper (stepping a recurrence through time,
    dispatching groups of rows to experts, scoring one image against a
    batch of captions: the per-element work is large), loops over lists or tuples of tensors,
    comprehensions that only move or cast each element (`[x.to(device) for x in xs]`,
    `[p.float() for p in preds]`: the pieces of a collated batch, a head's per-level outputs),
    `parameters()`, `ModuleList`s, `split`/`chunk` pieces and dict items,
    elements used only to compute an index or slice into something else
    (host-side gathering from a NumPy array), membership tests in a set or
    dict (a tensor hashes by identity: nothing is read), loops that draw or
    plot each element (matplotlib, PIL: the host values are the point), loops
    a training or evaluation loop runs only now and then (under `if i == 0:`
    on its counter, keeping the first batch's examples, or `if step % N == 0:`),
    unit tests and smoke blocks. The iterated value must be known to be a tensor.
    Tensors the file makes on the CPU count only where the file uses an
    accelerator and the loop may run every step (a per-sample transform): in
    a script that never selects a device, or run once per run (a kernel
    computed once for a plot), a loop over them holds no device up.

    ## Why is this bad?
    Every element becomes its own tiny tensor and every operation its own
    kernel launch, or its own host round trip: thousands of launches or
    syncs where one vectorised operation over the whole tensor would do.

    ## Example
    ```python
    import torch

    predicted = torch.randint(0, 10, (1000,), device="cuda")
    labels = torch.randint(0, 10, (1000,), device="cuda")
    correct = 0
    for i in range(labels.size(0)):
        if predicted[i] == labels[i]:
            correct += 1
    print(correct / labels.size(0))
    ```

    ## Use instead
    ```python
    import torch

    predicted = torch.randint(0, 10, (1000,), device="cuda")
    labels = torch.randint(0, 10, (1000,), device="cuda")
    correct = (predicted == labels).sum().item()
    print(correct / labels.size(0))
    ```

    ## Fix safety
    No fix: vectorising needs to know what the loop computes; the message
    suggests it.

    ## References
    - [PyTorch broadcasting semantics](https://pytorch.org/docs/stable/notes/broadcasting.html)
    """

    CODE = "TL402"
    ACCELERATOR_COST = True
    NAME = "tensor-python-loop"
    MESSAGE = "Python loop over a tensor's elements does tensor work per element; vectorize it"

    VALID = (
        "import torch\nxs = [torch.randn(3), torch.randn(3)]\nfor x in xs:\n    y = x.sum()\n",
        # a loader's whole batch is a tuple of tensors
        "import torch\nfor batch in loader:\n    batch = [t.cuda() for t in batch]\n    model(*batch).sum().backward()\n",
        # a same-file function that returns a list of tensors
        "import torch\ndef maps(x):\n    out = []\n    for layer in layers:\n        out.append(layer(x))\n    return out\n"
        "for x, y in loader:\n    for m in maps(x.cuda()):\n        show(m.mean())\n    loss.backward()\n",
        "import torch\nfor name, p in model.named_parameters():\n    p.grad.zero_()\n",
        "import torch\nt = torch.randn(4, 3)\nfor row in t:\n    rows.append(row)\n",
        "import torch\nd = {'a': torch.randn(2)}\nfor k, v in d.items():\n    v.mul_(2)\n",
        "import torch\nt = torch.randn(4)\nfor i in range(len(t)):\n    print(i)\n",
        # a recurrence through time: a model per step
        "import torch\nfrom torch import nn\ncell = nn.GRUCell(4, 8)\nx = torch.randn(10, 2, 4)\nh = torch.zeros(2, 8)\n"
        "for x_t in x:\n    h = cell(x_t, h)\n",
        # host-side gathering: CPU indices used only to slice a NumPy array
        "import torch\nix = torch.randint(100, (8,))\nbatch = torch.stack([torch.from_numpy(data[i:i + 16]) for i in ix])\n",
        # split pieces
        "import torch\nx = torch.randn(8, 4)\nfor piece in x.split(2):\n    out.append(piece.sum())\n",
        # the first batch's predictions kept for a plot: once per pass, not every step
        "import torch\nfor i, (x, y) in enumerate(loader):\n    p = model(x.cuda()).argmax(1)\n    if i == 0:\n"
        "        for j in range(len(p)):\n            shown.append(p[j].item())\n    p.sum().backward()\n",
    )
    INVALID = (
        Invalid("import torch\nt = torch.randn(8, 3, device='cuda')\nfor row in t:\n    total = row.sum()\n", line=3),
        Invalid(
            "import torch\nt = torch.randn(8, 3, device='cuda')\nfor i in range(t.shape[0]):\n    y = torch.relu(t[i])\n",
            line=3,
        ),
        Invalid(
            "import torch\ny = torch.arange(10, device='cuda')\ntext = ''.join([itos[int(i)] for i in y])\n", line=3
        ),
        Invalid(
            "import torch\nfor x, y in loader:\n    scores = model(x.cuda()).softmax(1)\n    for row in scores:\n"
            "        total = row.max()\n    scores.sum().backward()\n",
            line=4,
        ),
        Invalid(
            "import torch\nfor x, y in loader:\n    t = model(x.cuda()).softmax(1)\n    for i in range(t.shape[0]):\n"
            "        y = torch.relu(t[i])\n    t.sum().backward()\n",
            line=4,
        ),
        # in a same-file helper the training loop calls every step
        Invalid(
            "import torch\ndef f(batch):\n    for item in batch:\n        out.append(item.mean())\n"
            "for x, y in loader:\n    t = model(x.cuda()).softmax(1)\n    f(t)\n    t.sum().backward()\n",
            line=3,
        ),
        # per-element host reads through names bound to `t[i]`
        Invalid(
            "import torch\nfor x, y in loader:\n    predicted = model(x.cuda()).argmax(1)\n    labels = y.cuda()\n"
            "    for i in range(batch_size):\n        label = labels[i]\n        if label == predicted[i]:\n"
            "            correct += 1\n    loss.backward()\n",
            line=5,
        ),
        # in a model's forward: every step
        Invalid(
            "import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def forward(self, x):\n"
            "        t = torch.randn(8, 3, device='cuda')\n        for row in t:\n            x = x + row.sum()\n"
            "        return x\n",
            line=6,
        ),
        # a comprehension converting every element, every step
        Invalid(
            "import torch\nfor x, y in loader:\n    out = model(x.cuda()).argmax(1)\n"
            "    text = ''.join([itos[int(i)] for i in out])\n    loss.backward()\n",
            line=4,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        for loop in ctx.facts.loops:
            node = loop.node
            if not isinstance(node, cst.For):
                continue
            site = ctx.facts.site_of_statement(node)
            if site is None or a.roles.excluded(site) or a.roles.in_model_setup(site):
                continue  # (building a model: its `__init__` runs once)
            if _now_and_then(a, site):
                continue  # the first batch's examples kept for a plot (`if i == 0:`), every N steps
            if any(a.values.writes_out(c) for c in a.loops.calls_in(loop)):
                continue  # each element is shown or written out (matplotlib, PIL, imageio): host I/O, not tensor work
            found = self._elements(ctx, node.iter, node.target, site)
            if found is None:
                continue
            tensor, names, indexed = found
            if not self._on_accelerator(ctx, node.iter, names if indexed else None, site):
                continue  # CPU tensors (or a file that uses no accelerator): no device work per element
            if _handful(a, node.iter, site):
                continue  # a few known elements (`torch.arange(3)`): nothing worth vectorizing
            if any(self._runs_model(a, c) for c in a.loops.calls_in(loop)):
                continue  # a model per element: a recurrence, a dispatch over groups, a synthesis pass
            if self._drives_big_op(ctx, loop):
                continue  # a matmul per element: a dispatch over a few groups
            uses = [
                u
                for u in ctx.facts.uses
                if u.node.value in names
                and u.site.scope is loop.scope
                and loop.contains(u.site.order)
                and u.site.order > loop.order
                and not a.loops.occasional_guard(u.site, loop)  # a few error prints are not element work
            ]
            if _selects_groups(ctx, uses, names):
                continue  # `labels == c`: each iteration works on a whole group, masked
            if self._small_work(ctx, uses, tensor if indexed else None):
                if indexed:
                    read = sorted({dotted_name(e.value) or ctx.code(e.value) for e in _elements_read(ctx, uses)})
                    what = "index loop reads " + ", ".join(f"`{n}`" for n in read or [tensor]) + " element by element"
                else:
                    what = f"loop over the elements of tensor `{tensor}`"
                ctx.report(
                    node,
                    f"Python {what} and does tensor work (or a host read) per "
                    "element; vectorize it (one op over the whole tensor)",
                )
        self._comprehensions(ctx)

    @staticmethod
    def _runs_model(a: Analysis, call: Call) -> bool:
        """A model's forward, any method of a module (`G.synthesis(w)`,
        `encoder.encode(x)`), or a same-file helper that runs one
        (`score(model, x[i])`): large work per element, not a small op."""
        if a.values.model_call(call) is not None:
            return True
        fn = a.helpers.function(call)
        if fn is not None and a.helpers.summary(fn).forwards:
            return True
        return call.receiver is not None and a.values.expr_kind(call.receiver, call.site) == MODULE

    @staticmethod
    def _drives_big_op(ctx: RuleContext, loop: Loop) -> bool:
        """The loop body multiplies whole matrices (`x @ w[i]`, `torch.matmul`)."""
        if any(c.qualname in _BIG_OPS for c in ctx.analysis.loops.calls_in(loop)):
            return True
        for use in ctx.facts.uses:
            if use.site.scope is loop.scope and loop.contains(use.site.order):
                parent = use.site.parent
                if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.MatrixMultiply):
                    return True
        return False

    def _comprehensions(self, ctx: RuleContext) -> None:
        """`[int(i) for i in t]`, `[i for i, w in enumerate(t) if w != end]`."""
        a = ctx.analysis
        seen = set()
        for b in ctx.facts.bindings:
            if b.kind != BindingKind.COMPREHENSION or b.value is None:
                continue
            comp_for = ctx.facts.parent_of(b.target)
            while comp_for is not None and not isinstance(comp_for, cst.CompFor):
                comp_for = ctx.facts.parent_of(comp_for)
            comp = ctx.facts.parent_of(comp_for) if comp_for is not None else None
            if (
                comp_for is None
                or not isinstance(comp, (cst.ListComp, cst.GeneratorExp, cst.SetComp))
                or id(comp) in seen
            ):
                continue
            if a.roles.excluded(b.site) or a.roles.in_model_setup(b.site) or _now_and_then(a, b.site):
                continue
            found = self._elements(ctx, comp_for.iter, comp_for.target, b.site)
            if found is None or b.name not in found[1] or _handful(a, comp_for.iter, b.site):
                continue
            tensor, names, _ = found
            if not self._on_accelerator(ctx, comp_for.iter, None, b.site):
                continue  # CPU tensors (or a file that uses no accelerator): no device work per element
            if a.values.converts_each(comp, names):
                continue  # `[x.to(device) for x in xs]`: moving the pieces of a batch, which is a list
            if a.values.yields_python(comp, names) and _on_host(a, comp_for.iter, b.site):
                continue  # ragged token lists, modules picked by a mask: from rows already on the host
            uses = [u for u in ctx.facts.uses if u.node.value in names and _inside(ctx, u.node, comp)]
            if self._small_work(ctx, uses, None):
                seen.add(id(comp))
                ctx.report(
                    comp,
                    f"Comprehension over the elements of tensor `{tensor}` reads or computes per "
                    "element; vectorize it (one op over the whole tensor)",
                )

    def _elements(
        self, ctx: RuleContext, it: cst.BaseExpression, target: cst.BaseExpression, site: Site
    ) -> Optional[Tuple[str, Set[str], bool]]:
        """(tensor code, element names, indexed?) when the loop walks a tensor's elements."""
        a = ctx.analysis
        if self._is_element_tensor(a, it, site) and isinstance(target, cst.Name):
            return ctx.code(it), {target.value}, False
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and not ctx.facts.bindings_of(it.func.value):
            fname = it.func.value
            args = [x.value for x in it.args if x.keyword is None and not x.star]
            if (
                fname == "enumerate"
                and len(args) == 1
                and isinstance(target, cst.Tuple)
                and len(target.elements) == 2
                and isinstance(target.elements[1].value, cst.Name)
                and self._is_element_tensor(a, args[0], site)
            ):
                return ctx.code(args[0]), {target.elements[1].value.value}, False
            if fname == "zip" and isinstance(target, cst.Tuple) and len(target.elements) == len(args):
                pairs = [
                    (el.value, arg)
                    for el, arg in zip(target.elements, args)
                    if isinstance(el.value, cst.Name) and self._is_element_tensor(a, arg, site)
                ]
                if pairs:
                    return ctx.code(pairs[0][1]), {el.value for el, _ in pairs}, False
            if fname == "range" and len(args) == 1 and isinstance(target, cst.Name):
                # `range(len(t))` / `range(t.size(0))`, or any `range(n)` whose body indexes
                # tensors with the loop variable (`labels[i]`, `correct[i]`).
                tensor = self._range_over(a, args[0], site)
                if tensor is not None or self._indexes_tensor(ctx, target.value, site):
                    return tensor or ctx.code(args[0]), {target.value}, True
        return None

    @staticmethod
    def _on_accelerator(ctx: RuleContext, it: cst.BaseExpression, index_names: Optional[Set[str]], site: Site) -> bool:
        """The loop's per-element work can hold up an accelerator: the file uses one,
        or the walked tensor (`t` of `for x in t`, of `enumerate(t)`, of a zip's
        tensors, of `range(len(t))`, or, for an index loop, a `t[i]` it reads)
        is not one this file made on the CPU."""
        a = ctx.analysis
        walked = [it]
        if (
            isinstance(it, cst.Call)
            and isinstance(it.func, cst.Name)
            and it.func.value in ("zip", "enumerate", "range")
        ):
            walked = [x.value for x in it.args if x.keyword is None and not x.star]
            if it.func.value == "range" and walked:
                arg = walked[0]
                if isinstance(arg, cst.Call) and isinstance(arg.func, cst.Attribute) and arg.func.attr.value == "size":
                    walked = [arg.func.value]
                elif isinstance(arg, cst.Call) and arg.args:
                    walked = [arg.args[0].value]  # `len(t)`
                elif isinstance(arg, cst.Subscript) and isinstance(arg.value, cst.Attribute):
                    walked = [arg.value.value]  # `t.shape[0]`
        places = [(e, site) for e in walked if a.places.is_tensor(e, site)]
        loop = a.loops.loop_for(site.stmt) if site.stmt is not None else None
        if index_names is not None and loop is not None:
            places += [
                (sub.value, u.site)
                for name in index_names
                for u in ctx.facts.uses_of(name)
                if u.site.scope is site.scope and loop.order < u.site.order <= loop.end_order
                for sub in [_tensor_element(ctx, u)]
                if sub is not None
            ]
        # Tensors this file makes on the CPU, in a file that never selects a device: no
        # accelerator waits. (Where one does, a CPU loop may still hold every step up: a
        # per-sample transform. A tensor of unknown place may come from a caller's device.)
        if not places or not all(a.places.tensor_place(e, s) == CPU for e, s in places):
            return True
        # CPU tensors in a file that uses an accelerator: a loop that holds every step up
        # (a per-sample transform) counts; one that runs once per run (a plot's kernel) does not.
        return a.places.accelerator_in_play() and not a.cost.runs_once(site)

    @staticmethod
    def _indexes_tensor(ctx: RuleContext, var: str, site: Site) -> bool:
        loop = ctx.analysis.loops.loop_for(site.stmt) if site.stmt is not None else None
        if loop is None:
            return False
        return any(
            _tensor_element(ctx, use) is not None
            for use in ctx.facts.uses_of(var)
            if use.site.scope is site.scope and loop.order < use.site.order <= loop.end_order
        )

    @staticmethod
    def _is_element_tensor(a: Analysis, expr: cst.BaseExpression, site: Site) -> bool:
        """A tensor (not a model's output, which may be a tuple, nor split chunks,
        nor a container of tensors: a loader's whole batch, what a same-file
        function returns as a list, tuple or dict)."""
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("split", "chunk", "unbind", "parameters", "named_parameters")
        ):
            return False
        if a.values.is_container(expr, site):
            return False
        return a.places.is_tensor(expr, site) and not a.places.is_forward_output(expr, site)

    @staticmethod
    def _range_over(a: Analysis, arg: cst.BaseExpression, site: Site) -> Optional[str]:
        """`range(len(t))`, `range(t.shape[0])`, `range(t.size(0))`: the name `t`."""
        t = None
        if (
            isinstance(arg, cst.Call)
            and isinstance(arg.func, cst.Name)
            and arg.func.value == "len"
            and len(arg.args) == 1
        ):
            t = arg.args[0].value
            if a.places.is_forward_output(t, site):
                return None  # `len()` of a model output: it may be a tuple
        elif (
            isinstance(arg, cst.Subscript) and isinstance(arg.value, cst.Attribute) and arg.value.attr.value == "shape"
        ):
            t = arg.value.value
        elif isinstance(arg, cst.Call) and isinstance(arg.func, cst.Attribute) and arg.func.attr.value == "size":
            t = arg.func.value
        name = dotted_name(t) if t is not None else None
        if name is None or not a.places.is_tensor(t, site):
            return None
        return name

    @staticmethod
    def _small_work(ctx: RuleContext, uses: Sequence[NameUse], tensor: Optional[str]) -> bool:
        """Some use of an element does a host read or a small tensor op. For an
        index loop the elements are the loop's `t[i]` subscripts of tensors, and
        the names bound to them (`label = labels[i]`)."""
        if tensor is None:
            return any(_is_element_work(ctx, use.node) for use in uses)
        derived = set()
        for use in uses:
            sub = _tensor_element(ctx, use)
            if sub is None:
                continue
            if _is_element_work(ctx, sub):
                return True
            stmt = use.site.stmt
            if (
                isinstance(stmt, cst.Assign)
                and stmt.value is sub
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0].target, cst.Name)
            ):
                derived.add((stmt.targets[0].target.value, use.site.order))
        for name, order in derived:
            for use in ctx.facts.uses_of(name):
                if use.site.order > order and use.site.scope is uses[0].site.scope and _is_element_work(ctx, use.node):
                    return True
        return False


# At most this many elements is "a handful": a loop over them costs nothing worth a rewrite.
_HANDFUL = 8


def _handful(a: Analysis, expr: cst.BaseExpression, site: Site, depth: int = 0) -> bool:
    """`expr` has a few elements known from the code: `range(3)`,
    `torch.arange(3)`, `torch.tensor([1, 2, 3])`, a literal list, `enumerate`
    or `torch.unique` of one, or a name bound once to one of these."""
    if depth > 3:
        return False
    if isinstance(expr, (cst.List, cst.Tuple)):
        return len(expr.elements) <= _HANDFUL
    if isinstance(expr, cst.Name):
        found = a.places.single_value(expr.value, site)
        return found is not None and _handful(a, found[0], found[1], depth + 1)
    if not isinstance(expr, cst.Call):
        return False
    name = (dotted_name(expr.func) or "").rsplit(".", 1)[-1]
    args = [x.value for x in expr.args if x.keyword is None and not x.star]
    if name in ("range", "arange") and len(args) == 1:
        return isinstance(args[0], cst.Integer) and int(args[0].value, 0) <= _HANDFUL
    if name in ("tensor", "enumerate", "unique") and args:
        return _handful(a, args[0], site, depth + 1)
    if name == "zip" and not (dotted_name(expr.func) or "").count("."):
        return any(_handful(a, arg, site, depth + 1) for arg in args)  # as long as its shortest part
    return False


def _on_host(a: Analysis, it: cst.BaseExpression, site: Site) -> bool:
    """Every tensor the comprehension walks (the zip's tensors) lives on the host:
    copied there once before it (`ids.cpu()`) or made there: no device work per row."""
    walked = [it]
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("zip", "enumerate"):
        walked = [x.value for x in it.args if x.keyword is None and not x.star]
    tensors = [e for e in walked if a.places.is_tensor(e, site)]
    return bool(tensors) and all(a.places.tensor_place(e, site) == CPU for e in tensors)


def _elements_read(ctx: RuleContext, uses: Iterable[NameUse]) -> List[cst.Subscript]:
    """The `t[i]` subscripts of tensors among the index variable's uses."""
    return [sub for sub in (_tensor_element(ctx, use) for use in uses) if sub is not None]


def _tensor_element(ctx: RuleContext, use: NameUse) -> Optional[cst.Subscript]:
    """For a use of the loop variable `i`: the `t[i]` it forms with a tensor `t`."""
    index = ctx.facts.parent_of(use.node)
    element = ctx.facts.parent_of(index) if isinstance(index, cst.Index) else None
    sub = ctx.facts.parent_of(element) if isinstance(element, cst.SubscriptElement) else None
    if isinstance(sub, cst.Subscript) and len(sub.slice) == 1 and ctx.analysis.places.is_tensor(sub.value, use.site):
        if ctx.analysis.values.forward_output_container(sub.value, use.site):
            return None  # `feats[i]` of a module's list of feature maps: a container, not a tensor
        return sub
    return None


def _is_element_work(ctx: RuleContext, node: cst.CSTNode) -> bool:
    parent = ctx.facts.parent_of(node)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        return parent.attr.value not in _NOT_WORK_ATTRS and parent.attr.value not in _HOST_COPIES
    if isinstance(parent, cst.Comparison) and parent.left is node and _hashed_membership(ctx, parent):
        return False  # `if x in seen:` of a set: hashed by identity, nothing read or computed
    if isinstance(parent, (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget, cst.UnaryOperation)):
        return not _index_arithmetic(ctx, parent)
    if isinstance(parent, cst.Subscript) and parent.value is node:
        return True
    if isinstance(parent, cst.Arg):
        call = ctx.facts.call_of_arg(parent)
        if call is None:
            return False
        func = call.node.func
        if (
            isinstance(func, cst.Name)
            and func.value in ("int", "float", "bool")
            and not ctx.facts.bindings_of(func.value)
        ):
            return True
        if (call.qualname or "").startswith("torch."):
            return True
        return ctx.analysis.helpers.function(call) is not None and call.method is not None
    return False


def _hashed_membership(ctx: RuleContext, comparison: cst.Comparison) -> bool:
    """`x in s` / `x not in s` with `s` a set or dict: a hash lookup."""
    if len(comparison.comparisons) != 1:
        return False
    target = comparison.comparisons[0]
    site = ctx.facts.site_of_node(comparison)
    return (
        isinstance(target.operator, (cst.In, cst.NotIn))
        and site is not None
        and ctx.analysis.values.is_hashed(target.comparator, site)
    )


def _index_arithmetic(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """`data[i:i + n]`: arithmetic on the element that only computes an index or
    a slice bound for something else (host-side gathering)."""
    current: Optional[cst.CSTNode] = node
    while isinstance(current, (cst.BinaryOperation, cst.UnaryOperation)):
        current = ctx.facts.parent_of(current)
    return isinstance(current, (cst.Slice, cst.Index))


def _inside(ctx: RuleContext, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
    current = ctx.facts.parent_of(node)
    for _ in range(64):
        if current is None:
            return False
        if current is ancestor:
            return True
        current = ctx.facts.parent_of(current)
    return False


def _selects_groups(ctx: RuleContext, uses: Iterable[NameUse], names: AbstractSet[str]) -> bool:
    """The loop variable is compared, as a whole value, with an expression that
    does not involve it (`mask = labels == c`, `x[y != k]`): each iteration
    selects a group of a whole tensor and works on it in bulk, a loop over a
    few groups rather than over elements."""
    for use in uses:
        parent = ctx.facts.parent_of(use.node)
        if isinstance(parent, cst.ComparisonTarget) and isinstance(parent.operator, (cst.Equal, cst.NotEqual)):
            comparison = ctx.facts.parent_of(parent)
            other = comparison.left if isinstance(comparison, cst.Comparison) else None
        elif isinstance(parent, cst.Comparison) and parent.left is use.node and len(parent.comparisons) == 1:
            target = parent.comparisons[0]
            other = target.comparator if isinstance(target.operator, (cst.Equal, cst.NotEqual)) else None
        else:
            continue
        if other is None or not isinstance(other, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            continue  # `x == 0`: an element tested against a constant
        if not any(isinstance(n, cst.Name) and n.value in names for n in descendants(other)) and not (
            isinstance(other, cst.Name) and other.value in names
        ):
            return True
    return False


def _now_and_then(a: Analysis, site: Site) -> bool:
    """`site` sits in a per-step loop but runs only in some of its iterations."""
    step = a.loops.step_loop(site)
    return step is not None and a.loops.occasional_guard(site, step)
