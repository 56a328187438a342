"""Which expressions hold tensors (not Python numbers, lists or modules).

Conservative on purpose: an expression is a tensor only when the analysis can
see where it came from -- a torch factory or op, a module forward (model
output, loss), a tensor method, arithmetic or indexing on a tensor, a loop
over a tensor, or a function parameter that every caller in the file passes a
tensor to. Everything else (`scheduler.get_last_lr()[0]`, `group["lr"]`,
`len(x)`, loader batches, lists of tensors) is unknown and rules stay silent.

`tensor_place` also says when a tensor is certainly on the CPU (created by a
factory without `device=`, or the result of `.cpu()`), so sync rules can skip
host-only work.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional

import libcst as cst

from torchlint.analysis.facts import Binding, Call, Function, Site, dotted_name
from torchlint.analysis.semantics import CPU_TENSOR_SOURCES, Semantics

TENSOR = "tensor"
CPU = "cpu"

# Tensor methods that do not return a tensor.
_NON_TENSOR_METHODS = frozenset(
    "item tolist numpy size dim ndimension numel nelement data_ptr element_size is_contiguous is_floating_point "
    "is_complex is_cuda backward register_hook get_device stride storage_offset untyped_storage "
    "__len__ __repr__ __str__ __format__ equal allclose all_close is_set_to is_pinned "
    "keys values items parameters named_parameters modules children named_modules state_dict "
    "zero_ step append extend split chunk unbind tensor_split sort topk kthvalue".split()
)
# Tensor attributes that are not tensors.
_NON_TENSOR_ATTRS = frozenset(
    "shape device dtype ndim requires_grad is_cuda is_leaf layout names grad_fn is_sparse is_quantized "
    "is_meta itemsize nbytes".split()
)
# Attributes of a tensor that are tensors.
_TENSOR_ATTRS = frozenset("T mT H mH data grad real imag".split())
# torch.* functions (top level) that do not return a tensor.
_TORCH_NON_TENSOR = frozenset(
    "device dtype is_tensor is_storage numel no_grad inference_mode enable_grad set_grad_enabled "
    "manual_seed seed initial_seed save load compile jit cuda backends get_default_dtype set_default_dtype "
    "is_grad_enabled is_inference_mode_enabled set_printoptions get_num_threads set_num_threads "
    "use_deterministic_algorithms is_floating_point is_complex typename equal allclose Size Generator "
    "autocast set_float32_matmul_precision get_rng_state set_rng_state from_dlpack is_nonzero "
    "Tensor FloatTensor LongTensor "
    # These return tuples/lists of tensors.
    "split chunk unbind tensor_split hsplit vsplit dsplit meshgrid broadcast_tensors atleast_1d atleast_2d "
    "atleast_3d unique_consecutive sort topk kthvalue mode median aminmax frexp lu svd qr eig slogdet "
    "nonzero_static".split()
)
_OUTPUT_TENSOR_ATTR = re.compile(
    r"(logits|loss|last_hidden_state|pooler_output|embeds|embeddings|scores|pred_boxes|pred_masks|sample|"
    r"prediction|predictions|output)$")
_CPU_MOVES = frozenset({"cpu"})
_DEVICE_MOVES = frozenset({"to", "cuda", "to_device"})


class Tensors:
    """Memoised tensor facts for one file (attach one per Semantics)."""

    def __init__(self, sem: Semantics) -> None:
        self.sem = sem
        self.facts = sem.facts
        self._cache: Dict[int, Optional[str]] = {}
        self._callers: Optional[Dict[str, List[Call]]] = None

    @classmethod
    def of(cls, sem: Semantics) -> "Tensors":
        t = getattr(sem, "_tl_tensors", None)
        if t is None:
            t = cls(sem)
            sem._tl_tensors = t  # type: ignore[attr-defined]
        return t

    # -- public ------------------------------------------------------------

    def is_tensor(self, expr: Optional[cst.BaseExpression], site: Site) -> bool:
        return self.place(expr, site) is not None

    def place(self, expr: Optional[cst.BaseExpression], site: Site) -> Optional[str]:
        """None (not known to be a tensor), "cpu" (a CPU tensor) or "tensor"."""
        if expr is None:
            return None
        key = id(expr)
        if key in self._cache:
            return self._cache[key]
        self._cache[key] = None  # cycle guard
        result = self._place(expr, site)
        self._cache[key] = result
        return result

    def callers(self, name: str) -> List[Call]:
        """Calls `name(...)` by plain name anywhere in the file."""
        if self._callers is None:
            self._callers = {}
            for call in self.facts.calls:
                if isinstance(call.node.func, cst.Name):
                    self._callers.setdefault(call.node.func.value, []).append(call)
        return self._callers.get(name, [])

    # -- derivation ----------------------------------------------------------

    def _place(self, expr: cst.BaseExpression, site: Site) -> Optional[str]:
        if isinstance(expr, cst.Call):
            return self._call_place(expr, site)
        if isinstance(expr, cst.Name):
            return self._name_place(expr.value, site)
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            if attr in _NON_TENSOR_ATTRS:
                return None
            # Tensor attributes of a model output (`outputs.logits`, `out.loss`);
            # `hidden_states`, `attentions`, `past_key_values` are tuples.
            if self._is_forward_expr(expr.value, site):
                return TENSOR if _OUTPUT_TENSOR_ATTR.search(attr) else None
            base = self.place(expr.value, site)
            if base is not None:
                return base if attr in _TENSOR_ATTRS else None
            name = dotted_name(expr)
            if name and "." in name and not name.startswith("self."):
                return self._name_place(name, site)
            return None
        if isinstance(expr, cst.Subscript):
            base = self.place(expr.value, site)
            if base is not None:
                return base
            return None
        if isinstance(expr, cst.BinaryOperation):
            left = self.place(expr.left, site)
            right = self.place(expr.right, site)
            if left == TENSOR or right == TENSOR:
                return TENSOR
            return left or right
        if isinstance(expr, cst.Comparison):
            operands = [expr.left] + [c.comparator for c in expr.comparisons]
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return None
            places = [self.place(o, site) for o in operands]
            if TENSOR in places:
                return TENSOR
            return CPU if CPU in places else None
        if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
            return self.place(expr.expression, site)
        return None

    def is_forward_output(self, expr: cst.BaseExpression, site: Site) -> bool:
        """A model's direct output (may be a tuple or a ModelOutput, not a tensor)."""
        return self._is_forward_expr(expr, site)

    def _is_forward_expr(self, expr: cst.BaseExpression, site: Site) -> bool:
        if isinstance(expr, cst.Call):
            call = self.facts.call_for(expr)
            return call is not None and self.sem.is_model_forward(call)
        if isinstance(expr, cst.Name):
            bs = self._reaching(expr.value, site)
            return bool(bs) and all(
                b.kind in ("assign", "annassign") and b.index is None and b.value is not None
                and self._is_forward_expr(b.value, b.site) for b in bs)
        return False

    def _call_place(self, node: cst.Call, site: Site) -> Optional[str]:
        call = self.facts.call_for(node)
        if call is None:
            return None
        q = call.qualname
        if q in CPU_TENSOR_SOURCES:
            if q == "torch.from_numpy" or call.keyword("device") is None:
                return CPU
            return TENSOR
        if self.sem.is_model_forward(call) or self._is_module_param_call(call):
            return TENSOR
        if q and q.startswith("torch."):
            rest = q[len("torch."):]
            if "." not in rest:
                if rest in _TORCH_NON_TENSOR or rest[:1].isupper() or rest.startswith(("is_", "get_", "set_", "_")):
                    return None
                places = [self.place(a.value, site) for a in node.args if a.keyword is None]
                if TENSOR in places or call.keyword("device") is not None:
                    return TENSOR
                return CPU if CPU in places and None not in places else TENSOR
            if rest.startswith(("nn.functional.", "linalg.", "fft.", "special.")):
                places = [self.place(a.value, site) for a in node.args if a.keyword is None]
                return CPU if places and all(p == CPU for p in places) else TENSOR
            return None
        if call.method is not None and call.receiver is not None and q is None:
            if call.method in _NON_TENSOR_METHODS:
                return None
            base = self.place(call.receiver, site)
            if base is None:
                return None
            if call.method in _CPU_MOVES:
                return CPU
            if call.method in _DEVICE_MOVES:
                return TENSOR
            return base
        return None

    def _is_module_param_call(self, call: Call) -> bool:
        """`model(x)` where `model` is a parameter every same-file caller passes
        a module to."""
        func = call.node.func
        if not isinstance(func, cst.Name):
            return False
        bindings = self.facts.visible_bindings(func.value, call.site.scope)
        if len(bindings) != 1 or bindings[0].kind != "param":
            return False
        b = bindings[0]
        fn = self.facts.function_of(b.site.scope)
        if fn is None or not isinstance(fn.node, cst.FunctionDef):
            return False
        params = [p.name.value for p in fn.node.params.params]
        if b.name not in params or (b.site.scope.parent is not None and b.site.scope.parent.kind == "class"):
            return False
        index = params.index(b.name)
        callers = self.callers(fn.name)
        if not callers:
            return False
        for c in callers:
            kw = c.keyword(b.name)
            pos = c.positional
            arg = kw.value if kw is not None else (pos[index].value if index < len(pos) else None)
            if arg is None or any(a.star for a in c.node.args) or not self.is_module_expr(arg, c.site):
                return False
        return True

    def is_module_expr(self, expr: cst.BaseExpression, site: Site, depth: int = 0) -> bool:
        """A module: what Semantics knows, or the result of a same-file function
        whose every `return` gives a module (`model = load_model(path)`)."""
        if self.sem.expr_kind(expr, site) == "module":
            return True
        if depth > 3:
            return False
        if isinstance(expr, cst.Name):
            bs = self.facts.visible_bindings(expr.value, site.scope)
            return len(bs) == 1 and bs[0].kind == "assign" and bs[0].index is None and bs[0].value is not None \
                and self.is_module_expr(bs[0].value, bs[0].site, depth + 1)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
            bs = self.facts.visible_bindings(expr.func.value, site.scope)
            if len(bs) != 1 or bs[0].kind != "def":
                return False
            fn = next((f for f in self.facts.functions if f.node is bs[0].target), None)
            if fn is None:
                return False
            returns = [(st, s) for st, s in self.facts.statements if isinstance(st, cst.Return) and s.scope is fn.scope]
            return bool(returns) and all(st.value is not None and self.is_module_expr(st.value, s, depth + 1)
                                         for st, s in returns)
        return False

    def _reaching(self, name: str, site: Site) -> List[Binding]:
        """Bindings of `name` visible at `site`: earlier ones in the same scope,
        or all of an enclosing scope's."""
        out = []
        for b in self.facts.visible_bindings(name, site.scope):
            if b.site.scope is site.scope and b.site.order > site.order and b.kind != "for":
                # A later rebinding in a loop could reach here too.
                loop = site.loop
                if loop is None or not loop.contains(b.site.order):
                    continue
            out.append(b)
        return out

    def _name_place(self, name: str, site: Site) -> Optional[str]:
        bindings = self._reaching(name, site)
        if not bindings:
            return None
        places = set()
        for b in bindings:
            places.add(self._binding_place(b))
        if None in places or len(places) == 0:
            return None
        return TENSOR if TENSOR in places else CPU

    def _binding_place(self, b: Binding) -> Optional[str]:
        if b.kind in ("assign", "annassign", "walrus"):
            if b.value is None:
                return None
            if b.index is not None:
                # `a, b = t1, t2`
                if isinstance(b.value, (cst.Tuple, cst.List)) and b.index < len(b.value.elements):
                    el = b.value.elements[b.index]
                    if isinstance(el, cst.StarredElement):
                        return None
                    return self.place(el.value, b.site)
                return None
            return self.place(b.value, b.site)
        if b.kind == "augassign":
            return self.place(b.value, b.site) if b.value is not None else None
        if b.kind in ("for", "comprehension"):
            if b.index is not None or b.value is None:
                return None
            return self.place(b.value, b.site)
        if b.kind == "param":
            return self._param_place(b)
        return None

    def _param_place(self, b: Binding) -> Optional[str]:
        """A parameter every same-file caller passes a tensor to."""
        fn: Optional[Function] = self.facts.function_of(b.site.scope)
        if fn is None or not isinstance(fn.node, cst.FunctionDef):
            return None
        if b.site.scope.parent is not None and b.site.scope.parent.kind == "class":
            return None  # methods: callers are not resolvable by name
        params = [p.name.value for p in fn.node.params.params]
        if b.name not in params:
            return None
        index = params.index(b.name)
        callers = [c for c in self.callers(fn.name)]
        if not callers:
            return None
        places = set()
        for c in callers:
            arg = None
            kw = c.keyword(b.name)
            if kw is not None:
                arg = kw.value
            else:
                pos = c.positional
                if any(a.star for a in c.node.args):
                    return None
                if index < len(pos):
                    arg = pos[index].value
            if arg is None:
                return None
            places.add(self.place(arg, c.site))
        if None in places:
            return None
        return TENSOR if TENSOR in places else CPU
