"""Device-placement analysis shared by the TL1xx rules.

Built once per file from the facts (no extra tree walk, no metadata
providers): indexes of calls by callee expression and by argument, the moves
of every dotted name, how each use of a name is used (called, moved, handed
to another call, escaping), which names hold devices, and whether the file is
a framework-managed one (accelerate, Lightning, Fabric, DeepSpeed) where
placement is not the user's code's business.

Precision first: every question answers "unknown" (and the rules stay silent)
when a value could have been moved somewhere we cannot see.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import Binding, Call, Facts, NameUse, Scope, Site, dotted_name
from torchlint.analysis.semantics import CPU_TENSOR_SOURCES, PLACERS, Semantics, is_device_string

# Methods that move a module or tensor (in place for modules).
MOVE_METHODS = frozenset({"to", "cuda", "to_empty", "xpu", "mps", "ipu"})
# Methods that return the same module/tensor kind without moving it.
CHAIN_METHODS = frozenset({
    "eval", "train", "half", "float", "double", "bfloat16", "long", "int", "bool", "requires_grad_",
    "unsqueeze", "squeeze", "view", "reshape", "permute", "t", "contiguous", "flatten", "clone",
    "detach", "transpose", "expand", "repeat",
})
# Calls that never place the value handed to them.
NON_PLACING = frozenset({
    "print", "len", "isinstance", "type", "id", "repr", "str", "hasattr", "getattr", "vars", "dir",
    "format", "hash", "callable", "next", "iter", "sum", "sorted", "list", "tuple",
})
# Top-level packages whose presence means a framework places models and batches.
FRAMEWORKS = frozenset({"accelerate", "lightning", "pytorch_lightning", "lightning_fabric", "deepspeed",
                        "ignite", "composer", "colossalai", "ray"})
DEFAULT_DEVICE_SETTERS = frozenset({"torch.set_default_device", "torch.set_default_tensor_type",
                                    "torch.set_default_dtype_device"})
# torch.nn layers without parameters or buffers worth moving: never "models".
_STATELESS = re.compile(
    r"(Loss|Dropout\w*|\w*Pool\w*|\w*Pad\dd|Flatten|Unflatten|Identity|Softmax\w*|Softmin|LogSoftmax|ReLU6?|"
    r"LeakyReLU|GELU|SiLU|Sigmoid|LogSigmoid|Tanh|ELU|SELU|CELU|Mish|Hard\w+|Softplus|Softsign|Softshrink|"
    r"Tanhshrink|Threshold|Upsample\w*|PixelShuffle|PixelUnshuffle|ChannelShuffle|CosineSimilarity|"
    r"PairwiseDistance|GLU)$"
)
_LOSS_FUNCTIONS = frozenset({"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                             "nll_loss", "kl_div", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                             "cosine_embedding_loss", "ctc_loss", "margin_ranking_loss", "triplet_margin_loss",
                             "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss",
                             "multilabel_soft_margin_loss", "soft_margin_loss", "multi_margin_loss"})
_DEVICE_CALLS = frozenset({"torch.device", "torch.cuda.is_available", "torch.cuda.set_device",
                           "torch.backends.mps.is_available", "torch.cuda.current_device"})
_WRAPPER_CLASSES = frozenset({"DataParallel", "DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP"})
_DEVICE_VAR = re.compile(r"^_?(device|dev|DEVICE|DEV|torch_device)$")
_MODEL_NAME = re.compile(r"(^|_)(model|net|network|module|encoder|decoder|classifier)$", re.I)
_PLACING_NAME = re.compile(r"(device|cuda|gpu|prefetch|accelerat|prepare)", re.I)
_WRAPPERS = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.rich.tqdm",
                       "tqdm.tqdm_notebook"})

# How a name is used at one place.
USE_CALL = "call"      # model(x), model.forward(x)
USE_MOVE = "move"      # model.to(d), model.cuda()
USE_ATTR = "attr"      # model.parameters(), model.fc
USE_ARG = "arg"        # f(model): handed to a call that could place it
USE_NEUTRAL = "neutral"  # print(model), len(x)
USE_OTHER = "other"    # returned, stored, aliased: could go anywhere
_EXPR_PARENTS = (cst.BinaryOperation, cst.Comparison, cst.UnaryOperation, cst.BooleanOperation,
                 cst.FormattedStringExpression, cst.ComparisonTarget)


def is_move_call(call: Call) -> bool:
    if call.method not in MOVE_METHODS or call.receiver is None:
        return False
    if call.method == "to" and not call.node.args:
        return False
    return True


class Placement:
    """Per-file placement knowledge. Get it with `placement(ctx)`."""

    def __init__(self, facts: Facts, sem: Semantics) -> None:
        self.facts = facts
        self.sem = sem
        self.call_by_func: Dict[int, Call] = {}
        self.arg_of: Dict[int, Tuple[Call, cst.Arg]] = {}
        self.moves: Dict[str, List[Call]] = {}
        # `f(x).cuda()`: id of the inner call -> the method call on its result.
        self.outer_of: Dict[int, Call] = {}
        # Roots of assigned attributes (`layer.weight = ...` -> "layer").
        self.attr_assigned: Set[str] = {b.name.split(".", 1)[0] for b in facts.bindings if "." in b.name}
        self.default_device = False
        for call in facts.calls:
            self.call_by_func[id(call.node.func)] = call
            for arg in call.node.args:
                self.arg_of[id(arg.value)] = (call, arg)
            if isinstance(call.receiver, cst.Call):
                self.outer_of[id(call.receiver)] = call
            if is_move_call(call):
                root = call.receiver
                # `model.half().cuda()` moves `model` too (in place for modules).
                while isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute) \
                        and root.func.attr.value in CHAIN_METHODS:
                    root = root.func.value
                name = dotted_name(root)
                if name:
                    self.moves.setdefault(name, []).append(call)
            elif call.qualname in DEFAULT_DEVICE_SETTERS:
                self.default_device = True
        roots = {q.split(".", 1)[0] for q in facts.aliases.values()}
        self.framework = bool(roots & FRAMEWORKS)
        self._device_names: Optional[List[str]] = None
        self._placing_scopes: Optional[Set[int]] = None
        self._direct_scopes: Optional[Set[int]] = None
        self._calls_by_loop: Optional[Dict[int, List[Call]]] = None
        self._bindings_by_loop: Optional[Dict[int, List[Binding]]] = None
        self._uses_by_loop: Optional[Dict[int, List[NameUse]]] = None

    # -- general ---------------------------------------------------------

    @property
    def silenced(self) -> bool:
        """A framework or a default device places things: placement rules stay silent."""
        return self.framework or self.default_device

    def use_kind(self, use: NameUse) -> Tuple[str, Optional[Call]]:
        node = use.node
        parent = use.site.parent
        if isinstance(parent, cst.Call) and parent.func is node:
            return USE_CALL, self.facts.call_for(parent)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = self.call_by_func.get(id(parent))
            if call is None:
                return USE_ATTR, None
            if is_move_call(call):
                return USE_MOVE, call
            if call.method in ("forward", "generate"):
                return USE_CALL, call
            return USE_ATTR, call
        if isinstance(parent, _EXPR_PARENTS) or (isinstance(parent, cst.Subscript) and parent.value is node):
            return USE_NEUTRAL, None  # arithmetic, comparisons, indexing: nothing escapes
        if isinstance(parent, cst.Arg):
            found = self.arg_of.get(id(node))
            if found is None:
                return USE_OTHER, None
            call = found[0]
            if self.is_non_placing(call):
                return USE_NEUTRAL, call
            return USE_ARG, call
        return USE_OTHER, None

    def is_non_placing(self, call: Call) -> bool:
        func = call.node.func
        if isinstance(func, cst.Name) and func.value in NON_PLACING and func.value not in self.facts.aliases \
                and not self.facts.bindings_of(func.value):
            return True
        return call.qualname in ("torch.save", "builtins.print")

    def uses_of_binding(self, b: Binding) -> List[NameUse]:
        """Uses of `b.name` that may read binding `b` (same scope, or an inner scope
        that sees it)."""
        out = []
        for use in self.facts.uses_of(b.name):
            if use.site.scope is b.site.scope:
                out.append(use)
                continue
            visible = self.facts.visible_bindings(b.name, use.site.scope)
            if any(v is b for v in visible):
                out.append(use)
        return out

    # -- devices ---------------------------------------------------------

    def device_names(self) -> List[str]:
        if self._device_names is None:
            names = set()
            for name, bindings in self.facts._bindings_by_name.items():
                if "." in name:
                    continue
                if _DEVICE_VAR.match(name):
                    names.add(name)
                    continue
                for b in bindings:
                    if isinstance(b.value, cst.Call) and self.facts.qualname(b.value.func) == "torch.device" \
                            and b.index is None:
                        names.add(name)
                        break
            # "device" first, then the rest in a stable order.
            self._device_names = sorted(names, key=lambda n: (n != "device", n))
        return self._device_names

    def device_var(self, site: Site) -> Optional[str]:
        """A name holding a device that code at `site` can use, if any."""
        for name in self.device_names():
            found = self.facts.bindings_of(name)
            for s in site.scope.chain():
                if s is not site.scope and s.kind == "class":
                    continue
                here = [b for b in found if b.site.scope is s]
                if not here:
                    continue
                if s is not site.scope or any(b.site.order < site.order for b in here):
                    return name
                break
        return None

    def device_near(self, site: Site) -> bool:
        """A device is at hand for code at `site`: a device variable in scope, or
        its own scope (or an enclosing one) moves something, passes `device=`,
        or names a device. Keeps (D) rules out of CPU-only functions in files
        that use a GPU elsewhere (test suites, libraries)."""
        if self._direct_scopes is None:
            found: Set[int] = set()
            def add(scope: Scope) -> None:
                found.add(id(scope.node))
                if scope.kind == "function" and scope.name in ("__init__", "setup", "_setup") \
                        and scope.parent is not None and scope.parent.kind == "class":
                    found.add(id(scope.parent.node))  # the constructor places: the class's methods are near a device

            for call in self.facts.calls:
                if is_move_call(call) or call.keyword("device") is not None or call.qualname in _DEVICE_CALLS:
                    add(call.site.scope)
            for node, ssite in self.facts.strings:
                if is_device_string(node):
                    add(ssite.scope)
            self._direct_scopes = found
        if any(id(s.node) in self._direct_scopes for s in site.scope.chain()):
            return True
        return self.device_var(site) is not None

    def has_device_binding(self) -> bool:
        return bool(self.device_names())

    # -- modules ---------------------------------------------------------

    def unwrap(self, expr: cst.BaseExpression) -> Tuple[Optional[Call], bool]:
        """Peel `X(...).eval().to(d)`: the innermost call and whether a move was on the way."""
        moved = False
        while isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            if call is None:
                return None, moved
            if call.receiver is not None and isinstance(call.receiver, cst.Call) and (
                    call.method in CHAIN_METHODS or is_move_call(call)):
                moved = moved or is_move_call(call)
                expr = call.receiver
                continue
            return call, moved
        return None, moved

    @staticmethod
    def _wrapper_name(call: Call) -> bool:
        last = (call.qualname or dotted_name(call.node.func) or "").rsplit(".", 1)[-1]
        return last in _WRAPPER_CLASSES

    def is_stateless_ctor(self, call: Call) -> bool:
        q = call.qualname or ""
        last = (q or dotted_name(call.node.func) or "").rsplit(".", 1)[-1]
        return bool(_STATELESS.match(last)) or last.endswith("Loss")

    def ctor_places(self, call: Call) -> bool:
        """The construction itself places the model: `device=`, `device_map=`,
        `**kwargs`, or a device handed to it (`build(device)`)."""
        for arg in call.node.args:
            if arg.star:
                return True
            if arg.keyword is not None and arg.keyword.value in ("device", "device_map", "map_location"):
                return True
            name = dotted_name(arg.value)
            if name and _DEVICE_VAR.match(name.rsplit(".", 1)[-1]):
                return True
        return False

    def model_construction(self, b: Binding) -> Optional[Tuple[Call, bool]]:
        """For `model = Net()` (a module construction): (the construction call,
        whether the binding's value moves/places it)."""
        if b.kind not in ("assign", "annassign") or b.index is not None or b.value is None:
            return None
        ctor, moved = self.unwrap(b.value)
        if ctor is None or self.sem.call_kind(ctor) != "module" or ctor.method in MOVE_METHODS:
            return None
        if ctor.qualname in PLACERS or self._wrapper_name(ctor):
            return None  # DataParallel / DDP / FSDP wrap a model placed elsewhere
        if self.is_stateless_ctor(ctor):
            return None
        return ctor, moved or self.ctor_places(ctor) or self.under_device_context(ctor.site)

    def under_device_context(self, site: Site) -> bool:
        """Inside `with torch.device(...):` (or `torch.cuda.device`), where
        factories and layers allocate on that device."""
        for w in site.withs:
            for item in w.items:
                expr = item.item
                if isinstance(expr, cst.Call) and self.facts.qualname(expr.func) in (
                        "torch.device", "torch.cuda.device", "torch.cuda.device_of"):
                    return True
        return False

    def model_uses(self, b: Binding) -> Tuple[bool, bool, List[NameUse]]:
        """(placed-or-could-be, called, uses): how the model bound by `b` is used."""
        placed = b.name in self.moves or b.name in self.attr_assigned
        called = False
        uses = self.uses_of_binding(b)
        for use in uses:
            kind, call = self.use_kind(use)
            if kind in (USE_MOVE, USE_ARG, USE_OTHER):
                placed = True
            elif kind == USE_CALL:
                called = True
                if call is not None and self._deliberately_on_cpu(call):
                    placed = True
        return placed, called, uses

    def _deliberately_on_cpu(self, call: Call) -> bool:
        """`layer(x.cpu())` or `layer(x).cuda()`: a model kept on the CPU on purpose."""
        outer = self.outer_of.get(id(call.node))
        if outer is not None and is_move_call(outer):
            return True
        for arg in call.node.args:
            if isinstance(arg.value, cst.Call):
                inner = self.facts.call_for(arg.value)
                if inner is not None and inner.method == "cpu":
                    return True
        return False

    def model_state(self, callee: cst.BaseExpression, site: Site) -> str:
        """"placed" | "unplaced" | "wrapped" | "unknown" for a callee expression
        ("wrapped": DDP / DataParallel, which move their inputs themselves)."""
        name = dotted_name(callee)
        if name is None:
            return "unknown"
        # `self.model`: its assignments anywhere in the file (usually __init__).
        bindings = self.facts.visible_bindings(name, site.scope) if "." not in name else self.facts.bindings_of(name)
        for b in bindings:
            if b.value is not None and b.kind in ("assign", "annassign") and b.index is None:
                ctor, _ = self.unwrap(b.value)
                if ctor is not None and ((ctor.qualname in PLACERS and ctor.qualname != "torch.compile")
                                         or self._wrapper_name(ctor)):
                    return "wrapped"  # DDP / DataParallel scatter inputs to their devices themselves
        if name in self.moves:
            return "placed"
        if not bindings:
            return "unknown"
        state = "unplaced"
        for b in bindings:
            info = self.model_construction(b)
            if info is None:
                if b.value is not None and b.kind in ("assign", "annassign"):
                    inner, moved = self.unwrap(b.value)
                    if moved or (inner is not None and is_move_call(inner)):
                        return "placed"
                return "unknown" if state == "unplaced" else state
            if info[1]:
                return "placed"
            placed, _, uses = self.model_uses(b)
            if placed:
                if b.name not in self.moves and any(
                        self._deliberately_on_cpu(c) for c in (self.use_kind(u)[1] for u in uses)
                        if c is not None and c.node.func is not None and dotted_name(c.node.func) == b.name):
                    return "unplaced"  # kept on the CPU on purpose
                return "placed"
        return state

    # -- losses ----------------------------------------------------------

    def is_loss_call(self, call: Call) -> bool:
        q = call.qualname or ""
        if q.startswith("torch.nn.functional.") and q.rsplit(".", 1)[-1] in _LOSS_FUNCTIONS:
            return True
        name = (dotted_name(call.node.func) or "").rsplit(".", 1)[-1].lower()
        if "loss" in name or "crit" in name:
            return True
        if isinstance(call.node.func, cst.Name):
            for b in self.facts.visible_bindings(call.node.func.value, call.site.scope):
                if isinstance(b.value, cst.Call):
                    inner = self.facts.call_for(b.value)
                    if inner is not None and (inner.qualname or "").endswith("Loss"):
                        return True
        return False

    @staticmethod
    def model_expr(call: Call) -> cst.BaseExpression:
        """The model a forward-like call runs: `model` for `model(x)`,
        `model.forward(x)` and `model.generate(**x)`."""
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("forward", "generate"):
            return func.value
        return func

    def is_forward(self, call: Call) -> bool:
        """A model forward that is not a loss: `model(x)` on a module, or on a name
        that reads as a model (`model`, `net`) whose kind we cannot see."""
        if self.is_loss_call(call):
            return False
        func = self.model_expr(call)
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return False
        if self.sem.expr_kind(func, call.site) == "module":
            return True
        if self.sem.expr_kind(func, call.site) is not None:
            return False
        name = dotted_name(func) or ""
        return bool(_MODEL_NAME.search(name.rsplit(".", 1)[-1]))

    # -- tensors ---------------------------------------------------------

    def cpu_creation(self, expr: cst.BaseExpression) -> Optional[Call]:
        """A CPU tensor creation (`torch.randn(...)` without `device=`,
        `torch.from_numpy`, a tokenizer call with `return_tensors="pt"`), possibly
        through shape/dtype methods; None if moved on the way or not a creation."""
        call, moved = self.unwrap(expr)
        if call is None or moved:
            return None
        if call.qualname in CPU_TENSOR_SOURCES:
            if call.keyword("device") is not None or call.has_star_kwargs or self.under_device_context(call.site):
                return None
            return call
        if self.sem.is_tokenizer_call(call):
            return call
        return None

    # -- loops -----------------------------------------------------------

    def _index_loops(self) -> None:
        calls: Dict[int, List[Call]] = {}
        binds: Dict[int, List[Binding]] = {}
        uses: Dict[int, List[NameUse]] = {}
        for call in self.facts.calls:
            loop = call.site.loop
            while loop is not None:
                calls.setdefault(id(loop.node), []).append(call)
                loop = loop.parent
        for b in self.facts.bindings:
            loop = b.site.loop
            while loop is not None:
                binds.setdefault(id(loop.node), []).append(b)
                loop = loop.parent
        for u in self.facts.uses:
            loop = u.site.loop
            while loop is not None:
                uses.setdefault(id(loop.node), []).append(u)
                loop = loop.parent
        self._calls_by_loop, self._bindings_by_loop, self._uses_by_loop = calls, binds, uses

    def loop_calls(self, loop_node: cst.CSTNode) -> List[Call]:
        if self._calls_by_loop is None:
            self._index_loops()
        return self._calls_by_loop.get(id(loop_node), [])

    def loop_bindings(self, loop_node: cst.CSTNode) -> List[Binding]:
        if self._bindings_by_loop is None:
            self._index_loops()
        return self._bindings_by_loop.get(id(loop_node), [])

    def loop_uses(self, loop_node: cst.CSTNode) -> List[NameUse]:
        if self._uses_by_loop is None:
            self._index_loops()
        return self._uses_by_loop.get(id(loop_node), [])

    def unwrap_iter(self, expr: Optional[cst.BaseExpression]) -> Tuple[Optional[cst.BaseExpression], int]:
        """`enumerate(tqdm(loader))` -> (loader, number of enumerate wrappers)."""
        enumerations = 0
        while isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            name = dotted_name(expr.func) or ""
            if call is None or not (name in _WRAPPERS or (call.qualname or "") in _WRAPPERS
                                    or (call.qualname or "").startswith("tqdm")):
                return None, 0
            if not call.positional:
                return None, 0
            if name == "enumerate":
                enumerations += 1
            expr = call.positional[0].value
        return expr, enumerations

    def trusted_loader(self, expr: cst.BaseExpression, site: Site) -> bool:
        """A loader whose batches certainly come out on the CPU: bound only to
        torch's DataLoader (no collate_fn, dataset not on the device) or a
        parameter / unknown call that does not look like it places batches."""
        name = dotted_name(expr)
        if name is None:
            return False
        if _PLACING_NAME.search(name):
            return False
        if "." in name:
            # `self.train_loader`: every assignment of it in the file, and there must be one.
            bindings = self.facts.bindings_of(name)
            if not bindings:
                return False
        else:
            bindings = self.facts.visible_bindings(name, site.scope)
        for b in bindings:
            if b.kind == "param":
                continue
            if b.kind not in ("assign", "annassign") or b.index is not None or not isinstance(b.value, cst.Call):
                return False
            call = self.facts.call_for(b.value)
            if call is None:
                return False
            if self.sem.call_kind(call) == "loader":
                if call.keyword("collate_fn") is not None or call.has_star_kwargs:
                    return False
                if not self._dataset_on_cpu(call):
                    return False
                continue
            func = call.node.func
            fname = dotted_name(func) or ""
            if call.method in ("prepare", "prepare_data_loader", "setup_dataloaders") or _PLACING_NAME.search(fname):
                return False
            if isinstance(func, cst.Name):
                local = [x for x in self.facts.bindings_of(func.value) if x.kind in ("def", "class")]
                if any(x.kind == "class" or self._body_places(x.target) for x in local):
                    return False  # a project-local loader class, or a factory that places things
            if any(self._is_device_arg(a) for a in call.node.args):
                return False
        return True

    def _is_device_arg(self, arg: cst.Arg) -> bool:
        if arg.star:
            return True
        if arg.keyword is not None and "device" in arg.keyword.value:
            return True
        name = dotted_name(arg.value)
        return bool(name and _DEVICE_VAR.match(name.rsplit(".", 1)[-1]))

    def _dataset_on_cpu(self, loader: Call) -> bool:
        """False when the loader's dataset may already live on the device: a
        TensorDataset of moved tensors, a local class that moves things, a
        dataset built with a device argument."""
        ds = loader.keyword("dataset")
        expr = ds.value if ds is not None else (loader.positional[0].value if loader.positional else None)
        if isinstance(expr, cst.Name):
            bindings = self.facts.visible_bindings(expr.value, loader.site.scope)
            values = [b.value for b in bindings if b.kind != "param"]
            if len(values) > 1:
                return False
            expr = values[0] if values else None
        if not isinstance(expr, cst.Call):
            return True
        call = self.facts.call_for(expr)
        if call is None:
            return False
        func = expr.func
        if isinstance(func, cst.Name) and func.value in self.facts.classes:
            return not self._class_places(func.value)
        for arg in expr.args:
            if self._is_device_arg(arg):
                return False
            inner = arg.value
            n = dotted_name(inner)
            if n and n in self.moves:
                return False
            if isinstance(inner, cst.Name):
                for b in self.facts.visible_bindings(inner.value, loader.site.scope):
                    if isinstance(b.value, cst.Call) and self._on_device_expr(b.value):
                        return False
            elif isinstance(inner, cst.Call) and self._on_device_expr(inner):
                return False
        return True

    def _on_device_expr(self, expr: cst.Call) -> bool:
        c, moved = self.unwrap(expr)
        return moved or (c is not None and (is_move_call(c) or c.keyword("device") is not None))

    def _class_places(self, class_name: str) -> bool:
        """The class body moves something or mentions a device."""
        info = self.facts.classes.get(class_name)
        return True if info is None else self._body_places(info.node)

    def _body_places(self, node: cst.CSTNode) -> bool:
        """A class or function whose body moves something, passes `device=`, or
        names a device: it could hand out data that is already placed."""
        if self._placing_scopes is None:
            found: Set[int] = set()
            for call in self.facts.calls:
                if is_move_call(call) or call.keyword("device") is not None or call.keyword("pin_memory_device"):
                    for sc in call.site.scope.chain():
                        found.add(id(sc.node))
            for name in self.device_names():
                for use in self.facts.uses_of(name):
                    for sc in use.site.scope.chain():
                        found.add(id(sc.node))
            self._placing_scopes = found
        return id(node) in self._placing_scopes

    def loop_batch_vars(self, loop) -> List[Tuple[str, cst.Name]]:
        """The names a `for` over a loader binds to batch contents (the enumerate
        index left out)."""
        node = loop.node
        if not isinstance(node, cst.For):
            return []
        _, enumerations = self.unwrap_iter(node.iter)
        target = node.target
        for _ in range(enumerations):
            if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
                return []
            target = target.elements[1].value
        return _names_in(target)


def _names_in(target: cst.BaseExpression) -> List[Tuple[str, cst.Name]]:
    if isinstance(target, cst.Name):
        return [(target.value, target)]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[Tuple[str, cst.Name]] = []
        for el in target.elements:
            if isinstance(el, cst.StarredElement):
                return []
            sub = _names_in(el.value)
            if not sub:
                return []
            out.extend(sub)
        return out
    return []


def placement(ctx) -> Placement:
    """The file's Placement, built once and shared by every rule."""
    sem = ctx.sem
    found = getattr(sem, "_placement", None)
    if found is None:
        found = Placement(ctx.facts, sem)
        sem._placement = found
    return found


def call_with_to(expr: cst.BaseExpression, device: str) -> cst.Call:
    """`expr.to(device)`."""
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("to")), args=[cst.Arg(cst.Name(device))])


_EQ = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` appended as its last argument."""
    args = list(call.args)
    if args:
        last = args[-1]
        if not isinstance(last.comma, cst.Comma):
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(value, keyword=cst.Name(name), equal=_EQ))
    return call.with_changes(args=args)
