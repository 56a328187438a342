"""TL301 batch-size-one."""
from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.analysis.facts import Binding, Call
from torchlint.analysis.loaders import loader_calls
from torchlint.analysis.semantics import TENSOR_FACTORIES
from torchlint.rules.base import Invalid, Rule, RuleContext

_BATCH_NAME = re.compile(r"^(.*_)?(batch_?size|bs|batch)$", re.I)
_BATCH_OPTION = re.compile(r"^-{1,2}(.*[-_])?(batch[-_]?size|bs)$", re.I)
_BATCH_KEY = re.compile(r"^(.*[-_])?(batch[-_]?size|bs)$", re.I)
_CONFIG_CLASS = re.compile(r"(Config|Cfg|Args|Arguments|Params|Hparams|HParams|Settings|Options)$")
# Online, one-observation-at-a-time code (RL acting): a batch of one is inherent.
_ONLINE_MODULES = ("gym", "gymnasium", "stable_baselines3", "pettingzoo")


def _is_one(node: Optional[cst.BaseExpression]) -> bool:
    return isinstance(node, cst.Integer) and node.value == "1"


class BatchSizeOne(Rule):
    """
    ## What it does
    Flags a batch size of one: `DataLoader(batch_size=1)`, a name such as
    `batch_size`/`bs`/`batch` bound to the literal `1` that feeds a
    `batch_size=` argument or the leading dimension of tensors built in a hot
    loop, or an argparse option like `--batch-size` whose default is `1`.

    Not flagged: a project-local class or function whose `batch_size`
    parameter defaults to 1, and online code that inherently handles one
    sample at a time (reinforcement-learning acting with `gym`/`gymnasium`).

    ## Why is this bad?
    Each step launches the same kernels for one sample as it would for a
    hundred; the GPU spends its time waiting on launches and the Python loop,
    not computing. Larger batches amortise that fixed cost.

    ## Example
    ```python
    batch_size = 1
    for step in range(steps):
        x = torch.randn(batch_size, 512, device=device)
        loss = model(x).sum()
    ```

    ## Use instead
    ```python
    batch_size = 64
    ```

    ## Fix safety
    No fix: the right batch size depends on memory, the optimizer's
    hyperparameters and the data; the message suggests a larger one.

    ## References
    - [PyTorch performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL301"
    NAME = "batch-size-one"
    MESSAGE = "Batch size of 1 leaves the GPU mostly idle; use a larger batch (e.g. 32-256)"

    VALID = (
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32)\n",
        "class Runner:\n    def __init__(self, batch_size=1):\n        self.batch_size = batch_size\n",
        "import torch\nbatch_size = 1\nprint(batch_size)\n",
        "import gym\nimport torch\nbatch_size = 1\nfor step in range(10):\n"
        "    obs = torch.zeros(batch_size, 4)\n    action = policy(obs)\n    loss.backward()\n",
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--epochs', default=1)\n",
        "config = {'batch_size': 64, 'epochs': 1}\n",
        "class Policy:\n    batch_size = 1\n",
    )
    INVALID = (
        Invalid("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=1)\n", line=2),
        Invalid(
            "import torch\nbatch_size = 1\nfor step in range(10):\n    x = torch.randn(batch_size, 4)\n"
            "    loss = model(x)\n    loss.backward()\n",
            line=2,
        ),
        Invalid("config = {'lr': 0.1, 'batch_size': 1}\n", line=1),
        Invalid("from dataclasses import dataclass\n@dataclass\nclass TrainConfig:\n    batch_size: int = 1\n", line=4),
        Invalid("import argparse\np = argparse.ArgumentParser()\np.add_argument('--batch-size', type=int, default=1)\n",
                line=3),
    )

    def check(self, ctx: RuleContext) -> None:
        reported = set()

        def report(node: cst.CSTNode, how: str) -> None:
            if id(node) not in reported:
                reported.add(id(node))
                ctx.report(node, f"Batch size of 1 ({how}) leaves the GPU mostly idle; use a larger batch (e.g. 32-256)")

        for call in loader_calls(ctx.sem):
            kw = call.keyword("batch_size")
            if kw is not None and _is_one(kw.value):
                report(kw.value, "`DataLoader(batch_size=1)`")
        online = any(v.split(".")[0] in _ONLINE_MODULES for v in ctx.facts.aliases.values())
        for call in ctx.facts.calls:
            if call.method == "add_argument":
                self._argparse(call, report)
        self._config_dicts(ctx, report)
        for b in ctx.facts.bindings:
            if b.kind not in ("assign", "annassign") or b.index is not None or not _is_one(b.value):
                continue
            last = b.name.rsplit(".", 1)[-1]
            if not _BATCH_NAME.match(last) or "." in b.name:
                continue
            if b.site.scope.kind == "class":
                if _CONFIG_CLASS.search(b.site.scope.name):
                    report(b.value, "a config default")
                continue
            if len(ctx.facts.visible_bindings(b.name, b.site.scope)) != 1:
                continue  # rebound somewhere: can't tell which value reaches
            how = self._feeds(ctx, b, online)
            if how:
                report(b.value, how)

    @staticmethod
    def _config_dicts(ctx: RuleContext, report) -> None:
        """`{"batch_size": 1}` and `dict(batch_size=1)` literals."""
        found = []
        for string, site in ctx.facts.strings:  # dict keys, from the facts: no extra walk
            parent = site.parent
            if isinstance(parent, cst.DictElement) and parent.key is string and _is_one(parent.value):
                name = string.evaluated_value
                if isinstance(name, str) and _BATCH_KEY.match(name):
                    found.append(parent.value)
        for call in ctx.facts.calls:
            if isinstance(call.node.func, cst.Name) and call.node.func.value == "dict" \
                    and not ctx.facts.bindings_of("dict"):
                for arg in call.node.args:
                    if arg.keyword is not None and _BATCH_KEY.match(arg.keyword.value) and _is_one(arg.value):
                        found.append(arg.value)
        for value in found:
            report(value, "a config default")

    @staticmethod
    def _argparse(call: Call, report) -> None:
        names = [a.value for a in call.positional if isinstance(a.value, cst.SimpleString)]
        if not any(_BATCH_OPTION.match(str(n.evaluated_value)) for n in names):
            return
        kw = call.keyword("default")
        if kw is not None and _is_one(kw.value):
            report(kw.value, "an argparse default")

    @staticmethod
    def _feeds(ctx: RuleContext, b: Binding, online: bool) -> Optional[str]:
        for use in ctx.facts.uses_of(b.name):
            if use.site.scope is not b.site.scope and b.site.scope.kind != "module":
                continue
            if ctx.facts.visible_bindings(b.name, use.site.scope) != [b]:
                continue
            parent = use.site.parent
            if isinstance(parent, cst.Arg) and parent.value is use.node:
                call = _call_of_arg(ctx, use.site.order, parent)
                if call is None:
                    continue
                if parent.keyword is not None and parent.keyword.value == "batch_size":
                    if call.qualname is None and isinstance(call.node.func, cst.Name) and \
                            call.node.func.value in ctx.facts.classes:
                        continue  # a project-local class
                    return "fed to `batch_size=`"
                if (not online and call.qualname in TENSOR_FACTORIES and call.positional
                        and call.positional[0] is parent and ctx.sem.hot_loop_of(call.site) is not None):
                    return "the leading dimension of tensors built in a hot loop"
        return None


def _call_of_arg(ctx: RuleContext, order: int, arg: cst.Arg) -> Optional[Call]:
    for call in ctx.facts.calls:
        if any(a is arg for a in call.node.args):
            return call
    return None
