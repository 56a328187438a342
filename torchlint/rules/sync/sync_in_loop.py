"""TL401 sync-in-loop."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple, Union

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call, Loop, Site, dotted_name
from torchlint.analysis.helpers import logged_value
from torchlint.analysis.knowledge import HOST_CASTS, HOST_TENSOR_COPIES, HOST_VALUE_READS
from torchlint.analysis.loops import HotContext
from torchlint.analysis.place_kinds import DEVICE
from torchlint.analysis.vocabulary import LOSS_NAME
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis import Analysis

_ALWAYS = HOST_VALUE_READS  # item, tolist
_TRAINING_ONLY = HOST_TENSOR_COPIES  # cpu, numpy
_CASTS = HOST_CASTS  # float, int, bool


class SyncInLoop(Rule):
    """
    ## What it does
    Flags a host/device synchronization that runs every iteration of a
    per-batch loop: `.item()`, `.tolist()`, `float(t)`, `int(t)`, `bool(t)`,
    a tensor used as an `if`/`while` condition or compared in one, `.cpu()`
    of a value that is then reduced on the host (`pred.eq(y).cpu().sum()`),
    TensorBoard's `writer.add_scalar(tag, t, step)` of a device tensor (it
    converts the value to NumPy; not where a class of the file defines its own
    `add_scalar`), and, in training loops, `.cpu()`, `.numpy()`
    and `print(t)` of a tensor.
    A same-file helper the loop calls every iteration and that syncs inside
    is reported where the device read shows: a `train_step` returning
    `loss.item()` of its own forward's loss at that `.item()`; a helper
    reading what it is handed (`accuracy(out, y)` returning `float(...)`) at
    the loop's call.

    Only values on the accelerator count: a loss, a model output (also
    unpacked from a tuple, `loss, logits = model(x)`), a loss returned by a
    same-file helper or computed by a criterion passed in as a parameter, a
    value that reaches `.backward()` (also through `scaler.scale(loss)`),
    metric tensors such as `(pred == y).sum()`, and tensors whose place we
    cannot tell in a file that uses an accelerator. Python numbers
    (`float(scheduler.get_last_lr()[0])`), tensors known to live on the CPU,
    and everything in files that never use an accelerator are not flagged.
    Neither is code under a periodic guard (`if step % 100 == 0:`), code that
    runs once per epoch after the batch loop, the per-sample `.tolist()` of a
    generation loop, `.cpu()` of outputs collected per batch in an inference
    loop (the copy is the point there), reinforcement-learning acting loops
    (`env.step(action)`), the test that decides whether the loop goes on when
    it reads a flag the loop does not compute (`if signal.item() == 0: break`
    after a broadcast), unit tests and benchmarks.

    ## Why is this bad?
    Reading a device value on the host waits for every queued kernel to
    finish: the CPU stops queueing work, the GPU drains and idles until the
    next launches arrive. Once per iteration this serialises the whole loop.

    ## Example
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(total / len(loader))
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(20, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    dataset = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    loader = DataLoader(dataset, batch_size=64, pin_memory=True)

    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    print(total.item() / len(loader))
    ```

    ## Fix safety
    Only the accumulation `total += t.item()` has a fix, and it is unsafe:
    `total` is a tensor on the device during the loop. The fix accumulates
    `t.detach()` and inserts `total = float(total)` (or `int(total)`) right
    after the loop, so the code after the loop sees the Python number it saw
    before. A float start or a value that is a float (a loss, a mean, a
    `.float()`) gives `float(...)`, accumulated in float64 (`.double()`), as
    the Python float sum was: every value converts exactly and the additions
    round alike, so the printed numbers stay the same (float64 is not
    available on Apple's MPS backend: another reason the fix is unsafe); an
    int start with a count (`(pred == y).sum()`) gives `int(...)`,
    accumulated exactly in int64. It is offered only when `total` is bound
    to a number literal before the loop (and, in an epoch loop, reset for
    each epoch), only accumulated inside it, read only after it, and, for an
    int start, the value is known to be a count or a float; and not when
    the same iteration syncs elsewhere, through another reported sync or a
    copy of a device tensor to the host (`logits.cpu().numpy()` for a
    metric): removing one sync of several gains nothing. Other cases get a suggestion: log every N steps, or keep
    values on the device and convert once after the loop.

    ## References
    - [CUDA semantics: asynchronous execution](https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution)
    - [torch.cuda.set_sync_debug_mode](https://pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html)
    """

    CODE = "TL401"
    ACCELERATOR_COST = True
    NAME = "sync-in-loop"
    MESSAGE = "Host/device sync every iteration of a hot loop"
    FIX_TITLE = "Accumulate on the device; convert once after the loop"
    APPLICABILITY = Applicability.UNSAFE

    _HEAD = "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(2, 2).to(device)\n"
    VALID = (
        # Periodic guard.
        _HEAD + "for step, (x, y) in enumerate(loader):\n    loss = criterion(model(x.to(device)), y.to(device))\n"
        "    loss.backward()\n    if step % 100 == 0:\n        print(loss.item())\n",
        # Python numbers.
        _HEAD + "for x in loader:\n    lr = float(scheduler.get_last_lr()[0])\n"
        "    for group in opt.param_groups:\n        v = float(group['lr'])\n",
        # After the loop.
        _HEAD + "for x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\nprint(loss.item())\n",
        # Once per epoch, after the batch loop.
        _HEAD + "for epoch in range(3):\n    for x in loader:\n        loss = model(x.to(device)).sum()\n"
        "        loss.backward()\n    print(epoch, loss.item())\n",
        # .cpu() of outputs collected in an inference loop.
        _HEAD + "preds = []\nfor x in loader:\n    preds.append(model(x.to(device)).cpu())\n",
        # A CPU tensor.
        _HEAD + "for x in loader:\n    n = torch.zeros(3).sum().item()\n",
        # A CPU-only script: `.item()` is no device sync.
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nfor x in loader:\n    loss = model(x).sum()\n"
        "    loss.backward()\n    total = loss.item()\n",
        # An explicit CPU device.
        "import torch\nimport torch.nn as nn\ndevice = torch.device('cpu')\nmodel = nn.Linear(2, 2).to(device)\n"
        "for x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n    total = loss.item()\n",
        # Synchronised on purpose every step (timing).
        _HEAD + "for x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n"
        "    torch.cuda.synchronize()\n    print(loss.item())\n",
        # A flag broadcast every step decides whether the loop goes on: inherent.
        _HEAD + "flag = torch.ones(1, device=device)\nwhile True:\n    dist.broadcast(flag, 0)\n"
        "    if flag.item() == 0:\n        break\n    loss = model(next(it).to(device)).sum()\n",
        # One generate() per sample: decoding its output is inherent.
        _HEAD + "for k in range(4):\n    y = model.generate(x, 100)\n    print(decode(y[0].tolist()))\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "total = 0.0\nfor x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n"
            "    total += loss.item()\nprint(total / 10)\n",
            fixed=_HEAD + "total = 0.0\nfor x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n"
            "    total += loss.detach().double()\ntotal = float(total)\nprint(total / 10)\n",
            line=9,
            unsafe=True,
        ),
        # an int start with a loss added: a float after the loop, as before
        Invalid(
            _HEAD + "def train(loader):\n    train_loss = 0\n    for x, y in loader:\n"
            "        loss = crit(model(x.to(device)), y.to(device))\n        loss.backward()\n"
            "        train_loss += loss.item()\n    train_loss /= len(loader)\n    return train_loss\n",
            fixed=_HEAD + "def train(loader):\n    train_loss = 0\n    for x, y in loader:\n"
            "        loss = crit(model(x.to(device)), y.to(device))\n        loss.backward()\n"
            "        train_loss += loss.detach().double()\n    train_loss = float(train_loss)\n"
            "    train_loss /= len(loader)\n    return train_loss\n",
            line=10,
            unsafe=True,
        ),
        # an int start and a value we cannot tell the type of: no fix
        Invalid(
            _HEAD + "total = 0\nfor x in loader:\n    out = model(x.to(device))\n    out.mean().backward()\n"
            "    total += out.sum().item()\nprint(total)\n",
            line=9,
        ),
        Invalid(
            _HEAD + "for x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n    if loss < best:\n"
            "        best = loss\n",
            line=8,
        ),
        # a helper that syncs, called every iteration: reported at the call
        Invalid(
            _HEAD + "def log(loss):\n    print(float(loss))\nfor x in loader:\n    loss = model(x.to(device)).sum()\n"
            "    loss.backward()\n    log(loss)\n",
            line=10,
        ),
        Invalid(
            _HEAD + "for x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n    print(loss)\n",
            line=8,
        ),
        # a count: the int start becomes int(...) where it is read
        Invalid(
            _HEAD
            + "correct = 0\nfor x, y in loader:\n    out = model(x.to(device))\n    crit(out, y.to(device)).backward()\n"
            "    correct += (out.argmax(1) == y.to(device)).sum().item()\nacc = correct / 10\n",
            fixed=_HEAD
            + "correct = 0\nfor x, y in loader:\n    out = model(x.to(device))\n    crit(out, y.to(device)).backward()\n"
            "    correct += (out.argmax(1) == y.to(device)).sum().detach()\ncorrect = int(correct)\nacc = correct / 10\n",
            line=9,
            unsafe=True,
        ),
        # an evaluation pass: a sync per batch too
        Invalid(
            _HEAD + "correct = 0\nfor x, y in loader:\n    out = model(x.to(device))\n"
            "    correct += (out.argmax(1) == y.to(device)).sum().item()\nprint(correct)\n",
            fixed=_HEAD + "correct = 0\nfor x, y in loader:\n    out = model(x.to(device))\n"
            "    correct += (out.argmax(1) == y.to(device)).sum().detach()\ncorrect = int(correct)\nprint(correct)\n",
            line=8,
            unsafe=True,
        ),
        # a condition that stops the loop reads the tensor every iteration too
        Invalid(
            _HEAD + "for x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n    if loss < 0.1:\n"
            "        break\n",
            line=8,
        ),
        # several syncs in one iteration: each reported, none fixed (one removed would gain nothing)
        Invalid(
            _HEAD
            + "total = 0.0\nfor x, y in loader:\n    out = model(x.to(device))\n    loss = crit(out, y.to(device))\n"
            "    loss.backward()\n    total += loss.item()\n    print(out.argmax(1).tolist())\nprint(total)\n",
            line=10,
        ),
        # a value unpacked from the model's output tuple, with a criterion passed in
        Invalid(
            "import torch\ndef train(model, loader, criterion, device):\n    for x, y in loader:\n"
            "        logits, aux = model(x.to(device))\n        loss = criterion(logits, y.to(device))\n"
            "        loss.backward()\n        print(loss.item())\n",
            line=7,
        ),
        # `.cpu()` only to reduce on the host
        Invalid(
            _HEAD
            + "correct = 0\nfor x, y in loader:\n    out = model(x.to(device))\n    crit(out, y.to(device)).backward()\n"
            "    correct += out.argmax(1).eq(y.to(device)).cpu().sum()\n",
            line=9,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        # (order, node, message, fix) per training loop: one finding per loop iteration.
        found: Dict[int, List[Tuple[int, cst.CSTNode, str, Optional[Dict[cst.CSTNode, Replacement]]]]] = {}
        loops: Dict[int, Loop] = {}

        def add(
            hot: HotContext,
            order: int,
            node: cst.CSTNode,
            message: str,
            fix: Optional[Dict[cst.CSTNode, Replacement]] = None,
        ) -> None:
            found.setdefault(id(hot.loop.node), []).append((order, node, message, fix))
            loops[id(hot.loop.node)] = hot.loop

        via_calls = set()
        for call in ctx.facts.calls:
            what = self._sync_kind(a, call)
            if what is None:
                continue
            hot = a.loops.hot_context(call.site)
            if hot is None or (what[1] and not hot.training) or a.roles.excluded(call.site):
                continue
            if a.loops.steps_environment(hot.loop) or self._in_decoding(a, call.site, hot.loop):
                continue  # RL acting or step-by-step decoding: the next step needs the value on the host
            if a.loops.control_exit(call.node, call.site):
                continue  # `if signal.item() == 0: break`: whether the loop goes on is read on the host
            if hot.call is not None:
                # Inside a same-file helper the loop calls every iteration: the helper's own code
                # shows the device read, so it is reported there (once, whatever loops call it).
                # Inside a same-file helper the loop calls every iteration. Where the helper's own
                # code shows the value on the device (`loss = self.model(x)`, `return loss.item()`)
                # the read is reported there; a parameter it is merely handed, at the loop's call.
                if a.roles.excluded(hot.call.site):
                    continue
                fn = a.facts.function_of(call.site.scope.function) if call.site.scope.function else None
                if fn is not None and self._read_on_device(a, call):
                    via_calls.add(id(hot.call.node))  # the loop's call is this same read
                    where = HotContext(hot.loop, hot.training, fn.name, hot.call)
                    add(hot, call.site.order, call.node, self._message(what[0], where))
                elif id(hot.call.node) not in via_calls:
                    via_calls.add(id(hot.call.node))
                    add(
                        hot,
                        hot.call.site.order,
                        hot.call.node,
                        f"`{hot.via}()` reads a device tensor on the host ({what[0]}) and "
                        "is called every iteration of the loop: each call syncs host and "
                        "device; keep values on the device and convert once after the loop",
                    )
                continue
            fix = self._accumulation_fix(ctx, call, hot) if call.method == "item" else None
            add(hot, call.site.order, call.node, self._message(what[0], hot), fix)
        for call in ctx.facts.calls:
            # `acc = accuracy(logits, y)` whose body calls `.item()` on what it is handed: the
            # call syncs when the argument is on the device here (the helper's own read may not know).
            if id(call.node) in via_calls:
                continue
            read = self._helper_sync(a, call)
            if read is None:
                continue
            hot = a.loops.hot_context(call.site)
            if hot is None or a.roles.excluded(call.site) or a.loops.steps_environment(hot.loop):
                continue
            if self._in_decoding(a, call.site, hot.loop):
                continue
            outer = hot.call if hot.call is not None else call
            if id(outer.node) in via_calls or a.roles.excluded(outer.site):
                continue
            via_calls.add(id(outer.node))
            name = hot.via if hot.call is not None else dotted_name(call.node.func)
            add(
                hot,
                outer.site.order,
                outer.node,
                f"`{name}()` reads a device tensor on the host ({read}) and "
                "is called every iteration of the loop: each call syncs host and "
                "device; keep values on the device and convert once after the loop",
            )
        for fstring, site in ctx.facts.fstrings:
            # `pbar.set_description(f"loss {loss}")`, `log(f"{acc}")`: formatting a device tensor reads it.
            hot = a.loops.hot_context(site)
            if hot is None or not hot.training or hot.call is not None or a.roles.excluded(site):
                continue
            if self._printed(ctx, fstring) or a.loops.occasional_guard(site, hot.loop):
                continue  # `print(f"...")` is reported as a print
            if any(
                isinstance(part, cst.FormattedStringExpression) and a.places.on_accelerator(part.expression, site)
                for part in fstring.parts
            ):
                add(hot, site.order, fstring, self._message("Formatting a tensor in an f-string", hot))
        for node, site in list(ctx.facts.ifs) + self._whiles(ctx):
            culprit = self._tensor_condition(a, node.test, site)
            if culprit is None or a.roles.excluded(site) or a.loops.control_exit(culprit, site):
                continue
            hot = a.loops.hot_context(site)
            if hot is None and isinstance(node, cst.While):
                loop = a.loops.loop_for(node)
                if loop is not None and a.loops.direct_hot(loop) and not a.loops.is_epoch_loop(loop):
                    hot = HotContext(loop, a.loops.trains(loop))
            if hot is None or hot.call is not None:
                continue
            add(hot, site.order, culprit, self._message("A tensor used as a condition", hot))
        for check, site in ctx.facts.asserts:
            # `assert mask.max() <= 1`: Python tests it on the host, every iteration
            culprit = self._tensor_condition(a, check.test, site)
            hot = a.loops.hot_context(site) if culprit is not None and not a.roles.excluded(site) else None
            if culprit is not None and hot is not None and hot.call is None:
                message = (
                    "`assert` of a tensor syncs host and device every iteration of the loop: Python reads "
                    "the value to test it; check it once outside the loop, or only every N steps"
                )
                add(hot, site.order, culprit, message)
        for key, items in found.items():
            if _syncs_on_purpose(a, loops[key]):
                continue  # `torch.cuda.synchronize()` every step (timing): the iteration waits anyway
            copies = _host_copies(a, loops[key])
            for _, reported, message, fix in sorted(items, key=lambda item: item[0]):
                if len(items) > 1 or copies:
                    # another sync stays in the same iteration (a second read, or a copy of a device
                    # tensor to the host: `logits.cpu().numpy()` for a metric): removing this one gains nothing
                    fix = None
                ctx.report(reported, message, replacements=fix)

    @staticmethod
    def _printed(ctx: RuleContext, fstring: cst.FormattedString) -> bool:
        parent = ctx.facts.parent_of(fstring)
        outer = ctx.facts.call_of_arg(parent) if isinstance(parent, cst.Arg) else None
        return outer is not None and isinstance(outer.node.func, cst.Name) and outer.node.func.value == "print"

    @staticmethod
    def _in_decoding(a: Analysis, site: Site, hot_loop: Loop) -> bool:
        """`site` runs in a decoding or search loop: the hot loop itself, or a loop
        nested in it (beam search per image)."""
        loop = site.loop
        while loop is not None:
            if a.loops.decodes(loop):
                return True
            if loop is hot_loop:
                return False
            loop = loop.parent
        return False

    @staticmethod
    def _whiles(ctx: RuleContext) -> List[Tuple[cst.While, Site]]:
        out = []
        for loop in ctx.facts.loops:
            if isinstance(loop.node, cst.While):
                site = ctx.facts.site_of_statement(loop.node)
                if site is not None:
                    out.append((loop.node, site))
        return out

    @staticmethod
    def _message(what: str, hot: HotContext) -> str:
        where = f"in `{hot.via}`, called every iteration of a loop" if hot.via else "every iteration of the loop"
        return (
            f"{what[:1].upper()}{what[1:]} syncs host and device {where}; keep values on the device and convert "
            "once after the loop, or only every N steps (`if step % N == 0:`)"
        )

    @staticmethod
    def _sync_kind(a: Analysis, call: Call) -> Optional[Tuple[str, bool]]:
        """(description, training_only) for a host read of a tensor on the device, or None."""
        if call.method is not None and call.receiver is not None and call.qualname is None:
            if call.method in _ALWAYS or call.method in _TRAINING_ONLY:
                if call.node.args and call.method != "tolist":
                    return None
                if a.places.on_accelerator(call.receiver, call.site):
                    if call.method == "cpu" and _reduced_on_host(a, call):
                        # `correct += pred.eq(y).cpu().sum()`: a copy only to reduce it on the host.
                        return "`.cpu()` of a value then reduced on the host", False
                    return f"`.{call.method}()`", call.method in _TRAINING_ONLY
            logged = logged_value(call, a.facts)  # `writer.add_scalar("loss", loss, step)`: read as NumPy
            if logged is not None and a.places.on_accelerator(logged, call.site):
                return f"`{call.method}()` of a tensor", False
            return None
        func = call.node.func
        if isinstance(func, cst.Name) and not a.facts.bindings_of(func.value):
            if func.value in _CASTS and len(call.node.args) == 1 and not call.node.args[0].star:
                if a.places.on_accelerator(call.node.args[0].value, call.site):
                    return f"`{func.value}()` of a tensor", False
            if func.value == "print":
                for arg in call.node.args:
                    if arg.keyword is None and _mentions_device_tensor(a, arg.value, call.site):
                        return "`print()` of a tensor", True
        return None

    @staticmethod
    def _read_on_device(a: Analysis, call: Call) -> bool:
        """The helper that holds `call` runs a model step of its own and the tensor it
        reads on the host is on the device: the read shows in the helper's code."""
        expr = call.receiver if call.method is not None else (call.node.args[0].value if call.node.args else None)
        if expr is None or a.places.tensor_place(expr, call.site) != DEVICE:
            return False
        # a step of its own: the helper runs the model (`train_step`, `_run_batch`, `test`)
        return any(a.values.model_call(c) is not None for c in a.helpers.calls_in_scope(call.site.scope))

    @staticmethod
    def _helper_sync(a: Analysis, call: Call) -> Optional[str]:
        """What a same-file helper reads on the host every call, when `call`
        hands it a value on the accelerator for that parameter."""
        fn = a.helpers.function(call)
        if fn is None:
            return SyncInLoop._project_sync(a, call)
        for param, what in a.helpers.summary(fn).syncs:
            arg = a.values.argument_for(call, fn, param)
            if arg is not None and a.places.on_accelerator(arg, call.site):
                return what
        return None

    @staticmethod
    def _project_sync(a: Analysis, call: Call) -> Optional[str]:
        """A function of another project file that reads what it is handed on the host
        (`.item()` of `torch.eq(y_true, y_pred).sum()`), or a method of an instance of a
        class of another file (`dice.update(output, target)`, `dice = metrics.DiceAverage(n)`),
        handed a value on the accelerator."""
        project = a.values.project
        if project is None:
            return None
        syncs: Callable[[Union[int, str]], Optional[str]]
        if call.qualname is not None:
            if not a.facts.calls_import(call):
                return None  # a parameter or local that shadows the import (`accuracy_fn` handed in)
            qualname = call.qualname
            syncs = lambda where: project.syncs_argument(qualname, where)  # noqa: E731
        elif call.method is not None and isinstance(call.receiver, cst.Name):
            cls = a.values.instance_qualname(call.receiver.value, call.site)
            if cls is None:
                return None
            method = call.method
            syncs = lambda where: project.method_syncs_argument(cls, method, where)  # noqa: E731
        else:
            return None
        for arg in call.node.args:
            where = call.position_of(arg)
            if where is None:
                return None
            read = syncs(where)
            if read is not None and a.places.on_accelerator(arg.value, call.site):
                return f"`.{read}()`"
        return None

    @staticmethod
    def _tensor_condition(a: Analysis, test: cst.BaseExpression, site: Site) -> Optional[cst.CSTNode]:
        if isinstance(test, cst.BooleanOperation):
            return SyncInLoop._tensor_condition(a, test.left, site) or SyncInLoop._tensor_condition(a, test.right, site)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return SyncInLoop._tensor_condition(a, test.expression, site)
        if isinstance(test, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons):
                return None
            operands = [test.left] + [c.comparator for c in test.comparisons]
            if any(a.places.on_accelerator(o, site) for o in operands):
                return test
            return None
        if isinstance(test, (cst.Call, cst.Name, cst.Attribute, cst.Subscript, cst.BinaryOperation)):
            if a.places.on_accelerator(test, site):
                return test
        return None

    # -- the accumulation fix ------------------------------------------------

    @staticmethod
    def _accumulation_fix(ctx: RuleContext, call: Call, hot: HotContext) -> Optional[Dict[cst.CSTNode, Replacement]]:
        """`total += t.item()` in the loop and `total` read after it: accumulate
        `t.detach()` on the device and turn `total` back into the Python number
        it was (`total = float(total)` or `int(total)`) right after the loop, so
        the code after the loop sees what it saw before."""
        stmt = call.site.stmt
        if not (
            isinstance(stmt, cst.AugAssign)
            and isinstance(stmt.operator, cst.AddAssign)
            and stmt.value is call.node
            and isinstance(stmt.target, cst.Name)
        ):
            return None
        loop: Optional[Loop] = call.site.loop
        if loop is None or hot.via is not None:
            return None
        loop = hot.loop
        name = stmt.target.value
        scope = call.site.scope
        # Bound before the loop, in this scope, and only accumulated inside it.
        before = [b for b in ctx.facts.scoped_bindings(name, scope) if b.site.order < loop.order]
        if not before or any(
            b.kind in (BindingKind.GLOBAL, BindingKind.NONLOCAL) for b in ctx.facts.local_bindings(name, scope)
        ):
            return None
        inside = [b for b in ctx.facts.scoped_bindings(name, scope) if loop.contains(b.site.order)]
        if len(inside) != 1:
            return None
        # An enclosing loop that re-runs this one (epochs) must reset the total before it.
        outer = loop.parent
        if outer is not None and outer.scope is scope and not any(outer.contains(b.site.order) for b in before):
            return None
        reads_after = False
        for use in ctx.facts.local_uses(name, scope):
            if use.site.scope is not scope:
                if any(s is scope for s in use.site.scope.chain()):
                    return None  # read from a nested function
                continue
            if use.site.order <= loop.end_order:
                if use.site.order >= before[-1].site.order:
                    return None  # read before or inside the loop
                continue
            reads_after = True
        if not reads_after:
            return None
        init = before[-1].value
        if before[-1].kind != BindingKind.ASSIGN or not isinstance(init, (cst.Integer, cst.Float)):
            return None
        receiver = call.receiver
        kind = _number_kind(ctx.analysis, receiver, call.site) if receiver is not None else None
        if isinstance(init, cst.Float):
            convert = _Number.FLOAT  # a float start stays a float whatever is added
        elif kind is not None:
            convert = kind  # an int start becomes what `.item()` gave: a count stays an int
        else:
            return None
        func = call.node.func
        detached: cst.BaseExpression = cst.Call(func.with_changes(attr=cst.Name("detach")))
        if kind is not _Number.INT:
            # Accumulate in float64, as the Python float sum did: each value (float32, bf16...)
            # converts exactly and the additions round alike, so the printed numbers stay the same.
            detached = cst.Call(cst.Attribute(detached, cst.Name("double")))
        if not isinstance(loop.node, (cst.For, cst.While)) or _statement_parent(ctx, loop.node) is None:
            return None
        back = cst.parse_statement(f"{name} = {convert.value}({name})\n")
        new_loop = loop.node.deep_replace(call.node, detached)
        return {loop.node: cst.FlattenSentinel([new_loop, back])}


class _Number(enum.Enum):
    """The Python number `.item()` gives; its value names the builtin that makes one."""

    INT = "int"
    FLOAT = "float"


_FLOAT_METHODS = frozenset({"float", "double", "half", "bfloat16", "mean", "std", "var", "norm"})
_INT_METHODS = frozenset({"long", "int", "short", "bool"})
_COMPARISON_METHODS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "isclose"})


def _number_kind(a: Analysis, expr: cst.BaseExpression, site: Site, depth: int = 0) -> Optional[_Number]:
    """What `expr.item()` gives: INT for a count (`(pred == y).sum()`),
    FLOAT for a loss or a float value, None when we cannot tell."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Comparison):
        return _Number.INT
    if isinstance(expr, cst.Name):
        if LOSS_NAME.search(expr.value):
            return _Number.FLOAT
        found = a.places.single_value(expr.value, site)
        return _number_kind(a, found[0], found[1], depth + 1) if found is not None else None
    if not isinstance(expr, cst.Call):
        return None
    call = a.facts.call_for(expr)
    if call is None:
        return None
    if a.values.is_loss_call(call) or LOSS_NAME.search((dotted_name(expr.func) or "").rsplit(".", 1)[-1]):
        return _Number.FLOAT
    q = (call.qualname or "").rsplit(".", 1)[-1] if (call.qualname or "").startswith("torch.") else None
    method = call.method if call.receiver is not None else q
    inner = call.receiver if call.receiver is not None else (call.positional[0].value if call.positional else None)
    if method in _FLOAT_METHODS:
        return _Number.FLOAT
    if method in _INT_METHODS or method in _COMPARISON_METHODS:
        return _Number.INT
    if method in ("sum", "count_nonzero") and inner is not None:
        if method == "count_nonzero":
            return _Number.INT
        return _number_kind(a, inner, site, depth + 1)
    return None


def _statement_parent(ctx: RuleContext, node: cst.CSTNode) -> Optional[Union[cst.Module, cst.IndentedBlock]]:
    """The block holding statement `node` (a module or an indented block)."""
    parent = ctx.facts.parent_of(node)
    return parent if isinstance(parent, (cst.Module, cst.IndentedBlock)) else None


def _mentions_device_tensor(a: Analysis, expr: cst.BaseExpression, site: Site) -> bool:
    if a.places.on_accelerator(expr, site):
        return True
    if isinstance(expr, cst.FormattedString):
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringExpression) and a.places.on_accelerator(part.expression, site):
                return True
    return False


_HOST_REDUCTIONS = frozenset({"sum", "mean", "item", "max", "min", "argmax", "argmin", "float", "int", "all", "any"})


def _reduced_on_host(a: Analysis, call: Call) -> bool:
    """`t.cpu().sum()`: the copy's result is reduced right away."""
    parent = a.facts.parent_of(call.node)
    if isinstance(parent, cst.Attribute) and parent.value is call.node and parent.attr.value in _HOST_REDUCTIONS:
        return isinstance(a.facts.parent_of(parent), cst.Call)
    return False


def _exits_block(block: cst.BaseSuite) -> bool:
    """The block ends by leaving the loop or the function (`break`, `return`, `raise`)."""
    body = block.body
    if not body:
        return False
    last = body[-1]
    smalls = (
        last.body
        if isinstance(last, cst.SimpleStatementLine)
        else (last,)
        if isinstance(block, cst.SimpleStatementSuite)
        else ()
    )
    return any(isinstance(small, (cst.Break, cst.Return, cst.Raise)) for small in smalls)


def _host_copies(a: Analysis, loop: Loop) -> bool:
    """The loop copies a device tensor to the host every iteration (`.cpu()`,
    `.numpy()`, `.tolist()` on the accelerator): a sync TL401 does not report."""
    return any(
        c.method in ("cpu", "numpy", "tolist")
        and c.receiver is not None
        and a.places.on_accelerator(c.receiver, c.site)
        and not a.loops.occasional_guard(c.site, loop)
        for c in a.loops.calls_in(loop)
    )


def _syncs_on_purpose(a: Analysis, loop: Loop) -> bool:
    """The loop calls `torch.cuda.synchronize()` every iteration (to time its steps)."""
    return any(c.qualname == "torch.cuda.synchronize" for c in a.loops.calls_in(loop))
