"""Questions rules ask about the facts: what kind of value an expression holds,
whether a device is in play, which loops are hot, what runs without gradients.

Everything here is derived from `Facts` (one pass) and memoised per file on
the `Semantics` object, so every rule shares one answer.
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Set

import libcst as cst

from torchlint.analysis.facts import Binding, Call, Facts, Loop, Scope, Site, dotted_name

# torch functions that allocate a new tensor on the default (CPU) device unless
# given `device=`.
TENSOR_FACTORIES = frozenset(
    "torch." + n
    for n in (
        "randn rand randint randperm zeros ones empty full arange linspace logspace eye "
        "tensor as_tensor normal bernoulli multinomial empty_strided tril_indices triu_indices"
    ).split()
)
# Factories that accept `device=` (from_numpy does not).
DEVICE_KWARG_FACTORIES = TENSOR_FACTORIES
CPU_TENSOR_SOURCES = TENSOR_FACTORIES | {"torch.from_numpy"}

DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
TENSOR_DATASET = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
NN_MODULE = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# torch.nn names that are not Module classes.
_NN_NON_MODULES = ("torch.nn.functional", "torch.nn.init", "torch.nn.utils", "torch.nn.Parameter",
                   "torch.nn.parameter", "torch.nn.attention", "torch.nn.grad")
NO_GRAD_CONTEXTS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
                              "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"})
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})
# Things that can place a model somewhere we can't see.
PLACERS = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.DDP",
    "torch.distributed.fsdp.FullyShardedDataParallel", "torch.compile",
})
_NON_MODEL_PRETRAINED = re.compile(r"(Tokenizer|Processor|Config|FeatureExtractor|Scheduler|Pipeline)", re.I)
_DEVICE_STRING = re.compile(r"""^[rbuRBU]*['"](cuda(:\d+)?|mps|xpu(:\d+)?)['"]$""")
_LOADER_NAME = re.compile(r"loader", re.I)
_WRAPPER_ITERS = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "zip"})


def is_device_string(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleString) and bool(_DEVICE_STRING.match(node.value))


