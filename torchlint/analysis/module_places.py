"""Where a module is at a statement (`model_place(model, site)`), flow-sensitive:
moves count in statement order (notebook cells in their order); a move that
runs on every path to the statement (or under `if torch.cuda.is_available():`)
counts; a move in one branch of an unrelated `if`, or a model handed to code
we cannot see, makes it unknown. Also the device tests of `if` statements and
CPU tensor creations.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.devices import DevicePlaces
from torchlint.analysis.facts import (
    Binding,
    BindingKind,
    Call,
    Part,
    ScopeKind,
    Site,
    dominates,
    dotted_name,
    strip_methods,
)
from torchlint.analysis.helpers import root_name
from torchlint.analysis.knowledge import is_move_call
from torchlint.analysis.place_kinds import (
    ACCEL,
    CPU,
    DEVICE,
    HOST,
    UNKNOWN,
    WRAPPED,
    Event,
    EventKind,
    ModuleEvents,
    Place,
)
from torchlint.analysis.value_kinds import MODULE
from torchlint.analysis.vocabulary import (
    CHAIN_METHODS,
    COPIES,
    CPU_TENSOR_SOURCES,
    LEGACY_TENSOR_TYPES,
    NON_PLACING,
    PLACERS,
    TO_TENSOR_TRANSFORMS,
    VARIABLE,
    WRAPPER_CLASSES,
)

_DEVICE_TEST = re.compile(r"cuda|gpu|device|mps|accelerat|xpu", re.I)


class ModulePlaces(DevicePlaces):
    """Where modules are, on top of the device expressions."""

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

    def _model_events(self) -> "ModuleEvents":
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
            self._events = ModuleEvents(events, handed_to, self._keeps_memo)
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

    def stays_on_cpu(self, model: cst.BaseExpression, site: Site) -> bool:
        """The module `model` is on the CPU at `site`, and no code of the file
        moves it anywhere else (never moved, its move commented out, moved
        `.to('cpu')` only, loaded on the CPU): it runs on the CPU, whatever
        device the file selects for other values."""
        name = dotted_name(model)
        if name is None or self.model_place(model, site) != CPU:
            return False
        return all(e.place == CPU for e in self._model_events().get(name, []) if e.kind is EventKind.MOVE)

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

    def _after_events(self, place: Place, b: Binding, events: "ModuleEvents", site: Site) -> Place:
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
            if self.values.is_tokenizer_call(call) or self.to_tensor_transform(call):
                return call
            return None
        return None

    def to_tensor_transform(self, call: Call) -> bool:
        """`ToTensor()(image)`: an instance of a to-tensor transform, applied."""
        inner = self.facts.call_for(call.node.func) if isinstance(call.node.func, cst.Call) else None
        return inner is not None and inner.qualname in TO_TENSOR_TRANSFORMS


def _quantizes(arg: cst.Arg) -> bool:
    """`load_in_4bit=True`, `load_in_8bit=True`, `quantization_config=...` (not `None`/`False`):
    a quantized load places the model itself."""
    assert arg.keyword is not None
    key = arg.keyword.value
    if key in ("load_in_4bit", "load_in_8bit"):
        return not (isinstance(arg.value, cst.Name) and arg.value.value in ("False", "None"))
    return key == "quantization_config" and not (isinstance(arg.value, cst.Name) and arg.value.value == "None")


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
