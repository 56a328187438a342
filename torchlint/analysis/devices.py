"""What device expressions name: `device_of(expr)` says whether an expression
names an accelerator (`"cuda"`, `torch.device("cuda" if ... else "cpu")`, a
`device` variable bound to one, an entry of a literal config dict), the CPU,
or something we cannot tell;
`move_device` where a move sends its receiver; whether the file puts anything
on an accelerator at all. The base of `Places` (places.py).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import Binding, BindingKind, Call, Facts, Part, ScopeKind, Site, dotted_name
from torchlint.analysis.helpers import Helpers
from torchlint.analysis.knowledge import LEGACY_TENSOR_TYPES, is_move_call
from torchlint.analysis.literals import dict_entry
from torchlint.analysis.place_kinds import ACCEL, CPU, DEVICE, HOST, Device, ModuleEvents, Place
from torchlint.analysis.value_kinds import MODULE
from torchlint.analysis.values import Values
from torchlint.analysis.vocabulary import (
    CPU_STRING,
    DEFAULT_DEVICE_SETTERS,
    DEVICE_CONTEXTS,
    DEVICE_NAME,
    DEVICE_STRING,
    DEVICE_VAR,
    FRAMEWORKS,
    XLA_PACKAGES,
)

_DTYPES = frozenset(
    "float float32 float64 float16 half bfloat16 double int int8 int16 int32 int64 long short uint8 bool "
    "complex64 complex128 cfloat cdouble".split()
)


def _always_runs(site: Site) -> bool:
    """Runs whenever its scope does: in no `if`, loop or handler (a `try` body counts)."""
    return all(isinstance(owner, cst.Try) and part is Part.BODY for owner, part in site.region)


def _is_cuda_type(name: str) -> bool:
    """`name` is a CUDA tensor type's: `torch.cuda.FloatTensor`, `torch.cuda.BFloat16Tensor`."""
    head, _, tail = name.rpartition(".")
    return head == "torch.cuda" and tail in LEGACY_TENSOR_TYPES


