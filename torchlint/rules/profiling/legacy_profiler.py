"""TL501 legacy-profiler."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.facts import Call, dotted_name
from torchlint.analysis.knowledge import LEGACY_PROFILERS
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Replacement, Rule, RuleContext
from torchlint.rules.nodes import comment_follows, module_at, with_keyword

_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))

LEGACY = LEGACY_PROFILERS
# Keywords the new profiler accepts with the same meaning.
_CARRIED = frozenset({"record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"})
# Methods of the result whose meaning is the same on both profilers.
# Methods both profilers have, with the same meaning.
_SAFE_USES = frozenset({"key_averages", "export_chrome_trace", "export_stacks"})
# The legacy profiler's own attributes, read through the new profiler's `events()`
# (the same EventList type, filled by Kineto: other events, hence unsafe).
_THROUGH_EVENTS = frozenset({"function_events", "table", "total_average", "self_cpu_time_total"})


class LegacyProfiler(Rule):
    """
    ## What it does
    Flags `torch.autograd.profiler.profile(...)`, the legacy autograd profiler.

    ## Why is this bad?
    The legacy profiler records CPU-side operator events; with `use_cuda=True`
    it adds CUDA events around each operator, which synchronizes and distorts
    the very timings you want to see, and it cannot show what the GPU does
    between kernels. `torch.profiler.profile` with CPU and CUDA activities uses
    Kineto/CUPTI to trace kernels and copies on the device timeline, which is
    what you need to find why a GPU sits idle.

    ## Example
    ```python
    import torch
    from torch.autograd import profiler

    model = torch.nn.Linear(128, 10)
    x = torch.randn(64, 128)
    with profiler.profile(use_cuda=True) as prof:
        model(x).sum().backward()
    print(prof.key_averages().table())
    ```

    ## Use instead
    ```python
    import torch

    model = torch.nn.Linear(128, 10)
    x = torch.randn(64, 128)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    ) as prof:
        model(x).sum().backward()
    print(prof.key_averages().table())
    ```

    ## Fix safety
    Safe when the profiler's result is used only through `key_averages()`,
    `export_chrome_trace()` and `export_stacks()`, which both profilers
    provide with the same meaning (or not bound at all). Unsafe when the
    legacy profiler's own attributes are read: the new profiler has none of
    them, so the fix reads them through its `events()` (`prof.function_events`
    becomes `prof.events()`, `prof.table(...)` becomes
    `prof.events().table(...)`, likewise `total_average()` and
    `self_cpu_time_total`); the events then come from Kineto, so their
    contents differ. Any other attribute gets no fix. When the profiler object itself
    is printed, formatted or handed on (`print(prof)` shows a table only for
    the legacy profiler), no fix is offered: the message suggests printing
    `prof.key_averages().table()`. No fix either when the call passes
    anything but a literal `use_cuda=True/False`, `use_device="cuda"`,
    `record_shapes`, `profile_memory`, `with_stack`, `with_flops` or
    `with_modules`. The fix needs `torch` imported as a module (imported
    before the call, or the fix imports it before).

    Only reported where CUDA is in play (`use_cuda=True`, or a file that puts
    something on an accelerator): on a CPU-only script both profilers see
    the same operators.

    ## References
    - [torch.profiler](https://pytorch.org/docs/stable/profiler.html)
    - [PyTorch profiler recipe](https://pytorch.org/tutorials/recipes/recipes/profiler_recipe.html)
    """

    CODE = "TL501"
    NAME = "legacy-profiler"
    MESSAGE = "Legacy `torch.autograd.profiler.profile`; use `torch.profiler.profile` with CPU and CUDA activities"
    FIX_TITLE = "Use `torch.profiler.profile(activities=[...])`"
    APPLICABILITY = Applicability.SAFE

    VALID = (
        "import torch\nwith torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:\n    pass\n",
        "from torch.profiler import profile\nwith profile() as p:\n    pass\n",
        "import profiler\nwith profiler.profile(use_cuda=True) as p:\n    pass\n",
        # a CPU-only script: both profilers see the same operators
        "import torch\nfrom torch.autograd import profiler\nwith profiler.profile() as prof:\n    run()\n"
        "print(prof.key_averages().table())\n",
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch.autograd import profiler\n\n"
            "with profiler.profile(use_cuda=True) as prof:\n    run()\n"
            "print(prof.key_averages().table())\n",
            fixed="import torch\nfrom torch.autograd import profiler\n\n"
            "with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, "
            "torch.profiler.ProfilerActivity.CUDA]) as prof:\n    run()\n"
            "print(prof.key_averages().table())\n",
            line=4,
        ),
        Invalid(
            "import torch as T\nx = T.zeros(2).cuda()\nwith T.autograd.profiler.profile(record_shapes=True) as prof:\n"
            "    run()\nprof.export_chrome_trace('t.json')\n",
            fixed="import torch as T\nx = T.zeros(2).cuda()\nwith T.profiler.profile(record_shapes=True, "
            "activities=[T.profiler.ProfilerActivity.CPU]) as prof:\n    run()\n"
            "prof.export_chrome_trace('t.json')\n",
            line=3,
        ),
        Invalid(
            "import torch\nwith torch.autograd.profiler.profile(use_cuda=True) as prof:\n    run()\n"
            "events = prof.function_events\n",
            fixed="import torch\nwith torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, "
            "torch.profiler.ProfilerActivity.CUDA]) as prof:\n    run()\nevents = prof.events()\n",
            line=2,
            unsafe=True,
        ),
        Invalid("from torch.autograd import profiler\nwith profiler.profile(use_cuda=True):\n    run()\n", line=2),
        # printed: the new profiler prints no table, so no fix
        Invalid(
            "import torch\nwith torch.autograd.profiler.profile(use_cuda=True) as prof:\n    run()\nprint(prof)\n",
            line=2,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        for call in ctx.facts.calls:
            if call.qualname not in LEGACY:
                continue
            if not (self._profiles_cuda(call) or ctx.analysis.places.accelerator_in_play()):
                continue  # CPU-only profiling: both profilers see the same CPU operators
            found = module_at(ctx, "torch", call.site, add_missing=False)
            fixed = self._fixed(call, found[0], comment_follows(ctx, call.node)) if found else None
            uses, renamed = self._result_uses(ctx, call)
            if found is None or fixed is None or uses == "other":
                ctx.report(call.node)  # the result is printed or read in ways the new profiler changes
                continue
            ctx.report(
                call.node,
                replacements={**found[1], **renamed, call.node: fixed},
                applicability=Applicability.SAFE if uses == "safe" else Applicability.UNSAFE,
            )

    @staticmethod
    def _profiles_cuda(call: Call) -> bool:
        for arg in call.node.args:
            name = arg.keyword.value if arg.keyword else None
            if name == "use_cuda" and isinstance(arg.value, cst.Name) and arg.value.value == "True":
                return True
            if name == "use_device" and isinstance(arg.value, cst.SimpleString) and arg.value.evaluated_value == "cuda":
                return True
        return False

    @staticmethod
    def _fixed(call: Call, torch: str, comment_after: bool = False) -> Optional[cst.Call]:
        """The new profiler's call, laid out as the old one was: the carried
        keywords keep their lines and comments, `use_cuda`/`use_device` go,
        and `activities=` is added as `with_keyword` adds a keyword."""
        use_cuda = False
        kept: List[cst.Arg] = []
        args = list(call.node.args)
        for arg in args:
            name = arg.keyword.value if arg.keyword else None
            if name == "use_cuda":
                if not isinstance(arg.value, cst.Name) or arg.value.value not in ("True", "False"):
                    return None
                use_cuda = arg.value.value == "True"
            elif name == "use_device":
                if not isinstance(arg.value, cst.SimpleString) or arg.value.evaluated_value != "cuda":
                    return None
                use_cuda = True
            elif name in _CARRIED:
                kept.append(arg)
            else:
                return None
        if args and kept and kept[-1] is not args[-1]:
            # The last argument went: the new last one ends the list as it did.
            kept[-1] = kept[-1].with_changes(comma=args[-1].comma, whitespace_after_arg=args[-1].whitespace_after_arg)
        acts = ["CPU", "CUDA"] if use_cuda else ["CPU"]
        activities = cst.parse_expression("[" + ", ".join(f"{torch}.profiler.ProfilerActivity.{a}" for a in acts) + "]")
        func = cst.parse_expression(f"{torch}.profiler.profile")
        if not kept:
            new = cst.Arg(activities, keyword=cst.Name("activities"), equal=_EQ)
            if args:
                new = new.with_changes(comma=args[-1].comma, whitespace_after_arg=args[-1].whitespace_after_arg)
            return call.node.with_changes(func=func, args=[new])
        return with_keyword(call.node.with_changes(func=func, args=kept), "activities", activities, comment_after)

    @staticmethod
    def _result_uses(ctx: RuleContext, call: Call) -> Tuple[str, Dict[cst.CSTNode, Replacement]]:
        """ "safe": the result is bound by `with ... as name` and only
        `name.key_averages()` / `name.export_chrome_trace()` /
        `name.export_stacks()` read it (or it is not bound); "unsafe": the
        legacy profiler's own attributes are read too (with the edits that
        read them through `events()`); "other": the profiler object itself is
        printed, formatted or handed on (`print(prof)` shows a table only for
        the legacy profiler), or an attribute the new profiler lacks is read."""
        parent = call.site.parent
        if not isinstance(parent, cst.WithItem):
            return "other", {}
        if parent.asname is None:
            return "safe", {}
        name = dotted_name(parent.asname.name)
        if name is None or "." in name:
            return "other", {}
        result = "safe"
        renamed: Dict[cst.CSTNode, Replacement] = {}
        for use in ctx.facts.local_uses(name, call.site.scope):
            if use.site.order <= call.site.order:
                continue
            attr = use.site.parent
            if not (isinstance(attr, cst.Attribute) and attr.value is use.node):
                return "other", {}
            if attr.attr.value in _SAFE_USES:
                continue
            if attr.attr.value not in _THROUGH_EVENTS:
                return "other", {}
            result = "unsafe"
            events = cst.Call(cst.Attribute(use.node, cst.Name("events")))
            renamed[attr] = events if attr.attr.value == "function_events" else attr.with_changes(value=events)
        return result, renamed
