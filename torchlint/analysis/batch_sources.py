"""Where a batch comes from: `batch_source(expr, site)` says whether a value is
drawn from a DataLoader (or an iterator over one) whose batches stay on the
CPU, through names, `next(...)` and wrappers; a dataset whose items a
formatter or its own code places on the device does not count.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call, Site, dotted_name
from torchlint.analysis.module_places import ModulePlaces
from torchlint.analysis.place_kinds import ACCEL, DEVICE
from torchlint.analysis.value_kinds import LOADER
from torchlint.analysis.vocabulary import ITER_WRAPPERS, LOADER_NAME, PLACING_NAME


class BatchSources(ModulePlaces):
    """Batches drawn from loaders, on top of the module places."""

    def next_batch(self, value: Optional[cst.BaseExpression], site: Site) -> bool:
        """`next(iter(loader))` / `next(it)` with `it = iter(loader)`: a CPU batch."""
        if not (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "next"
            and value.args
        ):
            return False
        inner = value.args[0].value
        if (
            isinstance(inner, cst.Call)
            and isinstance(inner.func, cst.Name)
            and inner.func.value == "iter"
            and inner.args
        ):
            return self.batch_source(inner.args[0].value, site)
        if isinstance(inner, cst.Name):
            bs = self.values.bindings_for(inner.value, site)
            return (
                len(bs) == 1
                and bs[0].value is not None
                and isinstance(bs[0].value, cst.Call)
                and isinstance(bs[0].value.func, cst.Name)
                and bs[0].value.func.value == "iter"
                and bool(bs[0].value.args)
                and self.batch_source(bs[0].value.args[0].value, bs[0].site)
            )
        return False

    def batch_source(self, expr: Optional[cst.BaseExpression], site: Site) -> bool:
        """An iterable whose items are CPU batches: a torch DataLoader (through
        enumerate/tqdm), with no custom collate_fn."""
        while isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            name = dotted_name(expr.func) or ""
            if call is None or not (
                name in ITER_WRAPPERS
                or (call.qualname or "") in ITER_WRAPPERS
                or (call.qualname or "").startswith("tqdm")
            ):
                break
            if not call.positional:
                return False
            expr = call.positional[0].value
        if expr is None:
            return False
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            return (
                call is not None
                and self.values.call_kind(call) == LOADER
                and call.keyword("collate_fn") is None
                and not self.values.opaque_call(call)
            )
        loader = dotted_name(expr)
        if loader is None or PLACING_NAME.search(loader):
            return False
        return self._loader_name(loader, site, 0)

    def _loader_name(self, name: str, site: Site, depth: int) -> bool:
        """Every binding of `name` is a torch DataLoader without a custom
        collate_fn, or a parameter named like a loader (a DataLoader yields CPU
        batches unless something we would see places them)."""
        bindings = self.values.bindings_for(name, site)
        if not bindings or depth > 3:
            return False
        for b in bindings:
            if b.kind == BindingKind.PARAM:
                if not LOADER_NAME.search(b.name) and self.values.param_kind(b) != LOADER:
                    return False
                continue
            if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.index is not None or b.value is None:
                return False
            if isinstance(b.value, (cst.Name, cst.Attribute)):
                inner = dotted_name(b.value)
                if inner is None or PLACING_NAME.search(inner) or not self._loader_name(inner, b.site, depth + 1):
                    return False
                continue
            if not isinstance(b.value, cst.Call) or not self._cpu_loader_call(b.value, depth):
                return False
        return True

    def _cpu_loader_call(self, node: cst.Call, depth: int) -> bool:
        """A torch DataLoader call (or a same-file function whose every return is
        one) with no custom collate_fn and a dataset that does not place items."""
        call = self.facts.call_for(node)
        if call is None or depth > 3:
            return False
        fn = self.helpers.function(call)
        if fn is not None:
            returns = [(r.value, s) for r, s in self.facts.returns_of(fn)]
            return bool(returns) and all(
                isinstance(v, cst.Call) and self._cpu_loader_call(v, depth + 1) for v, s in returns
            )
        if (
            self.values.call_kind(call) != LOADER
            or call.keyword("collate_fn") is not None
            or call.has_star_kwargs
            or self.values.opaque_call(call)
        ):
            return False
        return not self._dataset_places(call)

    def _format_call_places(self, node: cst.Call) -> bool:
        device = _format_device(node)
        call = self.facts.call_for(node)
        return device is not None and call is not None and self.device_of(device, call.site) == ACCEL

    def _formatted_on_device(self, name: str) -> bool:
        """`name.set_format(type="torch", device="cuda")`: the dataset's items are on the device."""
        return any(
            c.method == "set_format" and dotted_name(c.receiver) == name and self._format_call_places(c.node)
            for c in self.facts.calls
        )

    def _dataset_places(self, loader: Call) -> bool:
        """The loader's dataset may hand out device tensors: a TensorDataset of
        moved tensors, a same-file dataset class that moves or creates on a device."""
        ds = loader.keyword("dataset")
        expr = ds.value if ds is not None else (loader.positional[0].value if loader.positional else None)
        for _ in range(3):
            if isinstance(expr, cst.Name):
                if self._formatted_on_device(expr.value):
                    return True
                bs = [
                    b for b in self.facts.visible_bindings(expr.value, loader.site.scope) if b.kind != BindingKind.PARAM
                ]
                expr = bs[0].value if len(bs) == 1 else None
            elif isinstance(expr, cst.Call) and self._format_call_places(expr):
                return True
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        if isinstance(func, cst.Name) and func.value in self.facts.classes:
            return self.class_places(func.value)
        for arg in expr.args:
            if self.tensor_place(arg.value, loader.site) == DEVICE:
                return True
        return False


def _format_device(node: cst.Call) -> Optional[cst.BaseExpression]:
    """The `device=` of `ds.set_format(...)` / `ds.with_format(...)` (Hugging Face datasets)."""
    if not (isinstance(node.func, cst.Attribute) and node.func.attr.value in ("set_format", "with_format")):
        return None
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            return arg.value
    return None