class DevicePlaces:
    """The file's device expressions; the state every place question shares."""

    if TYPE_CHECKING:  # answered by ModulePlaces (module_places.py) and Places (places.py)

        def model_place(self, model: cst.BaseExpression, site: Site) -> Place:
            raise NotImplementedError

        def tensor_place(self, expr: Optional[cst.BaseExpression], site: Site) -> Optional[Place]:
            raise NotImplementedError

    def __init__(self, facts: Facts, values: Values, helpers: Helpers, path: str = "") -> None:
        self.facts = facts
        self.values = values
        self.helpers = helpers
        self._device_cache: Dict[int, Optional[Device]] = {}
        self._tensor_cache: Dict[int, Optional[Place]] = {}
        self._model_cache: Dict[Tuple[int, int], Place] = {}
        self._events: Optional["ModuleEvents"] = None
        self._keeps: Dict[Tuple[int, str], bool] = {}
        self._device_names: Optional[List[str]] = None
        self._accelerator: Optional[bool] = None
        self._called: Optional[Set[str]] = None
        self._placing_classes: Optional[Tuple[FrozenSet[str], FrozenSet[str]]] = None
        self._accumulating: Set[int] = set()
        roots = {q.split(".", 1)[0] for q in facts.aliases.values()}
        self.framework = bool(roots & FRAMEWORKS)
        self.xla = bool(roots & XLA_PACKAGES)
        self.default_device = any(c.qualname in DEFAULT_DEVICE_SETTERS for c in facts.calls)

    # -- device expressions --------------------------------------------------------------

    @property
    def silenced(self) -> bool:
        """A framework or a default device places things: placement advice stays silent."""
        return self.framework or self.default_device

    def is_dtype_expr(self, expr: cst.BaseExpression) -> bool:
        q = self.facts.qualname(expr)
        return bool(q and q.startswith("torch.") and q.split(".", 1)[1] in _DTYPES)

    def device_of(self, expr: Optional[cst.BaseExpression], site: Site, depth: int = 0) -> Optional[Device]:
        """ACCEL, HOST (the CPU), or None (not a device, or one we cannot tell)."""
        if expr is None or depth > 6:
            return None
        key = id(expr)
        if key in self._device_cache:
            return self._device_cache[key]
        self._device_cache[key] = None
        result = self._device_of(expr, site, depth)
        self._device_cache[key] = result
        return result

    def _device_of(self, expr: cst.BaseExpression, site: Site, depth: int) -> Optional[Device]:
        if isinstance(expr, cst.SimpleString):
            if DEVICE_STRING.match(expr.value):
                return ACCEL
            return HOST if CPU_STRING.match(expr.value) else None
        if isinstance(expr, cst.FormattedString):
            head = expr.parts[0] if expr.parts else None
            if isinstance(head, cst.FormattedStringText) and re.match(r"(cuda|mps|xpu|npu)\b", head.value):
                return ACCEL
            return None
        if isinstance(expr, cst.Integer):
            return ACCEL  # `.to(0)`, `.cuda(1)`: a CUDA device index
        if isinstance(expr, cst.IfExp):
            sides = {self.device_of(expr.body, site, depth + 1), self.device_of(expr.orelse, site, depth + 1)}
            if ACCEL in sides:
                return ACCEL  # "cuda" if available else "cpu": the accelerator where there is one
            return HOST if sides == {HOST} else None
        if isinstance(expr, cst.Call):
            q = self.facts.qualname(expr.func)
            if q == "torch.device":
                return self.device_of(expr.args[0].value, site, depth + 1) if expr.args else None
            if q in ("torch.cuda.current_device", "torch.accelerator.current_accelerator"):
                return ACCEL
            return None
        if isinstance(expr, cst.Attribute) and expr.attr.value == "device":
            # `x.device` of a tensor or a model: wherever x is.
            place = self.tensor_place(expr.value, site)
            if place == DEVICE:
                return ACCEL
            if place == CPU:
                return HOST
            if self.values.expr_kind(expr.value, site) == MODULE:
                mplace = self.model_place(expr.value, site)
                return ACCEL if mplace == DEVICE else (HOST if mplace == CPU else None)
            if place is not None or self._holds_tensor(expr.value, site):
                return None  # the device of a tensor whose place we cannot tell
        if isinstance(expr, cst.Subscript):
            entry = dict_entry(self.facts, expr, site)
            return self.device_of(entry[0], entry[1], depth + 1) if entry is not None else None
        name = dotted_name(expr)
        if name is None:
            return None
        # A plain name: the bindings that reach `site` (a later `device = "cpu"`, in a
        # later notebook cell too, replaces an earlier CUDA device); an attribute: all.
        bindings = self.values.bindings_for(name, site) if "." in name else self.facts.reaching(name, site)
        found = set()
        for b in bindings:
            if b.kind == BindingKind.PARAM:
                found.add(self._param_device(b, depth))
            elif b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and b.index is None and b.value is not None:
                found.add(self.device_of(b.value, b.site, depth + 1))
            else:
                found.add(None)
        if "." in name and bindings and not any(_always_runs(b.site) for b in bindings):
            # `args.device = "cpu"` under an `if`: on the other path the attribute keeps
            # the value it came with (a command-line option), which we cannot see.
            found.add(None)
        if ACCEL in found:
            return ACCEL
        if found == {HOST}:
            return HOST
        last = name.rsplit(".", 1)[-1]
        if not bindings or None in found:
            # `args.device`, `self.device`, a `device` parameter nobody in the file calls.
            if DEVICE_NAME.search(last) and not self.is_dtype_expr(expr):
                return ACCEL if not found - {None} else None
        return None

    def _holds_tensor(self, expr: cst.BaseExpression, site: Site) -> bool:
        """`expr` is a local name bound only to tensor-valued expressions
        (an item of a container, arithmetic, a torch op or a model's output), not
        a config or namespace object such as `args` or `self`."""
        if not isinstance(expr, cst.Name):
            return False
        bindings = self.values.bindings_for(expr.value, site)
        if not bindings:
            return False
        for b in bindings:
            value = b.value
            if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or value is None:
                return False
            if isinstance(value, (cst.Subscript, cst.BinaryOperation)):
                continue
            if isinstance(value, cst.Call):
                call = self.facts.call_for(value)
                q = (call.qualname or "") if call is not None else ""
                if (q.startswith("torch.") and q != "torch.device") or (
                    call is not None and self.values.model_call(call) is not None
                ):
                    continue
            return False
        return True

    def _param_device(self, b: Binding, depth: int) -> Optional[Device]:
        fn = self.facts.function_of(b.site.scope)
        if fn is None:
            return None
        seen = set()
        for c in self.values.callers(fn):
            arg = self.values.argument_for(c, fn, b.name)
            seen.add(self.device_of(arg, c.site, depth + 1) if arg is not None else None)
        if ACCEL in seen:
            return ACCEL
        if seen == {HOST}:
            return HOST
        return None

    def move_device(self, call: Call) -> Optional[Device]:
        """Where a move call sends its receiver: ACCEL, HOST, or None (unknown/not a move)."""
        if call.method == "cuda":
            return ACCEL
        if call.method == "cpu":
            return HOST
        if call.method in ("xpu", "mps", "ipu"):
            return ACCEL
        if call.method == "to":
            target = self.move_target(call)
            return self.device_of(target, call.site) if target is not None else None
        return None

    def casts_to_cuda_type(self, call: Call) -> bool:
        """`x.type(Tensor)` with `Tensor = torch.cuda.FloatTensor if cuda else
        torch.FloatTensor` (the legacy idiom), `x.type(torch.cuda.FloatTensor)` or
        `x.type("torch.cuda.FloatTensor")`: a copy to the GPU where one is used (a
        name bound to a CUDA type in one branch of an `if` counts as in a conditional
        expression)."""
        if call.method != "type" or call.receiver is None or len(call.node.args) != 1:
            return False
        arg = call.node.args[0]
        return arg.keyword is None and not arg.star and self._cuda_type(arg.value, call.site, 0)

    def cuda_type_constructor(self, call: Call) -> bool:
        """`Tensor(data)` with `Tensor` a CUDA tensor type (`torch.cuda.FloatTensor`, or a
        name bound to one under a condition, as in `casts_to_cuda_type`): built on the GPU."""
        return self._cuda_type(call.node.func, call.site, 0)

    def _cuda_type(self, expr: cst.BaseExpression, site: Site, depth: int) -> bool:
        if isinstance(expr, cst.SimpleString):
            return _is_cuda_type(str(expr.evaluated_value))
        if isinstance(expr, cst.IfExp):
            return self._cuda_type(expr.body, site, depth) or self._cuda_type(expr.orelse, site, depth)
        q = self.facts.qualname(expr) if isinstance(expr, (cst.Attribute, cst.Name)) else None
        if q is not None and _is_cuda_type(q):
            return True
        if isinstance(expr, cst.Name) and depth < 3:
            # as for `a if cuda else b`: a CUDA type in one branch is the type a GPU run uses
            return any(
                b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
                and b.value is not None
                and b.index is None
                and self._cuda_type(b.value, b.site, depth + 1)
                for b in self.facts.reaching(expr.value, site)
            )
        return False

    def move_target(self, call: Call) -> Optional[cst.BaseExpression]:
        """The device expression of `.to(dev)` / `.to(device=dev)` / `.cuda()`,
        None when this is not certainly a device move (`.to(torch.float16)`)."""
        if call.method == "cuda":
            if not call.node.args:
                return cst.SimpleString('"cuda"')
            arg = call.node.args[0]
            if isinstance(arg.value, cst.Integer) and arg.keyword is None:
                return cst.SimpleString(f'"cuda:{arg.value.value}"')
            return None
        if call.method != "to":
            return None
        kw = call.keyword("device")
        if kw is not None:
            return kw.value
        pos = call.positional
        if not pos or self.is_dtype_expr(pos[0].value):
            return None
        value = pos[0].value
        if isinstance(value, (cst.SimpleString, cst.Integer, cst.FormattedString)) or (
            isinstance(value, cst.Call) and self.facts.qualname(value.func) == "torch.device"
        ):
            return value
        name = dotted_name(value)
        if name is None:
            # `config["device"]`: a device when it names one
            return value if isinstance(value, cst.Subscript) and self.device_of(value, call.site) is not None else None
        if DEVICE_NAME.search(name.rsplit(".", 1)[-1]) or self.device_of(value, call.site) is not None:
            return value
        return None

    def accelerator_in_play(self) -> bool:
        """The file puts something on an accelerator: a move, a `device=` or a
        device variable that resolves to one (printing `torch.cuda.is_available()`
        alone is not)."""
        if self._accelerator is None:
            self._accelerator = self._find_accelerator()
        return self._accelerator

    def _find_accelerator(self) -> bool:
        for call in self.facts.calls:
            if is_move_call(call) and self.move_device(call) == ACCEL:
                target = self.move_target(call)
                if target is None or not self._follows_a_tensor(target, call.site):
                    return True
            kw = call.keyword("device")
            if (
                kw is not None
                and not self._follows_a_tensor(kw.value, call.site)
                and self.device_of(kw.value, call.site) == ACCEL
            ):
                return True
        return any(
            self.device_of(b.value, b.site) == ACCEL and self._read(b)
            for name in self.device_names()
            for b in self.facts.bindings_of(name)
            if b.value is not None
        )

    def chooses_cpu(self) -> bool:
        """The file chooses where its work runs, and chooses the CPU: nothing goes
        to an accelerator, and some move or `device=` names a device held by a
        variable or a config entry that is the CPU (`device = "cpu"`,
        `config["training"]["device"]` of a literal config holding `"cpu"`).
        Pulling results back (`.to("cpu")`, `.cpu()`) is no choice of device, nor
        is a parameter's default (`device=torch.device("cpu")`): callers pass theirs."""
        if self.accelerator_in_play():
            return False
        for call in self.facts.calls:
            target = self.move_target(call) if is_move_call(call) else None
            kw = call.keyword("device")
            for expr in (target, kw.value if kw is not None else None):
                if expr is not None and self._chosen(expr, call.site) and self.device_of(expr, call.site) == HOST:
                    return True
        return False

    def _chosen(self, expr: cst.BaseExpression, site: Site) -> bool:
        """`expr` reads a device the code chose: a config entry, or a name every
        reaching binding of which assigns it (no parameter)."""
        if isinstance(expr, cst.Subscript):
            return True
        if not isinstance(expr, cst.Name):
            return False
        bindings = self.facts.reaching(expr.value, site)
        return bool(bindings) and all(b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) for b in bindings)

    def _read(self, b: Binding) -> bool:
        """Some read of `b.name` may see binding `b`: a device chosen and then
        replaced before any use (`device = "cpu"` in a later notebook cell) is
        never used. A module-level name read by no one still counts (another
        module may import it)."""
        uses = self.facts.local_uses(b.name, b.site.scope)
        if not uses:
            return b.site.scope.kind == ScopeKind.MODULE
        return any(b in self.facts.reaching(b.name, u.site) for u in uses)

    def _follows_a_tensor(self, expr: cst.BaseExpression, site: Site) -> bool:
        """`x.device` of a tensor, or of a parameter of a same-file module's
        method (`torch.arange(n, device=x.device)` in a forward): a place that
        follows another tensor's and by itself puts nothing on an accelerator.
        `self.device`, `args.device`, `trainer.device` are device choices."""
        if not (isinstance(expr, cst.Attribute) and expr.attr.value == "device"):
            return False
        base = expr.value
        if not isinstance(base, cst.Name) or base.value == "self":
            return False
        if self._holds_tensor(base, site):
            return True
        bindings = self.values.bindings_for(base.value, site)
        in_module = any(
            s.kind == ScopeKind.CLASS and s.name in self.values.module_classes() for s in site.scope.chain()
        )
        return in_module and bool(bindings) and all(b.kind == BindingKind.PARAM for b in bindings)

    def selects_device(self) -> bool:
        """The file chooses a device at all (the CPU included): `torch.device(...)`,
        a device variable, a device string, a move, or `device=`."""
        if self.device_names():
            return True
        for call in self.facts.calls:
            if call.qualname == "torch.device" or is_move_call(call) or call.keyword("device") is not None:
                return True
        return any(DEVICE_STRING.match(s.value) or CPU_STRING.match(s.value) for s, _ in self.facts.strings)

    def device_names(self) -> List[str]:
        """Plain names that hold a device (`device`, `dev`, `x = torch.device(...)`)."""
        if self._device_names is None:
            names = set()
            for name, bindings in self.facts._bindings_by_name.items():
                if "." in name:
                    continue
                if DEVICE_VAR.match(name):
                    names.add(name)
                    continue
                for b in bindings:
                    if (
                        isinstance(b.value, cst.Call)
                        and self.facts.qualname(b.value.func) == "torch.device"
                        and b.index is None
                    ):
                        names.add(name)
                        break
            self._device_names = sorted(names, key=lambda n: (n != "device", n))
        return self._device_names

    def device_var(self, site: Site) -> Optional[str]:
        """A name holding an accelerator device that code at `site` can use."""
        for name in self.device_names():
            found = self.facts.bindings_of(name)
            for s in site.scope.chain():
                if s is not site.scope and s.kind == ScopeKind.CLASS:
                    continue
                here = [b for b in found if b.site.scope is s]
                if not here:
                    continue
                if s is not site.scope or any(b.site.order < site.order for b in here):
                    if any(b.value is not None and self.device_of(b.value, b.site) == HOST for b in here) and not any(
                        b.value is not None and self.device_of(b.value, b.site) == ACCEL for b in here
                    ):
                        break  # `device = "cpu"`: not an accelerator
                    return name
                break
        return None

    def under_device_context(self, site: Site) -> bool:
        """Inside `with torch.device(...):`, where factories and layers allocate on that device."""
        for w in site.withs:
            for item in w.items:
                expr = item.item
                if isinstance(expr, cst.Call) and self.facts.qualname(expr.func) in DEVICE_CONTEXTS:
                    return True
        return False
