"""TL302 loader-no-workers."""
from __future__ import annotations

import libcst as cst

from torchlint.analysis.facts import Call
from torchlint.analysis.loaders import (
    class_places_on_device,
    dataset_class,
    dataset_expr,
    loader_calls,
    tensor_dataset_call,
    with_keyword,
)
from torchlint.findings import Applicability
from torchlint.rules.base import Invalid, Rule, RuleContext

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, ...)
_NUM_WORKERS_POSITION = 5
_WORKERS = "min(8, {os}.cpu_count() or 1)"


def _starred(call: Call) -> bool:
    return any(a.star for a in call.node.args)


class LoaderNoWorkers(Rule):
    """
    ## What it does
    Flags a `torch.utils.data.DataLoader` built without `num_workers` (or with
    `num_workers=0`) in a file where a device is in play. Loaders over an
    in-memory `TensorDataset`, and calls passing `**kwargs` that could carry
    `num_workers`, are not flagged.

    ## Why is this bad?
    With no workers, every batch is loaded, decoded and augmented in the main
    process, between GPU steps: the GPU waits for the CPU each iteration.
    Worker processes prepare the next batches while the GPU computes.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    import os

    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
    ```

    ## Fix safety
    The fix is unsafe: worker processes need a picklable dataset, run
    `__getitem__` in other processes (global state, random seeds and open
    handles behave differently), and on platforms that spawn workers the
    script needs an `if __name__ == "__main__":` guard. The fix sets
    `num_workers=min(8, os.cpu_count() or 1)` and adds `import os` when the
    file does not import it.

    ## References
    - [torch.utils.data: single- and multi-process data loading](https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading)
    - [PyTorch performance tuning guide: asynchronous data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    CODE = "TL302"
    NAME = "loader-no-workers"
    MESSAGE = "DataLoader loads batches in the main process (no `num_workers`); the GPU waits for data"
    FIX_TITLE = "Set `num_workers=min(8, os.cpu_count() or 1)`"
    APPLICABILITY = Applicability.UNSAFE
    REQUIRES_DEVICE = True

    VALID = (
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=4)\nx.to('cuda')\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n",
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.randn(8, 2))\nloader = DataLoader(ds)\nx.cuda()\n",
        "from torch.utils.data import DataLoader\ndef make(ds, **kw):\n    return DataLoader(ds, **kw)\nx.cuda()\n",
        "class DataLoader:\n    pass\nloader = DataLoader(ds)\nx.cuda()\n",
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=True)\nx.cuda()\n",
            fixed="import os\nimport torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, pin_memory=True, num_workers=min(8, os.cpu_count() or 1))\nx.cuda()\n",
            line=3,
            unsafe=True,
        ),
        Invalid(
            "import os\nimport torch.utils.data as tud\nloader = tud.DataLoader(ds, num_workers=0, pin_memory=True)\n"
            "device = 'cuda'\n",
            fixed="import os\nimport torch.utils.data as tud\n"
            "loader = tud.DataLoader(ds, num_workers=min(8, os.cpu_count() or 1), pin_memory=True)\ndevice = 'cuda'\n",
            line=3,
            unsafe=True,
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        for call in loader_calls(ctx.sem):
            if call.has_star_kwargs or _starred(call):
                continue
            if len(call.positional) > _NUM_WORKERS_POSITION:
                continue
            kw = call.keyword("num_workers")
            if kw is not None and not (isinstance(kw.value, cst.Integer) and kw.value.evaluated_value == 0):
                continue
            if tensor_dataset_call(ctx.sem, dataset_expr(call), call.site) is not None:
                continue
            cls = dataset_class(ctx.sem, dataset_expr(call), call.site)
            if cls is not None and class_places_on_device(ctx.sem, cls):
                continue  # items built on the GPU: worker processes cannot use CUDA after fork
            msg = ("DataLoader has `num_workers=0`" if kw is not None else "DataLoader has no `num_workers`") + (
                ": batches are loaded in the main process between GPU steps; use worker processes")
            ctx.report(call.node, msg, replacements=self._fix(ctx, call))

    @staticmethod
    def _fix(ctx: RuleContext, call: Call):
        facts = ctx.facts
        os_alias = facts.module_alias("os")
        if os_alias is not None and not any(
                b.kind == "import" for b in facts.visible_bindings(os_alias, call.site.scope)):
            return None  # imported somewhere else (inside another function): don't guess
        replacements = {}
        if os_alias is None:
            if facts.bindings_of("os"):
                return None  # `os` means something else here
            anchor = _import_anchor(ctx.module)
            if anchor is None:
                return None
            stmt, before = anchor
            import_os = cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(cst.Name("os"))])])
            if before:
                # Take over the anchor's leading comments/blank lines.
                import_os = import_os.with_changes(leading_lines=stmt.leading_lines)
                replacements[stmt] = cst.FlattenSentinel([import_os, stmt.with_changes(leading_lines=[])])
            else:
                replacements[stmt] = cst.FlattenSentinel([stmt, import_os])
            os_alias = "os"
        value = cst.parse_expression(_WORKERS.format(os=os_alias))
        replacements[call.node] = with_keyword(call.node, "num_workers", value)
        return replacements


def _import_anchor(module: cst.Module):
    """Where `import os` goes: (statement, insert before it?). In the first run
    of plain `import x` lines, in alphabetical order; else before the first
    import (after `from __future__`)."""
    plain_run = []
    first_import = None
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None
        if isinstance(small, cst.ImportFrom) and isinstance(small.module, cst.Name) and small.module.value == "__future__":
            continue
        if isinstance(small, cst.Import):
            if plain_run and stmt.leading_lines:
                break  # a blank line or comment ends the block
            plain_run.append((stmt, _import_name(small)))
            first_import = first_import or stmt
            continue
        if isinstance(small, cst.ImportFrom):
            first_import = first_import or stmt
        if plain_run:
            break
        if first_import is not None and not isinstance(small, cst.ImportFrom):
            break
    if plain_run:
        for stmt, name in plain_run:
            if name > "os":
                return stmt, True
        return plain_run[-1][0], False
    return (first_import, True) if first_import is not None else None


def _import_name(node: cst.Import) -> str:
    from torchlint.analysis.facts import dotted_name

    return dotted_name(node.names[0].name) or ""
