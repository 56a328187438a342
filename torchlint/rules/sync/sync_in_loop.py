"""TL401 sync-in-loop."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.facts import Call, Loop, Site
from torchlint.analysis.loops import HotContext, Loops
from torchlint.analysis.tensors import TENSOR, Tensors
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext

_ALWAYS = frozenset({"item", "tolist"})
_TRAINING_ONLY = frozenset({"cpu", "numpy"})
_CASTS = frozenset({"float", "int", "bool"})


class SyncInLoop(Rule):
    """
    ## What it does
    Flags a host/device synchronization that runs every iteration of a hot
    loop (or of a same-file helper the hot loop calls every iteration):
    `.item()`, `.tolist()`, `float(t)`, `int(t)`, `bool(t)`, a tensor used as
    an `if`/`while` condition or compared in one, and, in training loops,
    `.cpu()`, `.numpy()` and `print(t)` of a tensor.

    Only values the analysis knows are tensors on a device count (a loss, a
    model output, results of torch ops on those); Python numbers such as
    `float(scheduler.get_last_lr()[0])` or `float(group["lr"])`, and tensors
    known to live on the CPU, are not flagged. Code under a periodic guard
    (`if step % 100 == 0:`) or after the loop is not flagged, and neither is
    `.cpu()` of outputs collected per batch in an inference loop (the copy is
    the point of the loop there).

    ## Why is this bad?
    Reading a device value on the host waits for every queued kernel to
    finish: the CPU stops queueing work, the GPU drains and idles until the
    next launches arrive. Once per iteration this serialises the whole loop.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(total / len(loader))
    ```

    ## Use instead
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    print(float(total) / len(loader))
    ```

    ## Fix safety
    Only the accumulation `total += t.item()` has a fix, and it is unsafe:
    `total` becomes a tensor during the loop and is converted with
    `float(...)` where it is read after the loop, which changes its type
    inside the loop. Other cases get a suggestion: log every N steps, or
    keep values on the device and convert once after the loop.

    ## References
    - [CUDA semantics: asynchronous execution](https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution)
    - [torch.cuda.set_sync_debug_mode](https://pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html)
    """

    CODE = "TL401"
    NAME = "sync-in-loop"
    MESSAGE = "Host/device sync every iteration of a hot loop"
    FIX_TITLE = "Accumulate on the device; convert once after the loop"
    APPLICABILITY = Applicability.UNSAFE

    VALID = (
        # Periodic guard.
        "import torch\nfor step, (x, y) in enumerate(loader):\n    loss = criterion(model(x), y)\n"
        "    loss.backward()\n    if step % 100 == 0:\n        print(loss.item())\n",
        # Python numbers.
        "import torch\nfor x in loader:\n    lr = float(scheduler.get_last_lr()[0])\n"
        "    for group in opt.param_groups:\n        v = float(group['lr'])\n",
        # After the loop.
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nfor x in loader:\n    loss = model(x).sum()\n"
        "    loss.backward()\nprint(loss.item())\n",
        # .cpu() of outputs collected in an inference loop.
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\npreds = []\nfor x in loader:\n"
        "    preds.append(model(x).cpu())\n",
        # A CPU tensor.
        "import torch\nfor x in loader:\n    n = torch.zeros(3).sum().item()\n",
    )
    INVALID = (
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\ntotal = 0.0\nfor x in loader:\n"
            "    loss = model(x).sum()\n    loss.backward()\n    total += loss.item()\nprint(total / 10)\n",
            fixed="import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\ntotal = 0.0\nfor x in loader:\n"
            "    loss = model(x).sum()\n    loss.backward()\n    total += loss.detach()\nprint(float(total) / 10)\n",
            line=8,
            unsafe=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nfor x in loader:\n"
            "    loss = model(x).sum()\n    loss.backward()\n    if loss < 0.1:\n        break\n",
            line=7,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\ndef log(loss):\n    print(float(loss))\n"
            "for x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    log(loss)\n",
            line=5,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nfor x in loader:\n"
            "    loss = model(x).sum()\n    loss.backward()\n    print(loss)\n",
            line=7,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        tensors = Tensors.of(ctx.sem)
        loops = Loops.of(ctx.sem)
        for call in ctx.facts.calls:
            what = self._sync_kind(ctx, tensors, call)
            if what is None:
                continue
            hot = loops.hot_context(call.site)
            if hot is None:
                continue
            if what[1] and not hot.training:
                continue
            if loops.steps_environment(hot.loop):
                continue  # RL acting: the environment needs the action on the host
            fix = self._accumulation_fix(ctx, tensors, call, hot) if call.method == "item" else None
            ctx.report(call.node, self._message(what[0], hot), replacements=fix)
        for node, site in list(ctx.facts.ifs) + self._whiles(ctx):
            test = node.test
            culprit = self._tensor_condition(tensors, test, site)
            if culprit is None:
                continue
            hot = loops.hot_context(site)
            if hot is None and isinstance(node, cst.While):
                loop = next((l for l in ctx.facts.loops if l.node is node), None)
                if loop is not None and ctx.sem.is_hot(loop):
                    hot = HotContext(loop, loops.is_training_loop(loop))
            if hot is None:
                continue
            ctx.report(culprit, self._message("a tensor used as a condition", hot))

    @staticmethod
    def _whiles(ctx: RuleContext):
        out = []
        for loop in ctx.facts.loops:
            if isinstance(loop.node, cst.While):
                site = ctx.facts.site_of_statement(loop.node)
                if site is not None:
                    out.append((loop.node, site))
        return out

    @staticmethod
    def _message(what: str, hot: HotContext) -> str:
        where = f"in `{hot.via}`, called every iteration of a hot loop" if hot.via else "every iteration of a hot loop"
        return (f"{what} syncs host and device {where}; keep values on the device and convert "
                "once after the loop, or only every N steps (`if step % N == 0:`)")

    @staticmethod
    def _sync_kind(ctx: RuleContext, tensors: Tensors, call: Call):
        """(description, training_only) or None."""
        if call.method is not None and call.receiver is not None and call.qualname is None:
            if call.method in _ALWAYS or call.method in _TRAINING_ONLY:
                if call.node.args and call.method != "tolist":
                    return None
                if tensors.place(call.receiver, call.site) == TENSOR:
                    return f"`.{call.method}()`", call.method in _TRAINING_ONLY
            return None
        func = call.node.func
        if isinstance(func, cst.Name) and not ctx.facts.bindings_of(func.value):
            if func.value in _CASTS and len(call.node.args) == 1 and not call.node.args[0].star:
                if tensors.place(call.node.args[0].value, call.site) == TENSOR:
                    return f"`{func.value}()` of a tensor", False
            if func.value == "print":
                for arg in call.node.args:
                    if arg.keyword is None and _mentions_tensor(tensors, arg.value, call.site):
                        return "`print()` of a tensor", True
        return None

    @staticmethod
    def _tensor_condition(tensors: Tensors, test: cst.BaseExpression, site: Site) -> Optional[cst.CSTNode]:
        if isinstance(test, cst.BooleanOperation):
            return (SyncInLoop._tensor_condition(tensors, test.left, site)
                    or SyncInLoop._tensor_condition(tensors, test.right, site))
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return SyncInLoop._tensor_condition(tensors, test.expression, site)
        if isinstance(test, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons):
                return None
            operands = [test.left] + [c.comparator for c in test.comparisons]
            if any(tensors.place(o, site) == TENSOR for o in operands):
                return test
            return None
        if isinstance(test, (cst.Call, cst.Name, cst.Attribute, cst.Subscript, cst.BinaryOperation)):
            if tensors.place(test, site) == TENSOR:
                return test
        return None

    # -- the accumulation fix ------------------------------------------------

    @staticmethod
    def _accumulation_fix(ctx: RuleContext, tensors: Tensors, call: Call, hot: HotContext):
        stmt = call.site.stmt
        if not (isinstance(stmt, cst.AugAssign) and isinstance(stmt.operator, cst.AddAssign)
                and stmt.value is call.node and isinstance(stmt.target, cst.Name)):
            return None
        loop: Optional[Loop] = call.site.loop
        if loop is None or hot.via is not None:
            return None
        # The outermost loop of this scope that holds the statement and is hot.
        for outer in loop.chain():
            if ctx.sem.is_hot(outer):
                loop = outer
        name = stmt.target.value
        scope = call.site.scope
        # Bound before the loop, in this scope, and only accumulated inside it.
        before = [b for b in ctx.facts.bindings_of(name) if b.site.scope is scope and b.site.order < loop.order]
        if not before or any(b.kind == "global" for b in ctx.facts.bindings_of(name)):
            return None
        inside = [b for b in ctx.facts.bindings_of(name) if b.site.scope is scope and loop.contains(b.site.order)]
        if len(inside) != 1:
            return None
        reads_after = []
        for use in ctx.facts.uses_of(name):
            if use.site.scope is not scope:
                if any(s is scope for s in use.site.scope.chain()):
                    return None  # read from a nested function
                continue
            if use.site.order <= loop.end_order:
                if use.site.order >= before[0].site.order:
                    return None  # read before or inside the loop
                continue
            reads_after.append(use)
        if not reads_after:
            return None
        init = before[-1].value
        if before[-1].kind != "assign" or not isinstance(init, (cst.Integer, cst.Float)):
            return None
        torch_alias = ctx.facts.module_alias("torch")
        if torch_alias is not None and not any(
                b.kind == "import" for b in ctx.facts.visible_bindings(torch_alias, scope)):
            torch_alias = None
        if isinstance(init, cst.Integer) and torch_alias is None:
            return None
        replacements = {call.node: call.node.with_changes(
            func=call.node.func.with_changes(attr=cst.Name("detach")))}
        for use in reads_after:
            if isinstance(init, cst.Float):
                # float + floats: convert back to a float.
                replacements[use.node] = cst.Call(cst.Name("float"), [cst.Arg(use.node)])
            else:
                # An int start: the sum's type follows the tensors' dtype, as `.item()` did.
                replacements[use.node] = cst.parse_expression(f"{torch_alias}.as_tensor(x).item()").with_changes(
                    func=cst.parse_expression(f"{torch_alias}.as_tensor(x).item").with_changes(
                        value=cst.Call(cst.parse_expression(f"{torch_alias}.as_tensor"), [cst.Arg(use.node)])))
        return replacements


def _mentions_tensor(tensors: Tensors, expr: cst.BaseExpression, site: Site) -> bool:
    if tensors.place(expr, site) == TENSOR:
        return True
    if isinstance(expr, cst.FormattedString):
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringExpression) and tensors.place(part.expression, site) == TENSOR:
                return True
    return False