class Semantics:
    """Derived, memoised knowledge about one file."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self._kind_cache: Dict[int, Optional[str]] = {}
        self._module_classes: Optional[Set[str]] = None
        self._hot: Optional[Set[int]] = None
        self._device_in_play: Optional[bool] = None

    # -- classes ---------------------------------------------------------

    def module_classes(self) -> Set[str]:
        """Names of classes defined in this file that subclass torch.nn.Module."""
        if self._module_classes is None:
            found: Set[str] = set()
            changed = True
            while changed:
                changed = False
                for name, info in self.facts.classes.items():
                    if name in found:
                        continue
                    for base in info.bases:
                        q = self.facts.qualname(base)
                        if (q and (q in NN_MODULE or self._is_nn_layer(q))) or (
                            isinstance(base, cst.Name) and base.value in found
                        ):
                            found.add(name)
                            changed = True
                            break
            self._module_classes = found
        return self._module_classes

    @staticmethod
    def _is_nn_layer(q: str) -> bool:
        if not q.startswith("torch.nn.") or q.startswith(_NN_NON_MODULES):
            return False
        last = q.rsplit(".", 1)[-1]
        return last[:1].isupper()

    # -- kinds of values -------------------------------------------------

    def call_kind(self, call: Call) -> Optional[str]:
        """"module" | "tensor" | "loader" | "device" | "tokens" | "tokenizer" | None."""
        q = call.qualname
        if q:
            if q in CPU_TENSOR_SOURCES:
                return "tensor"
            if q in DATALOADER:
                return "loader"
            if q == "torch.device":
                return "device"
            if self._is_nn_layer(q) or q.startswith("torchvision.models.") and q.rsplit(".", 1)[-1][:1].islower():
                return "module"
            if q == "timm.create_model":
                return "module"
        func = call.node.func
        if isinstance(func, cst.Name) and func.value in self.module_classes():
            return "module"
        if call.method == "from_pretrained":
            recv = dotted_name(call.receiver) or ""
            return "tokenizer" if _NON_MODEL_PRETRAINED.search(recv) else "module"
        if call.method in ("to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval",
                           "requires_grad_", "to_empty") and call.receiver is not None:
            inner = self.expr_kind(call.receiver, call.site)
            if inner in ("module", "tensor", "tokens"):
                return inner
        if call.qualname is None and isinstance(func, cst.Name) and self.is_tokenizer_call(call):
            return "tokens"
        if call.method is None and isinstance(func, cst.Name) and self.is_tokenizer_call(call):
            return "tokens"
        return None

    def is_tokenizer_call(self, call: Call) -> bool:
        """`tokenizer(..., return_tensors="pt")` on a name bound to a tokenizer."""
        arg = call.keyword("return_tensors")
        if arg is None or not isinstance(arg.value, cst.SimpleString) or arg.value.evaluated_value != "pt":
            return False
        func = call.node.func
        if isinstance(func, cst.Name):
            return any(self.binding_kind(b) == "tokenizer" for b in self.facts.visible_bindings(func.value, call.site.scope)) \
                or "tokenizer" in func.value.lower()
        return "tokenizer" in (dotted_name(func) or "").lower()

    def binding_kind(self, b: Binding) -> Optional[str]:
        if b.kind in ("class", "def", "import", "param", "for", "comprehension", "except"):
            return None
        if b.index is not None or b.value is None:
            return None
        return self.expr_kind(b.value, b.site)

    def expr_kind(self, expr: cst.BaseExpression, site: Site) -> Optional[str]:
        key = id(expr)
        if key in self._kind_cache:
            return self._kind_cache[key]
        self._kind_cache[key] = None  # cycle guard
        kind: Optional[str] = None
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            kind = self.call_kind(call) if call else None
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            name = dotted_name(expr)
            if name:
                kinds = {self.binding_kind(b) for b in self.facts.visible_bindings(name, site.scope)
                         if b.site.order <= site.order or b.site.scope is not site.scope}
                kinds.discard(None)
                if len(kinds) == 1:
                    kind = kinds.pop()
        self._kind_cache[key] = kind
        return kind

    # -- device in play --------------------------------------------------

    def device_in_play(self) -> bool:
        """RULES.md: the file selects or uses an accelerator."""
        if self._device_in_play is None:
            self._device_in_play = self._compute_device_in_play()
        return self._device_in_play

    def _compute_device_in_play(self) -> bool:
        f = self.facts
        for call in f.calls:
            if call.qualname in ("torch.device", "torch.cuda.is_available", "torch.backends.mps.is_available"):
                return True
            if call.method == "cuda":
                return True
            if call.method == "to" and call.node.args:
                return True
            if call.keyword("device") is not None:
                return True
        return any(is_device_string(s) for s, _ in f.strings)

    # -- loops -----------------------------------------------------------

    def is_loader_expr(self, expr: Optional[cst.BaseExpression], site: Site) -> bool:
        """A DataLoader: bound to DataLoader(...), named *loader*, or wrapped by enumerate/tqdm."""
        if expr is None:
            return False
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            if call is None:
                return False
            if self.call_kind(call) == "loader":
                return True
            name = dotted_name(expr.func)
            if name in _WRAPPER_ITERS or (call.qualname or "").startswith("tqdm"):
                return any(self.is_loader_expr(a.value, site) for a in call.positional[:1])
            return False
        if isinstance(expr, (cst.Name, cst.Attribute)):
            name = dotted_name(expr) or ""
            if _LOADER_NAME.search(name.rsplit(".", 1)[-1]):
                return True
            return self.expr_kind(expr, site) == "loader"
        return False

    def hot_loops(self) -> Set[int]:
        """ids of loop nodes that are hot (RULES.md), nested loops included."""
        if self._hot is None:
            direct: Set[int] = set()
            for loop in self.facts.loops:
                site = self.facts.site_of_statement(loop.node)
                if site is not None and self.is_loader_expr(loop.iter, site):
                    direct.add(id(loop.node))
            # A loop whose own body (not a nested loop's) trains or runs a model.
            for call in self.facts.calls:
                loop = call.site.loop
                if loop is None or id(loop.node) in direct or call.site.scope is not loop.scope:
                    continue
                if call.method == "backward" or self.is_optimizer_step(call) or self.is_model_forward(call):
                    direct.add(id(loop.node))
            self._hot = {id(l.node) for l in self.facts.loops if any(id(p.node) in direct for p in l.chain())}
        return self._hot

    def is_hot(self, loop: Optional[Loop]) -> bool:
        return loop is not None and id(loop.node) in self.hot_loops()

    def hot_loop_of(self, site: Site) -> Optional[Loop]:
        """The outermost hot loop enclosing `site`, if any."""
        found = None
        for loop in (site.loop.chain() if site.loop else ()):
            if self.is_hot(loop):
                found = loop
        return found

    def is_optimizer_step(self, call: Call) -> bool:
        if call.method != "step" or call.receiver is None:
            return False
        name = dotted_name(call.receiver) or ""
        if "optim" in name.lower() or name.split(".")[-1] in ("opt",):
            return True
        return self.expr_kind(call.receiver, call.site) == "optimizer"

    def is_model_forward(self, call: Call) -> bool:
        """A call of a value known to be an nn.Module: `model(x)`."""
        func = call.node.func
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return False
        return self.expr_kind(func, call.site) == "module"

    # -- gradients -------------------------------------------------------

    def is_no_grad_with(self, with_node: cst.With) -> bool:
        for item in with_node.items:
            if self._is_no_grad_expr(item.item):
                return True
        return False

    def _is_no_grad_expr(self, expr: cst.BaseExpression) -> bool:
        target = expr.func if isinstance(expr, cst.Call) else expr
        q = self.facts.qualname(target)
        if q in NO_GRAD_CONTEXTS:
            return True
        if q in SET_GRAD_ENABLED and isinstance(expr, cst.Call) and expr.args:
            v = expr.args[0].value
            return isinstance(v, cst.Name) and v.value == "False"
        return False

    def is_no_grad_function(self, scope: Scope) -> bool:
        fn = self.facts.function_of(scope)
        if fn is None:
            return False
        return any(self._is_no_grad_expr(d.decorator) for d in fn.decorators)

    def under_no_grad(self, site: Site) -> bool:
        """Lexically guarded: inside a no-grad `with`, or a function decorated so."""
        if any(self.is_no_grad_with(w) for w in site.withs):
            return True
        return any(self.is_no_grad_function(s) for s in site.scope.chain() if s.kind == "function")

