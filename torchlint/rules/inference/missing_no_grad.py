"""TL201 missing-no-grad."""
from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.analysis.facts import Call, Function, Loop
from torchlint.analysis.grad import Grad
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext

_TEST_FILE = re.compile(r"(^|[\\/])(test_[^\\/]*|[^\\/]*_test|conftest)\.py$|(^|[\\/])tests?[\\/]")


class MissingNoGrad(Rule):
    """
    ## What it does
    Flags a model forward that runs in an inference context -- after
    `model.eval()` (until `model.train()`), inside a function named like
    `evaluate`/`test`/`predict`/`infer`/`validate`/`generate`, or in a file
    that runs a pretrained or checkpointed model and never calls `.backward()`
    or `optimizer.step()` -- without `torch.no_grad()` or
    `torch.inference_mode()`.

    A forward is guarded when it sits under `with torch.no_grad():`,
    `with torch.inference_mode():`, `with torch.set_grad_enabled(False):`, in a
    function decorated with `@torch.no_grad()` / `@torch.inference_mode()`
    (with or without parentheses), or in a function only called from such
    regions in the same file. Forwards whose scope computes gradients
    (`.backward()`, `torch.autograd.grad`) are not flagged. A freshly built,
    randomly initialised model that the file never trains is a demo, not
    inference, and is not flagged unless an explicit context says so.

    ## Why is this bad?
    With autograd on, every forward records a graph and keeps the
    activations alive for a backward pass that never comes: more memory
    (smaller batches fit), more time per step.

    ## Example
    ```python
    model.eval()
    for x in loader:
        preds = model(x)
    ```

    ## Use instead
    ```python
    model.eval()
    with torch.inference_mode():
        for x in loader:
            preds = model(x)
    ```

    ## Fix safety
    The fix is unsafe: tensors created under `inference_mode` cannot later
    take part in autograd, so code after the region that does need gradients
    through them would raise. The fix wraps the smallest enclosing loop (or
    the statement) in `with torch.inference_mode():`, or decorates the
    enclosing inference function with `@torch.inference_mode()`.

    ## References
    - [torch.inference_mode](https://pytorch.org/docs/stable/generated/torch.inference_mode.html)
    - [Autograd mechanics: locally disabling gradient computation](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    """

    CODE = "TL201"
    NAME = "missing-no-grad"
    MESSAGE = "Model forward in an inference context runs with autograd on; wrap it in `torch.inference_mode()`"
    FIX_TITLE = "Run it under `torch.inference_mode()`"
    APPLICABILITY = Applicability.UNSAFE

    VALID = (
        # Guarded by a with block.
        "import torch\nfrom transformers import AutoModel\nmodel = AutoModel.from_pretrained('m')\n"
        "with torch.no_grad():\n    out = model(x)\n",
        # Decorator without parentheses.
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\n@torch.no_grad\ndef evaluate(x):\n"
        "    return model(x)\n",
        # A fresh model that is never trained: a demo, not inference.
        "import torch\nmodel = torch.nn.Linear(10, 2)\nout = model(torch.randn(1, 10))\n",
        # Gradients are used.
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.eval()\nout = model(x)\n"
        "out.sum().backward()\n",
        # Only called from a guarded region.
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\ndef evaluate(x):\n    return model(x)\n"
        "with torch.inference_mode():\n    evaluate(1)\n",
        # Back to training before the forward.
        "import torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.eval()\nmodel.train()\nout = model(x)\n",
    )
    INVALID = (
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.eval()\nfor x in data:\n"
            "    y = model(x)\n",
            fixed="import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.eval()\n"
            "with torch.inference_mode():\n    for x in data:\n        y = model(x)\n",
            line=6,
            unsafe=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\n\ndef predict(x):\n"
            "    a = model(x)\n    b = model(a)\n    return b\n",
            fixed="import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\n\n@torch.inference_mode()\n"
            "def predict(x):\n    a = model(x)\n    b = model(a)\n    return b\n",
            line=6,
            unsafe=True,
        ),
        Invalid(
            "import torch\nfrom transformers import AutoModel\nmodel = AutoModel.from_pretrained('m')\n"
            "# run it\nout = model(**inputs)\n",
            fixed="import torch\nfrom transformers import AutoModel\nmodel = AutoModel.from_pretrained('m')\n"
            "# run it\nwith torch.inference_mode():\n    out = model(**inputs)\n",
            line=5,
            unsafe=True,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        grad = Grad.of(ctx.sem)
        found = []
        is_test_file = bool(_TEST_FILE.search(ctx.path.replace("\\", "/")))
        for call in ctx.facts.calls:
            if not grad.is_model_call(call):
                continue
            site = call.site
            if _is_loss(ctx, call):
                continue  # the loss is not the model; its forward is cheap and holds no weights
            if self._inside_module_class(ctx, call):
                continue  # a submodule call inside a model: the caller's context decides
            reason, eval_order = self._context(ctx, grad, call, is_test_file)
            if reason is None:
                continue
            if grad.guarded(site) or self._callers_use_grad(ctx, grad, call):
                continue
            if eval_order is not None:
                # Training code before `.eval()` in the same function is not this forward's.
                if grad.grad_used_after(site.scope, eval_order):
                    continue
            elif grad.scope_uses_grad(site.scope):
                continue
            found.append((call, reason))
        # One root cause, one fix: a forward whose smallest loop sits inside
        # another reported forward's loop takes that outer loop, so the fixes
        # converge instead of nesting `with` blocks.
        loops = {id(c.node): self._own_loop(c) for c, _ in found}
        for call, reason in found:
            loop = loops[id(call.node)]
            for other, _ in found:
                outer = loops[id(other.node)]
                if outer is not None and outer.scope is call.site.scope and outer.contains(call.site.order) and (
                        loop is None or outer.order < loop.order):
                    loop = outer
            fix = self._fix(ctx, grad, call, loop)
            ctx.report(
                call.node,
                f"Model forward runs with autograd on in an inference context ({reason}); "
                "wrap it in `torch.inference_mode()` or `torch.no_grad()`",
                replacements=fix,
            )

    @staticmethod
    def _own_loop(call: Call) -> Optional[Loop]:
        loop = call.site.loop
        return loop if loop is not None and loop.scope is call.site.scope else None

    # -- context -------------------------------------------------------------

    @staticmethod
    def _inside_module_class(ctx: RuleContext, call: Call) -> bool:
        for s in call.site.scope.chain():
            if s.kind == "class":
                return s.name in ctx.sem.module_classes()
        return False

    @staticmethod
    def _context(ctx: RuleContext, grad: Grad, call: Call, is_test_file: bool):
        """(reason, order of the `.eval()` call or None), or (None, None)."""
        fn = grad.inference_function(call.site)
        if fn is not None and _lightning_step(ctx, fn):
            return None, None  # Lightning runs validation/test/predict steps without gradients
        if fn is not None and not (is_test_file and fn.name.lower().startswith("test")):
            if not any(_decorator_enables_grad(ctx, d) for d in fn.decorators):
                return f"function `{fn.name}`", None
        eval_order = grad.after_eval(call)
        if eval_order is not None:
            return "after `.eval()`", eval_order
        if not grad.file_trains() and grad.has_trained_weights(call):
            return "a pretrained model in a file that never trains", None
        return None, None

    @staticmethod
    def _callers_use_grad(ctx: RuleContext, grad: Grad, call: Call) -> bool:
        fn_scope = call.site.scope.function
        if fn_scope is None:
            return False
        fn = ctx.facts.function_of(fn_scope)
        if fn is None:
            return False
        for c in ctx.facts.calls:
            if isinstance(c.node.func, cst.Name) and c.node.func.value == fn.name and grad.scope_uses_grad(c.site.scope):
                return True
        return False

    # -- fix -----------------------------------------------------------------

    def _fix(self, ctx: RuleContext, grad: Grad, call: Call, loop: Optional[Loop]):
        alias = ctx.facts.module_alias("torch")
        if alias is None or not any(b.kind == "import" for b in ctx.facts.visible_bindings(alias, call.site.scope)):
            return None
        expr = cst.parse_expression(f"{alias}.inference_mode()")
        site = call.site
        if site.scope.kind == "lambda":
            return None  # a lambda runs later, outside any `with` around its definition
        fn = grad.inference_function(site)
        if fn is not None and site.scope is fn.scope and isinstance(fn.node, cst.FunctionDef):
            decorators = list(fn.node.decorators) + [cst.Decorator(expr)]
            return {fn.node: fn.node.with_changes(decorators=decorators)}
        target = loop.node if loop is not None else _statement_line(ctx.module, site.stmt)
        if target is None:
            return None
        if isinstance(target, (cst.FunctionDef, cst.ClassDef)):
            return None
        with_node = cst.With(
            items=[cst.WithItem(expr)],
            body=cst.IndentedBlock(body=[target.with_changes(leading_lines=[])]),
            leading_lines=target.leading_lines,
        )
        return {target: with_node}


def _lightning_step(ctx: RuleContext, fn: Function) -> bool:
    parent = fn.scope.parent
    if parent is None or parent.kind != "class" or not fn.name.endswith("_step"):
        return False
    info = ctx.facts.classes.get(parent.name)
    if info is None:
        return False
    for base in info.bases:
        q = ctx.facts.qualname(base) or ""
        if q.startswith(("lightning", "pytorch_lightning")):
            return True
    return False


def _is_loss(ctx: RuleContext, call: Call) -> bool:
    func = call.node.func
    q = ctx.facts.qualname(func)
    if q is None and isinstance(func, (cst.Name, cst.Attribute)):
        from torchlint.analysis.facts import dotted_name

        name = dotted_name(func)
        values = [b.value for b in ctx.facts.visible_bindings(name, call.site.scope) if b.value is not None] if name else []
        qs = [ctx.facts.qualname(v.func) for v in values if isinstance(v, cst.Call)]
        return bool(qs) and all(x is not None and x.startswith("torch.nn.") and x.endswith("Loss") for x in qs)
    return bool(q and q.startswith("torch.nn.") and q.endswith("Loss"))


def _decorator_enables_grad(ctx: RuleContext, d: cst.Decorator) -> bool:
    target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
    return ctx.facts.qualname(target) in ("torch.enable_grad", "torch.autograd.enable_grad")


def _statement_line(module: cst.Module, stmt: Optional[cst.CSTNode]):
    """The line-level statement holding `stmt` (a SimpleStatementLine with that
    one small statement, or the compound statement itself)."""
    if stmt is None:
        return None
    if isinstance(stmt, cst.BaseCompoundStatement):
        return stmt
    found = []

    class _Find(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            if any(s is stmt for s in node.body):
                found.append(node)
            return False

        def visit_FunctionDef(self, node):  # keep walking into bodies
            return True

    module.visit(_Find())
    if found and len(found[0].body) == 1:
        return found[0]
    return None
