"""TL201 missing-no-grad."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Set, Tuple, Union

import libcst as cst

from torchlint.analysis.facts import Call, Function, Loop, Scope, ScopeKind
from torchlint.analysis.helpers import root_name
from torchlint.analysis.value_kinds import ForwardMethod
from torchlint.analysis.vocabulary import VARIABLE
from torchlint.analysis.walk import children
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import module_at

if TYPE_CHECKING:
    from torchlint.analysis import Analysis


# What a fix wraps in `no_grad`: an evaluation function, a loop that does not train, a statement.
_Region = Union[cst.FunctionDef, Loop, cst.SimpleStatementLine]


class MissingNoGrad(Rule):
    """
    ## What it does
    Flags a model forward that runs for inference without `torch.no_grad()`
    or `torch.inference_mode()`:

    - in an inference pass over data: a loop over a DataLoader, a dataset or
      batches (or a decoding loop) that runs the model and does not train;
    - in an evaluation or prediction function (`evaluate`, `validate`,
      `test`, `predict`, `infer`, `sample`, `generate`...) that the file calls
      or that walks the data, or a model's own `predict`-style method;
    - after `model.eval()` (until `.train()`) in code that runs;
    - in a periodic evaluation inside a training loop that walks data
      (`if step % 100 == 0:` then a loop over `val_loader`) on an accelerator;
    - in a script that never trains and runs a pretrained or checkpointed
      model on real input;
    - and at the call of a same-file evaluation helper
      (`val_loss = calc_loss_loader(val_loader, model, device)`) whose
      forwards are shared with training code (once per loop: a second call
      of the same helper beside it is the same root cause; forwards the
      helper reaches only through calls it makes under no-grad do not count).

    Not flagged: a single forward under a periodic guard of a training loop
    (`if step % 100 == 0: val_out = model(x_val)`: one graph now and then,
    freed on the next step); a forward that runs once per run (not in a loop, at
    module level or in a function called once from there: a test forward
    after training, a notebook cell's single prediction, a look at one
    batch), unless it is an inference script's own work (a `.py` script that
    never trains runs a pretrained model on the accelerator: every run is
    that forward); forwards whose result (or anything computed from it)
    reaches `.backward()`, `torch.autograd.grad`, an optimizer, or is
    returned to a caller that trains; forwards already guarded (a `with`
    block, a decorator with or without parentheses,
    `torch.set_grad_enabled(False)`, or a function only called from guarded
    regions, also in a file that never writes `import torch`, or handed as
    `eval_func=` to a framework evaluator that runs it without autograd,
    pytorch_pfn_extras' `Evaluator`); unit tests,
    forward-only demos (a freshly built, randomly initialised model nobody
    trains or loads), `__main__` smoke blocks of model modules, export and
    benchmark code; submodule calls inside a model's `forward`; Hugging
    Face-style `model.generate(...)`, which already runs without gradients;
    Lightning `*_step` hooks; a forward whose input is a CPU tensor made
    in the same scope while the model is on the device (the GPU run raises
    there first: TL102's finding); models whose parameters record no graph (frozen
    with `requires_grad_(False)`, or a module class that builds none: buffers
    and parameter-free layers only).

    ## Why is this bad?
    With autograd on, every forward records a graph and keeps the
    activations alive for a backward pass that never comes: more memory
    (smaller batches fit), more time per step.

    ## Example
    ```python
    import torch


    def validate(model, loader, device):
        model.eval()
        correct = 0
        for x, y in loader:
            preds = model(x.to(device)).argmax(dim=1)
            correct += (preds == y.to(device)).sum()
        return correct.item() / len(loader.dataset)
    ```

    ## Use instead
    ```python
    import torch


    @torch.no_grad()
    def validate(model, loader, device):
        model.eval()
        correct = 0
        for x, y in loader:
            preds = model(x.to(device)).argmax(dim=1)
            correct += (preds == y.to(device)).sum()
        return correct.item() / len(loader.dataset)
    ```

    ## Fix safety
    Unsafe, and offered only where the region it guards provably does not
    need gradients: the fix decorates the evaluation function (when neither
    it nor what it returns to its callers trains), or wraps the largest loop
    around the forward that does not train (never an epoch loop that also
    trains, nor a loop whose results later reach `.backward()`), or the
    statement itself outside loops. Where every loop around the forward
    trains, no fix is offered. The fix uses `torch.no_grad()`, not
    `torch.inference_mode()`: tensors made under inference mode cannot later
    be modified in place or saved for backward, and a region's results
    usually outlive it (collected predictions, metrics, a returned value).
    It needs `torch` imported as a module (when it is imported only after
    the region, in a later notebook cell, the fix imports it before). A
    lambda gets no fix (it runs later, outside any `with` around its
    definition), nor does a loop or statement that yields (a `with` around a
    `yield` would leave autograd off in the consumer's code).

    ## References
    - [torch.inference_mode](https://pytorch.org/docs/stable/generated/torch.inference_mode.html)
    - [Autograd mechanics: locally disabling gradient computation](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    """

    CODE = "TL201"
    ACCELERATOR_COST = True
    NAME = "missing-no-grad"
    MESSAGE = "Model forward in an inference context runs with autograd on; wrap it in `torch.inference_mode()`"
    FIX_TITLE = "Run it without autograd"
    APPLICABILITY = Applicability.UNSAFE

    _CKPT = (
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.load_state_dict(torch.load('m.pt'))\n"
        "model.cuda()\n"
    )
    VALID = (
        # Guarded by a with block.
        "import torch\nfrom transformers import AutoModel\nmodel = AutoModel.from_pretrained('m').cuda()\n"
        "with torch.no_grad():\n    for batch in loader:\n        out = model(**batch)\n",
        # Decorator without parentheses.
        _CKPT + "@torch.no_grad\ndef evaluate(x):\n    return model(x)\nfor x in loader:\n    evaluate(x.cuda())\n",
        # A project's own decorator that wraps inference_mode.
        _CKPT
        + "@smart_inference_mode()\ndef run(loader):\n    for x in loader:\n        y = model(x.cuda())\nrun(loader)\n",
        # Guarded in a file that never writes `import torch` (a notebook fragment).
        "from torch import nn\nmodel = nn.Linear(2, 2).cuda()\nmodel.eval()\nwith torch.no_grad():\n"
        "    for x in loader:\n        y = model(x)\n",
        # A fresh model that is never trained or loaded: a demo, not inference.
        "import torch\nmodel = torch.nn.Linear(10, 2).cuda()\nmodel.eval()\nfor x in loader:\n    out = model(x)\n",
        # Frozen parameters record no graph.
        _CKPT + "model.requires_grad_(False)\nfor x in loader:\n    y = model(x.cuda())\n",
        # Gradients are used.
        _CKPT + "model.eval()\nfor x in loader:\n    out = model(x.cuda())\n    out.sum().backward()\n",
        # The result is trained on after the loop.
        _CKPT + "model.eval()\nfeats = []\nfor x in loader:\n    feats.append(model(x.cuda()))\n"
        "torch.stack(feats).sum().backward()\n",
        # Only called from a guarded region.
        _CKPT + "def evaluate(x):\n    return model(x)\nwith torch.inference_mode():\n    for x in loader:\n"
        "        evaluate(x.cuda())\n",
        # A unit test.
        "import torch\ndef test_model_runs():\n    model = torch.load('m.pt').cuda()\n    model.eval()\n"
        "    for x in loader:\n        assert model(x.cuda()).shape == (1, 2)\n",
        # `generate` already runs without gradients.
        "import torch\nfrom transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('m').cuda()\nfor batch in loader:\n    out = model.generate(**batch)\n",
        # One forward after training, once per run: one graph, nothing per step.
        _CKPT + "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nfor x, y in loader:\n"
        "    loss = (model(x.cuda()) - y.cuda()).pow(2).mean()\n    loss.backward()\n    opt.step()\n"
        "model.eval()\nprint(model(x_test.cuda()))\n",
        # A training step in the same loop.
        _CKPT + "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nfor x, y in loader:\n"
        "    loss = (model(x.cuda()) - y.cuda()).pow(2).mean()\n    loss.backward()\n    opt.step()\n",
    )
    INVALID = (
        Invalid(
            _CKPT + "model.eval()\nfor x in loader:\n    y = model(x.cuda())\n",
            fixed=_CKPT + "model.eval()\nwith torch.no_grad():\n    for x in loader:\n        y = model(x.cuda())\n",
            line=8,
            unsafe=True,
        ),
        # a prediction helper called for every batch
        Invalid(
            _CKPT + "\ndef predict(x):\n    a = model(x)\n    b = model(a)\n    return b\nfor x in loader:\n"
            "    print(predict(x.cuda()))\n",
            fixed=_CKPT + "\n@torch.no_grad()\ndef predict(x):\n    a = model(x)\n    b = model(a)\n"
            "    return b\nfor x in loader:\n    print(predict(x.cuda()))\n",
            line=8,
            unsafe=True,
        ),
        # a forward in a helper called from two places: reported, but no fix (one graph
        # per call: the edit would gain nothing measurable)
        Invalid(_CKPT + "def show(x):\n    model.eval()\n    print(model(x.cuda()))\nshow(x)\nshow(y)\n", line=8),
        # a periodic evaluation that walks a loader: a whole pass of graphs
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for step, (x, y) in enumerate(loader):\n    loss = (model(x.cuda()) - y.cuda()).pow(2).mean()\n"
            "    loss.backward()\n    opt.step()\n"
            "    if step % 100 == 0:\n        model.eval()\n        for xv in val_loader:\n            val = model(xv.cuda())\n"
            "        model.train()\n",
            line=12,
        ),
        # a CPU-only script: graphs cost memory and time there too
        Invalid(
            "import torch\nmodel = torch.load('m.pt')\nmodel.eval()\nfor x in loader:\n    y = model(x)\n",
            fixed="import torch\nmodel = torch.load('m.pt')\nmodel.eval()\nwith torch.no_grad():\n"
            "    for x in loader:\n        y = model(x)\n",
            line=5,
            unsafe=True,
        ),
        # validate(model, loader): `.eval()` makes the parameter a model
        Invalid(
            "import torch\ndef validate(model, loader):\n    model.eval()\n    total = 0\n    for x, y in loader:\n"
            "        total += (model(x.cuda()).argmax(1) == y.cuda()).sum()\n    return total\n",
            fixed="import torch\n@torch.no_grad()\ndef validate(model, loader):\n    model.eval()\n    total = 0\n"
            "    for x, y in loader:\n        total += (model(x.cuda()).argmax(1) == y.cuda()).sum()\n    return total\n",
            line=6,
            unsafe=True,
        ),
        # an evaluation loop inside a training epoch: only that loop is wrapped
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2).cuda()\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for epoch in range(3):\n    model.train()\n    for x, y in train_loader:\n"
            "        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()\n        loss.backward()\n        opt.step()\n"
            "    model.eval()\n    for x, y in val_loader:\n        val = (model(x.cuda()) - y.cuda()).pow(2).mean()\n",
            fixed="import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2).cuda()\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for epoch in range(3):\n    model.train()\n    for x, y in train_loader:\n"
            "        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()\n        loss.backward()\n        opt.step()\n"
            "    model.eval()\n    with torch.no_grad():\n        for x, y in val_loader:\n"
            "            val = (model(x.cuda()) - y.cuda()).pow(2).mean()\n",
            line=13,
            unsafe=True,
        ),
        # the pre-0.4 `volatile=True` no longer turns autograd off
        Invalid(
            "import torch\nfrom torch.autograd import Variable\ndef test(model, loader):\n    model.eval()\n"
            "    for data, target in loader:\n        data = Variable(data.cuda(), volatile=True)\n"
            "        output = model(data)\n",
            line=7,
            fixed="import torch\nfrom torch.autograd import Variable\n@torch.no_grad()\ndef test(model, loader):\n"
            "    model.eval()\n    for data, target in loader:\n        data = Variable(data.cuda(), volatile=True)\n"
            "        output = model(data)\n",
            unsafe=True,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        found = []
        for call in ctx.facts.calls:
            mc = a.values.model_call(call)
            if mc is None or not mc.known or mc.method is ForwardMethod.GENERATE:
                continue  # `generate` (Hugging Face, nanoGPT) already runs without gradients
            if a.roles.in_model_method(call.site) and not self._inference_method(a, call):
                continue  # a submodule call inside a model's forward: the caller's context decides
            reason = a.grad.inference_context(mc)
            if reason is None or a.grad.guarded(call.site) or a.grad.grad_needed(call):
                continue
            if a.places.crashes_on_device(mc):
                continue  # a CPU input crashes the moved model on a GPU (TL102's finding) before any graph
            if a.cost.runs_once(call.site) and not (a.grad.script_work(mc) and not a.cell_rows):
                continue  # one graph, once per run: a demo, one prediction, a test after training
            if a.loops.occasional_guard(call.site) and not self._per_batch(ctx, call):
                continue  # one graph now and then (`if step % 100 == 0: model(x_val)`): freed on the next step
            found.append((call, reason))
        found.extend(self._evaluation_helpers(ctx, {id(c.node) for c, _ in found}))
        # One root cause, one fix: forwards that share a region share its fix. A fix is offered
        # only where it spares a graph per batch: a single forward (a demo, one prediction, a
        # periodic check) is reported, but the edit would gain nothing measurable.
        regions = {id(c.node): self._region(ctx, c) if self._per_batch(ctx, c) else None for c, _ in found}
        for call, reason in found:
            legacy = (
                "; `Variable(..., volatile=True)` has had no effect since PyTorch 0.4"
                if self._volatile_input(ctx, call)
                else ""
            )
            ctx.report(
                call.node,
                f"Model forward runs with autograd on in an inference context ({reason}); "
                f"wrap it in `torch.inference_mode()` or `torch.no_grad()`{legacy}",
                replacements=self._fix(ctx, call, regions[id(call.node)], regions),
            )

    @staticmethod
    def _per_batch(ctx: RuleContext, call: Call) -> bool:
        """The forward (or the evaluation helper called here) runs for every batch
        of a pass over data, or every iteration of a loop that does not train."""
        a = ctx.analysis
        if a.grad.over_data(call.site):
            return True
        loop = call.site.loop
        while loop is not None and loop.scope is call.site.scope:
            if not a.loops.trains(loop) and not a.loops.runs_once(loop):
                return True  # a forward in a loop that does not train: one graph per iteration
            loop = loop.parent
        fn = a.helpers.function(call)
        return fn is not None and any(a.loops.is_data_loop(lp) for lp in ctx.facts.loops_in(fn.scope))

    @staticmethod
    def _volatile_input(ctx: RuleContext, call: Call) -> bool:
        """An input is `Variable(x, volatile=True)` (directly or through a name):
        the pre-0.4 way to turn autograd off, ignored by PyTorch since."""
        for arg in call.node.args:
            value: Optional[cst.BaseExpression] = arg.value
            if isinstance(value, cst.Name):
                reaching = ctx.analysis.places.reaching(value.value, call.site)
                if len(reaching) == 1 and reaching[0].value is not None:
                    b = reaching[0]
                    value = b.value
                    if b.index is not None and isinstance(value, cst.Tuple) and b.index < len(value.elements):
                        value = value.elements[b.index].value  # `x, y = Variable(x, volatile=True), ...`
            inner = ctx.facts.call_for(value) if isinstance(value, cst.Call) else None
            if inner is not None and inner.qualname in VARIABLE and inner.keyword("volatile") is not None:
                return True
        return False

    @staticmethod
    def _inference_method(a: Analysis, call: Call) -> bool:
        """A model's own `predict`/`generate`/`sample`-style method (not `forward`)
        that the file calls from outside the model (a VAE's `decode`, also called
        by its `forward` in training, is part of the model)."""
        fn = a.grad.inference_function(call.site)
        if fn is None or fn.name == "forward":
            return False
        callers = a.values.callers(fn)
        cls = fn.scope.parent
        return bool(callers) and not any(
            cls is not None and any(s is cls for s in c.site.scope.chain()) for c in callers
        )

    def _evaluation_helpers(self, ctx: RuleContext, reported: Set[int]) -> List[Tuple[Call, str]]:
        """Calls of a same-file helper that runs a model over a loader without
        training (`val_loss = calc_total_loss(val_loader, model, device)`), made
        with autograd on: the helper's forwards are shared with training code,
        so the call is where the no-grad region belongs."""
        a = ctx.analysis
        out = []
        # One root cause, one finding: the first unguarded call of a helper in each loop (or
        # scope) reports it (`train_acc = model_eval(train_dl)`, `dev_acc = model_eval(dev_dl)`).
        helpers_reported: Set[Tuple[int, int, int]] = set()
        for call in ctx.facts.calls:
            fn = a.helpers.function(call)
            if fn is None or a.grad.inference_function(call.site) is not None:
                continue
            where = (id(fn.node), id(call.site.scope.node), id(call.site.loop.node) if call.site.loop else 0)
            if where in helpers_reported:
                continue
            summary = a.helpers.summary(fn)
            if summary.trains or not summary.forwards or a.grad.decorated_no_grad(fn):
                continue
            if not any(a.loops.is_data_loop(lp) and a.loops.forwards(lp) for lp in ctx.facts.loops_in(fn.scope)):
                continue  # not an evaluation over data
            if a.roles.excluded(call.site) or a.grad.guarded(call.site) or a.grad.grad_needed(call):
                continue
            forwards = self._forwards_reached(a, fn)
            if any(id(c.node) in reported for c in forwards):
                continue  # its forwards are reported where they run
            if not any(not a.grad.guarded(c.site) and not self._demo(a, c) for c in forwards):
                continue  # every forward it reaches already runs without autograd, or is a demo
            if not (a.roles.does_work(call.site) or call.site.scope is ctx.facts.module_scope):
                continue
            helpers_reported.add(where)
            out.append((call, f"the evaluation helper `{fn.name}()`"))
        return out

    @staticmethod
    def _demo(a: Analysis, call: Call) -> bool:
        """A forward of a model with random weights in a file that never trains."""
        forward = a.values.model_call(call)
        return forward is not None and a.grad.untrained(forward)

    @staticmethod
    def _forwards_reached(a: Analysis, fn: Function) -> List[Call]:
        """The model forwards `fn` runs with autograd on, itself or through
        same-file helpers (a helper it calls inside `with torch.no_grad():` runs
        its forwards without autograd, whoever else calls it)."""
        out: List[Call] = []
        seen: Set[int] = set()
        todo = [fn]
        while todo and len(seen) < 16:
            current = todo.pop()
            if id(current.node) in seen:
                continue
            seen.add(id(current.node))
            for c in a.helpers.calls_in(current):
                if a.grad.guarded_here(c.site):
                    continue
                if a.values.model_call(c) is not None:
                    out.append(c)
                inner = a.helpers.function(c)
                if inner is not None:
                    todo.append(inner)
        return out

    # -- the fix: the evaluation function, or the smallest loop that does not train -------------

    def _region(self, ctx: RuleContext, call: Call) -> Optional[_Region]:
        """What the fix wraps: a function's `def`, a loop, a statement's line, or None."""
        a = ctx.analysis
        site = call.site
        if site.scope.kind == ScopeKind.LAMBDA:
            return None  # a lambda runs later, outside any `with` around its definition
        fn_scope = site.scope.function
        fn = ctx.facts.function_of(fn_scope) if fn_scope is not None and site.scope is fn_scope else None
        if (
            fn is not None
            and fn_scope is not None
            and isinstance(fn.node, cst.FunctionDef)
            and a.grad.inference_function(site) is fn
            and not self._region_trains(ctx, a.helpers.calls_in(fn), fn_scope, fn)
            and not self._returns_to_training(ctx, fn)
        ):
            return fn.node
        loop = site.loop
        chosen = None
        while loop is not None and loop.scope is site.scope:
            if self._region_trains(ctx, a.loops.calls_in(loop), site.scope, None, loop):
                break
            chosen = loop
            loop = loop.parent
        if chosen is not None:
            # The largest enclosing loop that does not train (evaluation epochs stay whole).
            return chosen
        if site.loop is not None:
            return None  # every loop around it trains: no region is safe
        line = _statement_line(ctx, site.stmt)
        if line is not None and any(ctx.analysis.displayed(small) for small in line.body):
            return None  # a notebook cell's displayed last expression: wrapping it would hide its output
        return line

    def _region_trains(
        self,
        ctx: RuleContext,
        calls: Iterable[Call],
        scope: Scope,
        fn: Optional[Function],
        loop: Optional[Loop] = None,
    ) -> bool:
        """The region computes gradients, or something it binds later does."""
        a = ctx.analysis
        for c in calls:
            if a.values.is_train_call(c):
                return True
            helper = a.helpers.function(c)
            if helper is not None and helper is not fn and a.helpers.summary(helper).trains:
                return True
        if loop is not None:
            # Names the loop binds that reach training after it.
            bound = {b.name for b in ctx.facts.bindings if b.site.scope is scope and loop.contains(b.site.order)}
            for c in a.helpers.calls_in_scope(scope):
                if c.site.order > loop.end_order and a.values.is_train_call(c) and c.receiver is not None:
                    if root_name(c.receiver) in bound:
                        return True
        return False

    def _returns_to_training(self, ctx: RuleContext, fn: Function) -> bool:
        a = ctx.analysis
        if not any(r.value is not None for r, _ in ctx.facts.returns_of(fn)):
            return False
        for caller in a.values.callers(fn):
            if any(a.values.is_train_call(x) for x in a.helpers.calls_in_scope(caller.site.scope)):
                return True
        return False

    def _fix(
        self, ctx: RuleContext, call: Call, region: Optional[_Region], regions: Dict[int, Optional[_Region]]
    ) -> Optional[Dict[cst.CSTNode, Replacement]]:
        if region is None:
            return None
        node: Union[cst.FunctionDef, cst.For, cst.While, cst.SimpleStatementLine] = (
            region.node if isinstance(region, Loop) else region
        )
        if isinstance(region, Loop):
            # Another reported forward's region around this one: one `with`, not nested ones.
            for other in regions.values():
                if (
                    isinstance(other, Loop)
                    and other is not region
                    and other.contains(region.order)
                    and other.scope is region.scope
                ):
                    node = other.node
        if not isinstance(node, cst.FunctionDef) and _yields(node):
            return None  # a `with` around a `yield` would leave autograd off in the consumer's code
        first = node.body[0] if isinstance(node, cst.SimpleStatementLine) else node
        site = ctx.facts.site_of_statement(first) or call.site
        found = module_at(ctx, "torch", site, add_missing=False)
        if found is None:
            return None
        alias, imports = found
        # `no_grad`, not `inference_mode`: tensors made under inference mode cannot be
        # modified in place or saved for backward afterwards, and a region's results
        # usually outlive it (collected predictions, metrics, a returned value).
        expr = cst.parse_expression(f"{alias}.no_grad()")
        if isinstance(node, cst.FunctionDef):
            decorators = list(node.decorators) + [cst.Decorator(expr)]
            return {**imports, node: node.with_changes(decorators=decorators)}
        with_node = cst.With(
            items=[cst.WithItem(expr)],
            body=cst.IndentedBlock(body=[node.with_changes(leading_lines=[])]),
            leading_lines=node.leading_lines,
        )
        return {**imports, node: with_node}


def _yields(node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Yield):
            return True
        if not isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) or n is node:
            stack.extend(children(n))
    return False


def _statement_line(ctx: RuleContext, stmt: Optional[cst.CSTNode]) -> Optional[cst.SimpleStatementLine]:
    """The line holding the small statement `stmt`, when it holds only that."""
    site = ctx.facts.site_of_statement(stmt) if stmt is not None else None
    line = site.parent if site is not None else None
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return line
    return None
