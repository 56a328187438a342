"""Where values live, as facts at a point of the program.

- `device_of(expr)`: does an expression name an accelerator (`"cuda"`,
  `torch.device("cuda" if ... else "cpu")`, a `device` variable bound to one),
  the CPU, or something we cannot tell?
- `model_place(model, site)`: is the model on the accelerator *at that
  statement*? Moves count in statement order (notebook cells in their order);
  a move that runs on every path to the statement (or under
  `if torch.cuda.is_available():`) counts; a move in one branch of an
  unrelated `if`, or a model handed to code we cannot see, makes it unknown.
- `tensor_place(expr, site)`: DEVICE, CPU, TENSOR (a tensor whose place we
  cannot tell) or None (not known to be a tensor), through factories, moves,
  model outputs, losses, arithmetic, same-file helpers' returns, unpacked
  outputs and the reaching bindings of names.

Precision first: every question answers "unknown" when a value could have
been placed somewhere we cannot see, and rules stay silent then.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import (
    Binding,
    BindingKind,
    Call,
    Facts,
    Function,
    Loop,
    Part,
    Scope,
    ScopeKind,
    Site,
    dominates,
    dotted_name,
    group_under_scopes,
    strip_methods,
)
from torchlint.analysis.helpers import Helpers, is_move_call, root_name
from torchlint.analysis.knowledge import TUPLE_METHODS
from torchlint.analysis.values import LOADER, MODULE, TOKENS, ModelCall, Values
from torchlint.analysis.vocabulary import (
    CHAIN_METHODS,
    COPIES,
    CPU_STRING,
    CPU_TENSOR_SOURCES,
    DEFAULT_DEVICE_SETTERS,
    DEVICE_CONTEXTS,
    DEVICE_NAME,
    DEVICE_STRING,
    DEVICE_VAR,
    FRAMEWORKS,
    ITER_WRAPPERS,
    LEGACY_TENSOR_TYPES,
    LOADER_NAME,
    NON_PLACING,
    PLACERS,
    PLACING_NAME,
    VARIABLE,
    WRAPPER_CLASSES,
    XLA_PACKAGES,
)


class Device(enum.Enum):
    """What a device expression names (`device_of`, `move_device`)."""

    ACCEL = "accel"  # an accelerator
    HOST = "cpu"


class Place(enum.Enum):
    """Where a module or tensor lives."""

    DEVICE = "device"
    CPU = "cpu"
    TENSOR = "tensor"  # with the tensors it was made from (`x * 2`)
    UNKNOWN = "unknown"
    WRAPPED = "wrapped"  # a wrapper (Accelerate, Lightning, DeepSpeed) places it


ACCEL, HOST = Device.ACCEL, Device.HOST
DEVICE, CPU, TENSOR, UNKNOWN, WRAPPED = Place.DEVICE, Place.CPU, Place.TENSOR, Place.UNKNOWN, Place.WRAPPED

_DTYPES = frozenset(
    "float float32 float64 float16 half bfloat16 double int int8 int16 int32 int64 long short uint8 bool "
    "complex64 complex128 cfloat cdouble".split()
)
# Tensor methods that do not return a tensor.
_NON_TENSOR_METHODS = frozenset(
    "item tolist numpy size dim ndimension numel nelement data_ptr element_size is_contiguous is_floating_point "
    "is_complex is_cuda backward register_hook get_device stride storage_offset untyped_storage "
    "__len__ __repr__ __str__ __format__ equal allclose all_close is_set_to is_pinned "
    "keys values items parameters named_parameters modules children named_modules state_dict "
    "step append extend split chunk unbind tensor_split sort topk kthvalue".split()
)
_NON_TENSOR_ATTRS = frozenset(
    "shape device dtype ndim requires_grad is_cuda is_leaf layout names grad_fn is_sparse is_quantized "
    "is_meta itemsize nbytes".split()
)
_TENSOR_ATTRS = frozenset("T mT H mH data grad real imag".split())
# torch.* functions (top level) that do not return a tensor.
_TORCH_NON_TENSOR = frozenset(
    "device dtype is_tensor is_storage numel no_grad inference_mode enable_grad set_grad_enabled "
    "manual_seed seed initial_seed save load compile jit cuda backends get_default_dtype set_default_dtype "
    "is_grad_enabled is_inference_mode_enabled set_printoptions get_num_threads set_num_threads "
    "use_deterministic_algorithms is_floating_point is_complex typename equal allclose Size Generator "
    "autocast set_float32_matmul_precision get_rng_state set_rng_state from_dlpack is_nonzero "
    "split chunk unbind tensor_split hsplit vsplit dsplit meshgrid broadcast_tensors atleast_1d atleast_2d "
    "atleast_3d unique_consecutive sort topk kthvalue mode median aminmax frexp lu svd qr eig slogdet "
    "nonzero_static".split()
)
_OUTPUT_TENSOR_ATTR = re.compile(
    r"(logits|loss|last_hidden_state|pooler_output|embeds|embeddings|scores|pred_boxes|pred_masks|sample|"
    r"prediction|predictions|output)$"
)
# Tensor methods that return a tuple of tensors (values, indices).
_TUPLE_METHODS = TUPLE_METHODS
_DEVICE_TEST = re.compile(r"cuda|gpu|device|mps|accelerat|xpu", re.I)


class EventKind(enum.Enum):
    """What an `Event` does to a module."""

    MOVE = "move"  # moved to a place
    ESCAPE = "escape"  # handed on, where it may be moved unseen


@dataclass(frozen=True)
class SplitMove:
    """`unmoved` stays on the CPU on the branch of the chain at `head` that moves
    only `moved` (`test`: that branch's condition; None for the final `else`)."""

    unmoved: str
    moved: str
    head: cst.If
    test: Optional[cst.BaseExpression]


def _chain_branches(head: cst.If) -> List[Tuple[cst.If, Part]]:
    """The branches of an `if`/`elif`/`else` chain: (the `if` owning it, its body or its else)."""
    out: List[Tuple[cst.If, Part]] = []
    node: Optional[cst.If] = head
    while node is not None:
        out.append((node, Part.BODY))
        orelse = node.orelse
        if isinstance(orelse, cst.If):
            node = orelse
        else:
            if orelse is not None:
                out.append((node, Part.ELSE))
            node = None
    return out


def _branch_of(region: Tuple[Tuple[cst.CSTNode, Part], ...], depth: int, chain: Set[int]) -> Optional[Tuple[int, Part]]:
    """The chain branch a site sits directly in (no deeper block), given the
    region's entries past the loop body (`depth`); None otherwise."""
    rest = region[depth:]
    if not rest or any(id(owner) not in chain or not isinstance(owner, cst.If) for owner, _ in rest):
        return None
    for (owner, part), (nxt, _) in zip(rest, rest[1:]):
        if part is not Part.ELSE or owner.orelse is not nxt:  # type: ignore[attr-defined]
            return None
    owner, part = rest[-1]
    return id(owner), part


@dataclass(frozen=True)
class Event:
    """Something that may change where a module lives: a move or an escape."""

    site: Site
    kind: EventKind
    place: Place  # for moves: DEVICE, CPU or UNKNOWN


def _element_write(target: cst.Subscript) -> bool:
    """`t[mask] = v`, `t[:, 0] = v`: a write into a tensor's elements (in place,
    where the tensor is), not an entry of a container replaced."""
    if len(target.slice) > 1:
        return True
    index = target.slice[0].slice
    if not isinstance(index, cst.Index):
        return False
    return isinstance(index.value, (cst.Comparison, cst.BinaryOperation, cst.UnaryOperation, cst.Ellipsis))


def _string_key(expr: cst.Subscript) -> Optional[str]:
    """`out["logits"]` -> "logits"; None for any other subscript."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    value = expr.slice[0].slice.value
    if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
        return value.evaluated_value
    return None


def _always_runs(site: Site) -> bool:
    """Runs whenever its scope does: in no `if`, loop or handler (a `try` body counts)."""
    return all(isinstance(owner, cst.Try) and part is Part.BODY for owner, part in site.region)


def join(places: Iterable[Optional[Place]]) -> Optional[Place]:
    """Combine tensor places: any DEVICE operand puts the result on the device."""
    places = list(places)
    if not places or None in places:
        return None
    if DEVICE in places:
        return DEVICE
    if all(p == CPU for p in places):
        return CPU
    return TENSOR


class Places:
    def __init__(self, facts: Facts, values: Values, helpers: Helpers, path: str = "") -> None:
        self.facts = facts
        self.values = values
        self.helpers = helpers
        self._device_cache: Dict[int, Optional[Device]] = {}
        self._tensor_cache: Dict[int, Optional[Place]] = {}
        self._model_cache: Dict[Tuple[int, int], Place] = {}
        self._events: Optional["_Events"] = None
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
            return None
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

    # -- modules: flow-sensitive ---------------------------------------------------------

    def unwrap(self, expr: cst.BaseExpression) -> Tuple[Optional[Call], Optional[Place]]:
        """Peel `X(...).eval().to(d)`: the innermost call, and where the moves on
        the way send it (None: no move)."""
        moved: Optional[Place] = None
        while isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            if call is None:
                return None, moved
            moves = is_move_call(call) or (call.method == "cpu" and call.receiver is not None)
            if moved is None and moves:
                device = self.move_device(call)
                moved = DEVICE if device == ACCEL else (CPU if device == HOST else UNKNOWN)
            if (
                call.receiver is not None
                and isinstance(call.receiver, cst.Call)
                and (call.method in CHAIN_METHODS or moves)
            ):
                expr = call.receiver
                continue
            if moves:
                return None, moved  # `model.to(device)`: the move decides
            return call, moved
        return None, moved

    def _model_events(self) -> "_Events":
        """Per dotted name: the moves and escapes of that name, in source order
        (`.get(name, [])`). Whether a call that is handed a name keeps it is
        decided only for the names asked about."""
        if self._events is None:
            events: Dict[str, List[Event]] = {}
            handed_to: Dict[str, List[Call]] = {}

            def add(name: Optional[str], event: Event) -> None:
                if name:
                    events.setdefault(name, []).append(event)

            for call in self.facts.calls:
                if is_move_call(call) or (call.method == "cpu" and call.receiver is not None and not call.node.args):
                    root = strip_methods(call.receiver, CHAIN_METHODS)
                    device = self.move_device(call)
                    add(
                        dotted_name(root),
                        Event(
                            call.site,
                            EventKind.MOVE,
                            DEVICE if device == ACCEL else (CPU if device == HOST else UNKNOWN),
                        ),
                    )
                    continue
                for arg in call.node.args:
                    name = dotted_name(arg.value)
                    if name:
                        handed_to.setdefault(name, []).append(call)
            for b in self.facts.bindings:
                # `layer.weight = remote_weight()`: parts replaced by values made elsewhere.
                if (
                    "." in b.name
                    and b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
                    and isinstance(b.value, (cst.Call, cst.Name))
                ):
                    add(b.name.rsplit(".", 1)[0], Event(b.site, EventKind.ESCAPE, UNKNOWN))
            for use in self.facts.uses:
                if isinstance(use.site.parent, _USE_STAYS):
                    continue
                # Returned, stored, aliased or put in a container: it could go anywhere.
                add(use.node.value, Event(use.site, EventKind.ESCAPE, UNKNOWN))
            self._events = _Events(events, handed_to, self._keeps_memo)
        return self._events

    def _keeps_memo(self, call: Call, name: str) -> bool:
        key = (id(call.node), name)
        found = self._keeps.get(key)
        if found is None:
            found = self._keeps[key] = self._keeps_arguments(call, name)
        return found

    def _keeps_arguments(self, call: Call, name: str) -> bool:
        """A call that neither places nor keeps a module it is handed: builtins
        like `print`/`len`, `torch.save`, a model forward, or a same-file helper
        that does not move that argument."""
        func = call.node.func
        if (
            isinstance(func, cst.Name)
            and func.value in NON_PLACING
            and func.value not in self.facts.aliases
            and not self.facts.bindings_of(func.value)
        ):
            return True
        if call.qualname in ("torch.save", "builtins.print"):
            return True
        if self.values.model_call(call) is not None or self.values.is_loss_call(call):
            return True
        fn = self.helpers.function(call)
        if fn is not None:
            # A same-file helper keeps `name` when the parameter it arrives in is neither moved
            # nor handed back (`evaluate(model, loader, device)` returning an accuracy keeps the
            # model, whatever it moves of the loader's batches; `wrap(model)` may not).
            params = {p for p in fn.params if dotted_name(self.values.argument_for(call, fn, p)) == name}
            if not params:
                return False  # passed through *args/**kwargs: can't tell
            returned = {root_name(r.value) for r, _ in self.facts.returns_of(fn) if r.value is not None}
            return not (params & self.helpers.summary(fn).moves) and not (params & returned)
        return False

    def model_place(self, model: cst.BaseExpression, site: Site) -> Place:
        """DEVICE, CPU, WRAPPED (DataParallel & co., which move inputs themselves)
        or UNKNOWN, for the module `model` at `site`."""
        key = (id(model), site.order)
        if key in self._model_cache:
            return self._model_cache[key]
        self._model_cache[key] = UNKNOWN
        result = self._model_place(model, site)
        self._model_cache[key] = result
        return result

    def _model_place(self, model: cst.BaseExpression, site: Site) -> Place:
        if isinstance(model, cst.Call):
            return self._value_place(model, site)
        name = dotted_name(model)
        if name is None:
            return UNKNOWN
        if name.startswith("self.") and self._in_module_class(site):
            return UNKNOWN  # a submodule: it moves with the model that owns it
        bindings = self.values.bindings_for(name, site)
        if not bindings:
            return UNKNOWN
        events = self._model_events()
        states = set()
        for b in bindings:
            states.add(self._after_events(self._binding_place(b), b, events, site))
        return states.pop() if len(states) == 1 else UNKNOWN

    def _in_module_class(self, site: Site) -> bool:
        for scope in site.scope.chain():
            if scope.kind == ScopeKind.CLASS:
                return scope.name in self.values.module_classes()
        return False

    def class_places(self, class_name: str, init_only: bool = False) -> bool:
        """Code in the same-file class `class_name` (only its `__init__` where
        `init_only`) moves a tensor or creates one on a device."""
        if self._placing_classes is None:
            anywhere: Set[str] = set()
            init: Set[str] = set()
            for call in self.facts.calls:
                if not (is_move_call(call) or call.keyword("device") is not None):
                    continue
                scope = call.site.scope
                if scope.kind == ScopeKind.FUNCTION and scope.name == "__init__" and scope.parent is not None:
                    if scope.parent.kind == ScopeKind.CLASS:
                        init.add(scope.parent.name)
                anywhere.update(s.name for s in scope.chain() if s.kind == ScopeKind.CLASS)
            self._placing_classes = (frozenset(anywhere), frozenset(init))
        return class_name in self._placing_classes[1 if init_only else 0]

    def _binding_place(self, b: Binding) -> Place:
        if b.kind == BindingKind.PARAM:
            fn = self.facts.function_of(b.site.scope)
            if fn is None:
                return UNKNOWN
            places = set()
            callers = self.values.callers(fn)
            for c in callers:
                arg = self.values.argument_for(c, fn, b.name)
                places.add(self.model_place(arg, c.site) if arg is not None else UNKNOWN)
            return places.pop() if callers and len(places) == 1 else UNKNOWN
        if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.index is not None or b.value is None:
            return UNKNOWN
        return self._value_place(b.value, b.site)

    def _value_place(self, value: cst.BaseExpression, site: Site) -> Place:
        if isinstance(value, (cst.Name, cst.Attribute)):
            return self.model_place(value, site)
        ctor, moved = self.unwrap(value)
        last = ((ctor.qualname or dotted_name(ctor.node.func) or "") if ctor is not None else "").rsplit(".", 1)[-1]
        if moved is not None:
            # `DataParallel(m).cuda()`: still a wrapper that moves (scatters) its inputs itself.
            return WRAPPED if moved == DEVICE and last in WRAPPER_CLASSES else moved
        if ctor is None:
            return UNKNOWN
        if ctor.qualname in PLACERS and ctor.qualname != "torch.compile" or last in WRAPPER_CLASSES:
            return WRAPPED
        if (ctor.qualname == "torch.compile" or ctor.qualname in COPIES) and ctor.positional:
            return self.model_place(ctor.positional[0].value, site)
        fn = self.helpers.function(ctor)
        if fn is not None:
            places = {self.model_place(r.value, s) for r, s in self.facts.returns_of(fn) if r.value is not None}
            return places.pop() if len(places) == 1 else UNKNOWN
        wrapped = self._wrapped_place(ctor, site)
        if wrapped is not None:
            return wrapped
        if self.values.call_kind(ctor) != MODULE or self.values.opaque_call(ctor):
            return UNKNOWN
        func = ctor.node.func
        if (
            isinstance(func, cst.Name)
            and func.value in self.values.module_classes()
            and self.class_places(func.value, init_only=True)
        ):
            return UNKNOWN  # its constructor places its own layers
        for arg in ctor.node.args:
            if arg.star:
                return UNKNOWN
            if arg.keyword is not None and arg.keyword.value in ("device", "device_map", "map_location"):
                device = self.device_of(arg.value, site)
                return DEVICE if device == ACCEL else (CPU if device == HOST else UNKNOWN)
            if arg.keyword is not None and _quantizes(arg):
                return UNKNOWN  # bitsandbytes & co. load the weights onto the GPU (or as configured)
            if (
                arg.keyword is None
                and not isinstance(arg.value, cst.Integer)
                and self.device_of(arg.value, site) == ACCEL
            ):
                return UNKNOWN  # `build(cfg, device)`: it may place itself
        if self.under_device_context(ctor.site):
            return DEVICE
        return CPU

    def _wrapped_place(self, ctor: Call, site: Site) -> Optional[Place]:
        """A call of code we cannot read that is handed modules
        (`PeftModel.from_pretrained(base, path)`, `get_lora_model(base, cfg)`,
        `nn.Sequential(encoder, head)`): what it returns holds (or is) those
        modules, so it is where they are: DEVICE when they all are, UNKNOWN
        when any one's place is unknown or they differ. None when it is handed
        no module, or only modules on the CPU (the caller decides: code we
        cannot see may place them, but does not take them off the device)."""
        func = ctor.node.func
        if isinstance(func, cst.Name) and func.value in self.values.module_classes():
            return None  # a same-file class: its `__init__` may build layers of its own
        places = set()
        for arg in ctor.node.args:
            if arg.star:
                return None
            if arg.keyword is not None or isinstance(arg.value, (cst.Integer, cst.SimpleString)):
                continue
            kind = self.values.expr_kind(arg.value, site)
            if kind not in (MODULE, None):
                continue
            place = self.model_place(arg.value, site)
            if kind is None and place != DEVICE:
                continue  # not known to be a module
            places.add(place)
        if not places or places == {CPU}:
            return None
        return DEVICE if places == {DEVICE} else UNKNOWN

    def _after_events(self, place: Place, b: Binding, events: "_Events", site: Site) -> Place:
        same_scope = site.scope is b.site.scope and "." not in b.name
        # A function's local name: only moves in that function (or nested in it) can touch it.
        pool = (
            events.within(b.name, b.site.scope)
            if same_scope and b.site.scope.kind == ScopeKind.FUNCTION
            else events.get(b.name, [])
        )
        # A move inside the binding's own value (`m = DataParallel(m.cuda())`) is part of that value.
        later = [e for e in pool if e.site.order > b.site.order and e.site.stmt is not b.site.stmt]
        if not same_scope:
            # Read in another function (or an attribute): it runs later, after any of the moves.
            # Handing a model to code we cannot see may place it, but does not take it off
            # the device: escapes only make an unplaced model unknown.
            # A move on every path settles what happened to it before (handed on or not).
            moves = [e for e in later if e.kind is EventKind.MOVE]
            places = {e.place for e in moves}
            if moves and len(places) == 1 and all(self._unconditional(e.site) for e in moves):
                place = places.pop()
                last = max(e.site.order for e in moves)
                later = [e for e in later if e.site.order > last]
            elif moves:
                return UNKNOWN
            if any(e.kind is EventKind.ESCAPE for e in later) and place != DEVICE:
                return UNKNOWN
            return place
        local = b.site.scope.kind == ScopeKind.FUNCTION
        for e in later:
            if e.site.scope is not b.site.scope:
                if local and not any(s is b.site.scope for s in e.site.scope.chain()):
                    continue  # another function's variable of the same name
                return UNKNOWN  # a function moves or keeps it: we cannot order that
            if e.site.order >= site.order:
                for loop in site.loop.chain() if site.loop is not None else ():
                    if loop.scope is not site.scope:
                        break
                    if loop.contains(e.site.order) and not loop.contains(b.site.order):
                        return UNKNOWN  # later in a loop around the use: the next iteration sees it
                continue
            if e.kind is EventKind.ESCAPE:
                if place != DEVICE:
                    return UNKNOWN
                continue
            if dominates(e.site, site) or self._device_dominates(e.site, site):
                place = e.place
            elif not self._in_device_else(e.site):
                return UNKNOWN  # moved on some paths only
        return place

    def device_test(self, node: cst.If) -> bool:
        """`if torch.cuda.is_available():`, `if device == "cuda":`: a test of the device in play."""
        return self._is_device_test(node)

    def _is_device_test(self, node: cst.If) -> bool:
        test = node.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return False
        code = self.facts.module.code_for_node(test)
        return bool(_DEVICE_TEST.search(code))

    def _device_dominates(self, first: Site, later: Site) -> bool:
        """`first` dominates `later` once `if <device test>:` bodies count as taken."""
        if first.scope is not later.scope or first.order >= later.order:
            return False
        kept = tuple(
            r
            for r in first.region
            if not (isinstance(r[0], cst.If) and r[1] is Part.BODY and self._is_device_test(r[0]))
        )
        return later.region[: len(kept)] == kept

    def _in_device_else(self, s: Site) -> bool:
        """In the `else` of `if torch.cuda.is_available():` (the CPU fallback)."""
        return any(isinstance(r[0], cst.If) and r[1] is Part.ELSE and self._is_device_test(r[0]) for r in s.region)

    def _unconditional(self, s: Site) -> bool:
        """Runs whenever its scope does (device tests count as taken; so does
        the `elif <device test>:` of one, `if n_gpu == 1: ... elif n_gpu > 1:`)."""
        return all(
            isinstance(r[0], cst.If)
            and (r[1] is Part.BODY or self._device_elif(r[0]))
            and self._is_device_test(r[0])
            or isinstance(r[0], cst.Try)
            and r[1] is Part.BODY
            for r in s.region
        )

    def _device_elif(self, node: cst.If) -> bool:
        """The `elif` of `node` is itself a device test."""
        return isinstance(node.orelse, cst.If) and self._is_device_test(node.orelse)

    def cpu_creation(self, expr: Optional[cst.BaseExpression]) -> Optional[Call]:
        """The call that creates `expr` on the CPU: a torch factory or data
        constructor without `device=`, a tokenizer call with
        `return_tensors="pt"` (through `Variable(...)` and shape/dtype methods);
        None if it is moved on the way or is not a creation."""
        for _ in range(8):
            if not isinstance(expr, cst.Call):
                return None
            call = self.facts.call_for(expr)
            if call is None:
                return None
            if call.qualname in VARIABLE and call.positional:
                expr = call.positional[0].value
                continue
            if (
                call.receiver is not None
                and isinstance(call.receiver, cst.Call)
                and call.method in CHAIN_METHODS
                and call.method not in ("to", "cuda")
            ):
                expr = call.receiver
                continue
            q = call.qualname or ""
            if q in CPU_TENSOR_SOURCES or (
                q.startswith("torch.")
                and q.rsplit(".", 1)[-1] in LEGACY_TENSOR_TYPES
                and not q.startswith("torch.cuda.")
            ):
                if call.keyword("device") is not None or call.has_star_kwargs or self.under_device_context(call.site):
                    return None
                return call
            if self.values.is_tokenizer_call(call):
                return call
            return None
        return None

    # -- tensors --------------------------------------------------------------------------

    def tensor_place(self, expr: Optional[cst.BaseExpression], site: Site) -> Optional[Place]:
        """DEVICE, CPU, TENSOR (place unknown) or None (not known to be a tensor)."""
        if expr is None:
            return None
        key = id(expr)
        if key in self._tensor_cache:
            return self._tensor_cache[key]
        self._tensor_cache[key] = None  # cycle guard
        result = self._tensor_place(expr, site)
        self._tensor_cache[key] = result
        return result

    def is_tensor(self, expr: Optional[cst.BaseExpression], site: Site) -> bool:
        return self.tensor_place(expr, site) is not None

    def on_accelerator(self, expr: Optional[cst.BaseExpression], site: Site) -> bool:
        """A tensor on the accelerator, or one whose place we cannot tell in a
        file that uses an accelerator (a model or batch handed in from elsewhere)."""
        place = self.tensor_place(expr, site)
        return place == DEVICE or (place == TENSOR and self.accelerator_in_play())

    def _tensor_place(self, expr: cst.BaseExpression, site: Site) -> Optional[Place]:
        if isinstance(expr, cst.Call):
            return self._call_place(expr, site)
        if isinstance(expr, cst.Name):
            return self._name_place(expr.value, site)
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            if attr in _NON_TENSOR_ATTRS:
                return None
            forward = self._forward_place(expr.value, site)
            if forward is not None:
                # `outputs.logits`, `out.loss`; `hidden_states`, `past_key_values` are tuples.
                return forward if self._output_field_is_tensor(expr.value, attr, site) else None
            base = self.tensor_place(expr.value, site)
            if base is not None:
                return base if attr in _TENSOR_ATTRS else None
            name = dotted_name(expr)
            if name and "." in name and not name.startswith("self."):
                return self._name_place(name, site)
            return None
        if isinstance(expr, cst.Subscript):
            key = _string_key(expr)
            forward = self._forward_place(expr.value, site) or (
                self.tensor_place(expr.value, site) if self._from_generate(expr.value, site) else None
            )
            if key is not None and forward is not None:
                # A model output's field (`out["logits"]`): a tensor where the field is one
                # (`out["hidden_states"]`, `generated["scores"]` are tuples of tensors).
                return forward if self._output_field_is_tensor(expr.value, key, site) else None
            base = self.tensor_place(expr.value, site)
            if base is not None:
                stored = self._stored_entry(expr, site)
                return base if stored is None else stored
            return self._forward_place(expr.value, site)  # `model(x)[0]`: an element of the output
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.tensor_place(expr.left, site), self.tensor_place(expr.right, site)
            if left is None and right is None:
                return None
            return join([p for p in (left, right) if p is not None])
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return None
            operands = [expr.left] + [c.comparator for c in expr.comparisons]
            places = [p for p in (self.tensor_place(o, site) for o in operands) if p is not None]
            return join(places) if places else None
        if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
            return self.tensor_place(expr.expression, site)
        return None

    def _stored_entry(self, expr: cst.Subscript, site: Site) -> Optional[Place]:
        """For `d["k"]` read after `d["k"] = v` (since `d`'s reaching binding): where
        `v` is, when that one store dominates the read; TENSOR (can't tell) for
        stores on some paths only, or of keys we cannot read. None: no store."""
        if not isinstance(expr.value, cst.Name):
            return None
        name, key = expr.value.value, _string_key(expr)
        bound = max((b.site.order for b in self.reaching(name, site)), default=-1)
        stores = []
        for use in self.facts.scoped_uses(name, site.scope):
            target = use.site.parent
            stmt = use.site.stmt
            if use.site.order <= bound or not isinstance(target, cst.Subscript) or not isinstance(stmt, cst.Assign):
                continue
            if not any(t.target is target for t in stmt.targets) or _element_write(target):
                continue
            other = _string_key(target)
            if key is not None and other is not None and other != key:
                continue  # another entry
            later_in_loop = any(
                loop.contains(use.site.order) and not loop.contains(bound) for loop in self._loops_around(site)
            )
            if use.site.order < site.order or later_in_loop:
                stores.append((use.site, stmt.value))
        if not stores:
            return None
        if len(stores) == 1 and key is not None and dominates(stores[0][0], site):
            return self.tensor_place(stores[0][1], stores[0][0]) or TENSOR
        return TENSOR

    @staticmethod
    def _loops_around(site: Site) -> List[Loop]:
        return [loop for loop in (site.loop.chain() if site.loop is not None else ()) if loop.scope is site.scope]

    def _forward_place(self, expr: cst.BaseExpression, site: Site) -> Optional[Place]:
        """For a model's direct output (a call, or a name bound only to one): its place."""
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            mc = self.values.model_call(call) if call is not None else None
            return self._output_place(mc, site) if mc is not None else None
        if isinstance(expr, cst.Name):
            bs = self.reaching(expr.value, site)
            places = set()
            for b in bs:
                if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or b.index is not None or b.value is None:
                    return None
                p = self._forward_place(b.value, b.site)
                if p is None:
                    return None
                places.add(p)
            return join(places) if places else None
        return None

    def _output_field_is_tensor(self, output: cst.BaseExpression, field: str, site: Site) -> bool:
        """A model output's field that holds one tensor: `logits`, `loss`... For
        `generate()`'s output only `sequences` does (its `scores`, `logits`,
        `attentions` and `hidden_states` are tuples, one entry per step)."""
        if self._from_generate(output, site):
            return field == "sequences"
        return bool(_OUTPUT_TENSOR_ATTR.search(field)) or field in _TENSOR_ATTRS

    def _from_generate(self, expr: cst.BaseExpression, site: Site) -> bool:
        if isinstance(expr, cst.Name):
            reaching = self.reaching(expr.value, site)
            return bool(reaching) and all(
                b.value is not None and self._from_generate(b.value, b.site) for b in reaching
            )
        call = self.facts.call_for(expr) if isinstance(expr, cst.Call) else None
        return call is not None and call.method == "generate"

    def is_forward_output(self, expr: cst.BaseExpression, site: Site) -> bool:
        """A model's direct output (may be a tuple or a ModelOutput, not a tensor)."""
        return self._forward_place(expr, site) is not None

    def _output_place(self, mc: ModelCall, site: Site) -> Place:
        """Where a forward's output lives: on the device if the model is, or if
        any tensor input is (a CPU model fed device inputs would fail)."""
        model = self.model_place(mc.model, mc.call.site)
        if model == DEVICE:
            return DEVICE
        inputs = [self.tensor_place(a.value, mc.call.site) for a in mc.call.node.args if not a.star]
        if DEVICE in inputs:
            return DEVICE
        if model == CPU and inputs and all(p == CPU for p in inputs):
            return CPU
        return TENSOR

    def _call_place(self, node: cst.Call, site: Site) -> Optional[Place]:
        call = self.facts.call_for(node)
        if call is None:
            return None
        q = call.qualname
        if (q in VARIABLE or q in COPIES) and call.positional:
            return self.tensor_place(call.positional[0].value, call.site)
        if q in CPU_TENSOR_SOURCES or (q and q.startswith("torch.") and q.rsplit(".", 1)[-1] in LEGACY_TENSOR_TYPES):
            if q and q.startswith("torch.cuda."):
                return DEVICE
            kw = call.keyword("device")
            if kw is not None:
                device = self.device_of(kw.value, call.site)
                return DEVICE if device == ACCEL else (CPU if device == HOST else TENSOR)
            if self.under_device_context(call.site) or call.has_star_kwargs:
                return TENSOR
            return CPU
        mc = self.values.model_call(call)
        if mc is not None:
            return self._output_place(mc, site)
        if self.values.is_tokenizer_call(call):
            return CPU  # a BatchEncoding of CPU tensors
        if self.values.is_loss_call(call):
            places = [self.tensor_place(a.value, call.site) for a in call.node.args if not a.star]
            known = [p for p in places if p is not None]
            return join(known) if known else TENSOR
        if q and q.startswith("torch."):
            rest = q[len("torch.") :]
            if "." not in rest:
                if rest in _TORCH_NON_TENSOR or rest[:1].isupper() or rest.startswith(("is_", "get_", "set_", "_")):
                    return None
                kw = call.keyword("device")
                if kw is not None:
                    device = self.device_of(kw.value, call.site)
                    return DEVICE if device == ACCEL else (CPU if device == HOST else TENSOR)
                places = [self.tensor_place(a.value, call.site) for a in node.args if a.keyword is None]
                known = [p for p in places if p is not None]
                return join(known) if known else TENSOR
            if rest.startswith(("nn.functional.", "linalg.", "fft.", "special.")):
                places = [self.tensor_place(a.value, call.site) for a in node.args if a.keyword is None]
                known = [p for p in places if p is not None]
                return join(known) if known else TENSOR
            return None
        if call.method is not None and call.receiver is not None and q is None:
            if call.method in _NON_TENSOR_METHODS:
                return None
            base = self.tensor_place(call.receiver, call.site)
            if base is None:
                # `x.to(device)` / `x.cuda()` of something we can't type (a batch of an unknown
                # loader): whatever it is, it now lives on the device.
                if (
                    call.method in ("to", "cuda")
                    and is_move_call(call)
                    and self.move_device(call) == ACCEL
                    and self.values.expr_kind(call.receiver, call.site) not in (MODULE, TOKENS)
                ):
                    return DEVICE
                if call.method == "cpu" and not call.node.args and self._host_copy_of_unknown(call):
                    # `flow = unpad(pred[0]).cpu()`: whatever it was, this copy is on the host.
                    return CPU
                return None
            if call.method == "cpu":
                return CPU
            if call.method in ("to", "cuda") and is_move_call(call):
                device = self.move_device(call)
                return (
                    DEVICE
                    if device == ACCEL
                    else (CPU if device == HOST else (base if call.method == "to" else DEVICE))
                )
            return base
        fn = self.helpers.function(call)
        if fn is not None:
            places = [self.tensor_place(r.value, s) for r, s in self.facts.returns_of(fn) if r.value is not None]
            if places and all(p is not None for p in places):
                return join(places)
            return None
        if call.method is None and self._backpropagated(call):
            # `loss = dice(out, y)` then `loss.backward()`: whatever the callee, a tensor with
            # a graph, computed from its tensor arguments (where they are).
            places = [self.tensor_place(a.value, call.site) for a in node.args if not a.star]
            known = [p for p in places if p is not None]
            return join(known) if known else TENSOR
        return None

    def _host_copy_of_unknown(self, call: Call) -> bool:
        """`helper(t).cpu()`, `t.crop().cpu()`: a call we cannot type (no module) made
        of a tensor on the device, copied to the host. Only then: a `.cpu()` of an
        untyped name may be anything (a list of tensors, a module)."""
        receiver = call.receiver
        if not isinstance(receiver, cst.Call) or self.values.expr_kind(receiver, call.site) in (MODULE, TOKENS):
            return False
        parts = [a.value for a in receiver.args if not a.star]
        if isinstance(receiver.func, cst.Attribute):
            parts.append(receiver.func.value)
        return any(self.tensor_place(p, call.site) == DEVICE or self._of_forward(p, call.site) for p in parts)

    def _of_forward(self, expr: cst.BaseExpression, site: Site) -> bool:
        """`pred[0]` where `_, pred = model(x)`: (a part of) a model's output."""
        while isinstance(expr, cst.Subscript):
            expr = expr.value
        if not isinstance(expr, cst.Name):
            return False
        bs = self.reaching(expr.value, site)
        return bool(bs) and all(
            b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            and b.value is not None
            and self._forward_place(b.value, b.site) is not None
            for b in bs
        )

    def _backpropagated(self, call: Call) -> bool:
        """`call`'s result is bound to a name and that very value reaches `.backward()`
        in the same scope."""
        b = self.facts.binding_of_value(call.node)
        if (
            b is None
            or b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            or b.index is not None
            or "." in b.name
        ):
            return False
        for c in self.helpers.calls_in_scope(b.site.scope):
            if (
                c.method == "backward"
                and c.site.order > b.site.order
                and isinstance(c.receiver, cst.Name)
                and c.receiver.value == b.name
                and self.reaching(b.name, c.site) == [b]
            ):
                return True
        return False

    # -- names ------------------------------------------------------------------------------

    def single_value(self, name: str, site: Site) -> Optional[Tuple[cst.BaseExpression, Site]]:
        """The value (and where it was bound) of the one plain binding of `name`
        that reaches `site`; None when several may, or it is unpacked or has none."""
        reaching = self.reaching(name, site)
        if len(reaching) != 1 or reaching[0].value is None or reaching[0].index is not None:
            return None
        return reaching[0].value, reaching[0].site

    def reaching(self, name: str, site: Site) -> List[Binding]:
        """Bindings of `name` that may reach `site` (`Facts.reaching`)."""
        return self.facts.reaching(name, site)

    def _called_names(self) -> Set[str]:
        """Names (and dotted names) the file calls, directly or through their
        `.forward(...)` (`attn.forward(h)`: a module): callables, never tensors."""
        if self._called is None:
            called = {dotted_name(c.node.func) for c in self.facts.calls}
            called |= {dotted_name(c.receiver) for c in self.facts.calls if c.method == "forward" and c.receiver}
            self._called = {n for n in called if n}
        return self._called

    def _name_place(self, name: str, site: Site) -> Optional[Place]:
        if name in self._called_names():
            return None  # `m = fetch().cuda()` then `m(x)`: a model, not a tensor
        if "." in name:
            bindings = self.facts.bindings_of(name)
        else:
            bindings = self.reaching(name, site)
        if not bindings:
            return None
        place = join([self._binding_tensor_place(b) for b in bindings])
        if place == CPU and "." not in name:
            moved = self.moved_by_key(name, max(b.site.order for b in bindings), site)
            if moved is not None:
                return moved
        return place

    def moved_by_key(self, name: str, after: int, site: Site) -> Optional[Place]:
        """Where `name`'s entries were all moved, key by key, between order `after` and
        `site` in its scope: `for k, v in name.items(): name[k] = v.to(dev)` (also over
        `name.keys()` / `name`). DEVICE or CPU; None when nothing moved them."""
        for call in self.helpers.calls_in_scope(site.scope):
            if not (after < call.site.order < site.order) or call.method not in ("to", "cuda"):
                continue
            stmt = call.site.stmt
            if not (
                isinstance(stmt, cst.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0].target, cst.Subscript)
                and isinstance(stmt.targets[0].target.value, cst.Name)
                and stmt.targets[0].target.value.value == name
                and _outermost_call(stmt.value) is call.node
            ):
                continue
            loop = call.site.loop
            if loop is None or loop.end_order >= site.order or not _iterates_keys_of(loop.iter, name):
                continue
            where = self.move_device(call)
            if where is not None:
                return DEVICE if where == ACCEL else CPU
        return None

    def split_moves(self, names: List[str], loop: Loop) -> List["SplitMove"]:
        """Batch names left behind on one branch of an `if`/`elif` chain in the loop's
        body: the branch moves one name (`y`) to the device and not another (`x`) that
        a sibling branch does move (`if a: x = x.cuda()` / `elif b: y = y.cuda()`).
        Branches of one chain exclude each other, so on that path `x` is on the CPU
        while `y` is on the device. Only names bound in the loop by such moves alone,
        each branch's moves unconditional in it."""
        site = self.facts.site_of_statement(loop.node)
        if site is None:
            return []
        body = site.region + ((loop.node, Part.BODY),)
        out: List[SplitMove] = []
        for head, head_site in self.facts.ifs:
            if head_site.scope is not site.scope or head_site.region != body:
                continue
            branches = _chain_branches(head)
            chain_ifs = {id(b[0]) for b in branches}
            moved: Dict[Tuple[int, Part], Set[str]] = {}
            clean = True
            for b in self.facts.bindings_in(site.scope):
                if b.name not in names or not loop.contains(b.site.order):
                    continue
                if b.kind == BindingKind.FOR and b.site.order == loop.order:
                    continue  # the loop's own target
                key = _branch_of(b.site.region, len(body), chain_ifs)
                call = self.facts.call_for(b.value) if isinstance(b.value, cst.Call) else None
                if (
                    key is None
                    or call is None
                    or dotted_name(call.receiver) != b.name
                    or self.move_device(call) != ACCEL
                ):
                    clean = False  # bound elsewhere in the loop, or not by a move to the device
                    break
                moved.setdefault(key, set()).add(b.name)
            if not clean or len(moved) < 2:
                continue
            every = set().union(*moved.values())
            for node, part in branches:
                here = moved.get((id(node), part), set())
                for x in sorted(every - here):
                    for y in sorted(here):
                        test = node.test if part is Part.BODY else None
                        out.append(SplitMove(x, y, head, test))
        return out

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

    def _binding_tensor_place(self, b: Binding) -> Optional[Place]:
        if b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN, BindingKind.WALRUS):
            if b.value is None:
                return None
            if self.next_batch(b.value, b.site):
                return CPU
            if b.index is not None:
                if isinstance(b.value, (cst.Tuple, cst.List)):
                    if b.index < len(b.value.elements):
                        el = b.value.elements[b.index]
                        return None if isinstance(el, cst.StarredElement) else self.tensor_place(el.value, b.site)
                    return None
                # `loss, logits = model(x)` / `loss, acc = step(batch)`: parts of a forward's output.
                forward = self._forward_place(b.value, b.site)
                if forward is not None:
                    return forward
                if isinstance(b.value, cst.Call) and (self.facts.qualname(b.value.func) or "").startswith("torch."):
                    # `_, predicted = torch.max(out, 1)`: tensors where the input is.
                    places = [
                        p
                        for p in (self.tensor_place(a.value, b.site) for a in b.value.args if a.keyword is None)
                        if p is not None
                    ]
                    return join(places) if places else None
                if (
                    isinstance(b.value, cst.Call)
                    and isinstance(b.value.func, cst.Attribute)
                    and b.value.func.attr.value in _TUPLE_METHODS
                ):
                    # `_, idx = out.max(1)`, `values, indices = t.topk(k)`
                    return self.tensor_place(b.value.func.value, b.site)
                if isinstance(b.value, cst.Call):
                    call = self.facts.call_for(b.value)
                    fn = self.helpers.function(call) if call is not None else None
                    if fn is not None:
                        return self._returned_part(fn, b.index)
                return None
            return self.tensor_place(b.value, b.site)
        if b.kind == BindingKind.AUGASSIGN:
            rhs = self.tensor_place(b.value, b.site) if b.value is not None else None
            return rhs if rhs is not None else self._accumulated_place(b)
        if b.kind in (BindingKind.FOR, BindingKind.COMPREHENSION):
            if b.value is None:
                return None
            if self.batch_source(b.value, b.site):
                return CPU
            value = b.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                method = value.func.attr.value
                # `for p in model.parameters()`, `for name, p in model.named_parameters()`: the
                # model's tensors, where the model is.
                if (method in ("parameters", "buffers") and b.index is None) or (
                    method in ("named_parameters", "named_buffers") and b.index == 1
                ):
                    model = value.func.value
                    return DEVICE if self.model_place(model, b.site) == DEVICE else TENSOR
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in ("items", "values")
                and not value.args
            ):
                # `for k, v in out.items()` over a model's output dict: its tensors.
                forward = self._forward_place(value.func.value, b.site)
                if forward is not None and (value.func.attr.value == "values" or b.index == 1):
                    return forward
                return None
            if b.index is not None:
                return None
            base = self.tensor_place(b.value, b.site)
            return base
        if b.kind == BindingKind.PARAM:
            return self._param_tensor_place(b)
        return None

    def _accumulated_place(self, b: Binding) -> Optional[Place]:
        """`total *= weight` with a non-tensor operand: `total` stays where the
        tensor it held was (its number start, `total = 0.`, left out once a
        tensor was added to it)."""
        key = id(b)
        if key in self._accumulating:
            return None  # cycle guard: `total *= w` in a loop reaches itself
        self._accumulating.add(key)
        try:
            prior = [
                x
                for x in self.reaching(b.name, b.site)
                if x is not b
                and not (x.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and _number(x.value) and x.index is None)
            ]
            places = [self._binding_tensor_place(x) for x in prior]
            return join(places) if places and all(p is not None for p in places) else None
        finally:
            self._accumulating.discard(key)

    def _returned_part(self, fn: Function, index: int) -> Optional[Place]:
        places = []
        for r, s in self.facts.returns_of(fn):
            if not isinstance(r.value, cst.Tuple) or index >= len(r.value.elements):
                return None
            places.append(self.tensor_place(r.value.elements[index].value, s))
        return join(places) if places else None

    def _param_tensor_place(self, b: Binding) -> Optional[Place]:
        """A parameter every same-file caller passes a tensor to."""
        fn = self.facts.function_of(b.site.scope)
        if fn is None:
            return None
        callers = self.values.callers(fn)
        if not callers:
            return None
        places = []
        for c in callers:
            arg = self.values.argument_for(c, fn, b.name)
            if arg is None:
                return None
            places.append(self.tensor_place(arg, c.site))
        return join(places)

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


def _number(expr: Optional[cst.BaseExpression]) -> bool:
    """A number literal: `0`, `0.`, `-1.0`."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float))


def _quantizes(arg: cst.Arg) -> bool:
    """`load_in_4bit=True`, `load_in_8bit=True`, `quantization_config=...` (not `None`/`False`):
    a quantized load places the model itself."""
    assert arg.keyword is not None
    key = arg.keyword.value
    if key in ("load_in_4bit", "load_in_8bit"):
        return not (isinstance(arg.value, cst.Name) and arg.value.value in ("False", "None"))
    return key == "quantization_config" and not (isinstance(arg.value, cst.Name) and arg.value.value == "None")


def _outermost_call(expr: cst.BaseExpression) -> Optional[cst.Call]:
    """The move call of `v.to(dev)` or of `v.to(dev) if cond else v`."""
    if isinstance(expr, cst.IfExp):
        expr = expr.body
    return expr if isinstance(expr, cst.Call) else None


def _iterates_keys_of(it: Optional[cst.BaseExpression], name: str) -> bool:
    """`name.items()`, `name.keys()` or `name` itself (a mapping's keys)."""
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args:
        return (
            it.func.attr.value in ("items", "keys")
            and isinstance(it.func.value, cst.Name)
            and it.func.value.value == name
        )
    return isinstance(it, cst.Name) and it.value == name


def _format_device(node: cst.Call) -> Optional[cst.BaseExpression]:
    """The `device=` of `ds.set_format(...)` / `ds.with_format(...)` (Hugging Face datasets)."""
    if not (isinstance(node.func, cst.Attribute) and node.func.attr.value in ("set_format", "with_format")):
        return None
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            return arg.value
    return None


# Parents of a name's use that neither store nor hand on the value.
_USE_STAYS = (
    cst.Call,
    cst.Attribute,
    cst.Arg,
    cst.BinaryOperation,
    cst.Comparison,
    cst.ComparisonTarget,
    cst.UnaryOperation,
    cst.BooleanOperation,
    cst.Subscript,
    cst.FormattedStringExpression,
    cst.If,
    cst.While,
    cst.Expr,
)


class _Events:
    """Moves and escapes per dotted name. Calls a name is handed to become
    escapes (unless the call keeps its arguments) when that name is asked for:
    deciding it for every argument of every call would cost more than the rest
    of the analysis."""

    def __init__(
        self, events: Dict[str, List[Event]], handed_to: Dict[str, List[Call]], keeps: Callable[[Call, str], bool]
    ) -> None:
        self._events = events
        self._handed_to = handed_to
        self._keeps = keeps
        self._done: Dict[str, List[Event]] = {}
        self._by_scope: Dict[str, Dict[int, List[Event]]] = {}

    def within(self, name: str, scope: Scope) -> List[Event]:
        """The events of `name` in `scope` or in scopes nested in it."""
        by_scope = self._by_scope.get(name)
        if by_scope is None:
            by_scope = self._by_scope[name] = group_under_scopes(self.get(name, []))
        return by_scope.get(id(scope.node), [])

    def get(self, name: str, default: Optional[List[Event]] = None) -> List[Event]:
        done = self._done.get(name)
        if done is None:
            found = list(self._events.get(name, ()))
            for call in self._handed_to.get(name, ()):
                if not self._keeps(call, name):
                    found.append(Event(call.site, EventKind.ESCAPE, UNKNOWN))
            found.sort(key=lambda e: e.site.order)
            done = self._done[name] = found
        return done if done or default is None else default
