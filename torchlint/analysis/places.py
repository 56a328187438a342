"""Where values live, as facts at a point of the program: the `Places` of a file.

The questions come in layers, each a class: what a device expression names
(devices.py: `device_of`, `move_device`), where a module is at a statement
(module_places.py: `model_place`), and here where a tensor is:
`tensor_place(expr, site)`: DEVICE, CPU, TENSOR (a tensor whose place we
cannot tell) or None (not known to be a tensor), through factories, moves,
model outputs, losses, arithmetic, same-file helpers' returns, unpacked
outputs and the reaching bindings of names (where a batch comes from is
batch_sources.py). The kinds of answer are place_kinds.py.

Precision first: every question answers "unknown" when a value could have
been placed somewhere we cannot see, and rules stay silent then.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.batch_sources import BatchSources
from torchlint.analysis.facts import (
    Binding,
    BindingKind,
    Call,
    Function,
    Loop,
    Part,
    ScopeKind,
    Site,
    dominates,
    dotted_name,
)
from torchlint.analysis.knowledge import TUPLE_METHODS, is_move_call
from torchlint.analysis.place_kinds import ACCEL, CPU, DEVICE, HOST, TENSOR, Place, SplitMove, join
from torchlint.analysis.value_kinds import MODULE, TOKENS, ModelCall
from torchlint.analysis.vocabulary import COPIES, CPU_TENSOR_SOURCES, GRAD_NORMS, LEGACY_TENSOR_TYPES, VARIABLE

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


class Places(BatchSources):
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

    def _grad_norm_place(self, call: Call) -> Place:
        """`clip_grad_norm_(model.parameters(), ...)`: the total norm is a tensor
        where the model's parameters are (DEVICE, CPU; TENSOR: can't tell)."""
        arg = call.positional[0] if call.positional else call.keyword("parameters")
        value = arg.value if arg is not None else None
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and not value.args:
            if value.func.attr.value == "parameters":
                place = self.model_place(value.func.value, call.site)
                if place in (DEVICE, CPU):
                    return place
        return TENSOR

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
        if self.to_tensor_transform(call):
            return CPU  # `ToTensor()(image)`
        if q in GRAD_NORMS:
            return self._grad_norm_place(call)
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
            if self.casts_to_cuda_type(call) and self.values.expr_kind(call.receiver, call.site) not in (
                MODULE,
                TOKENS,
            ):
                return DEVICE  # `x.type(Tensor)`, `Tensor = torch.cuda.FloatTensor if cuda else ...`: its GPU copy
            base = self.tensor_place(call.receiver, call.site)
            if base is None:
                # `x.to(device)` / `x.cuda()` of something we can't type (a batch of an unknown
                # loader): whatever it is, it now lives on the device.
                if (
                    call.method in ("to", "cuda")
                    and is_move_call(call)
                    and self.move_device(call) == ACCEL
                    and self.values.expr_kind(call.receiver, call.site) not in (MODULE, TOKENS)
                    and not self._built_object(call.receiver)
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

    def _built_object(self, expr: cst.BaseExpression) -> bool:
        """`GraphLandDataset(root=...)`, `Data(x=x)`: an instance of a class (a
        capitalised callee not from torch), moved whole (a graph dataset, a
        batch object), not a tensor."""
        if not isinstance(expr, cst.Call):
            return False
        name = dotted_name(expr.func)
        if name is None or not name.rsplit(".", 1)[-1][:1].isupper():
            return False
        return not (self.facts.qualname(expr.func) or "").startswith("torch.")

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
        return b is not None and b.index is None and self._reaches_backward(b)

    def _reaches_backward(self, b: Binding) -> bool:
        """The value `b` binds (a plain name, or one part of an unpacked tuple) reaches
        `.backward()` in the same scope, unchanged."""
        if b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) or "." in b.name:
            return False
        for c in self.helpers.calls_in_scope(b.site.scope):
            target = backpropagated(c)
            if (
                c.site.order > b.site.order
                and isinstance(target, cst.Name)
                and target.value == b.name
                and self.reaching(b.name, c.site) == [b]
            ):
                return True
        return False

    # -- names ------------------------------------------------------------------------------

    def cpu_input(self, expr: cst.BaseExpression, site: Site) -> Optional[Tuple[Call, Optional[str]]]:
        """(the creating call, the name it is bound to or None) for a value read
        at `site` that is certainly created on the CPU and not moved before."""
        creation = self.cpu_creation(expr)
        if creation is not None:
            return creation, None
        if not isinstance(expr, cst.Name):
            return None
        if self.tensor_place(expr, site) != CPU and self.values.expr_kind(expr, site) != TOKENS:
            return None
        reaching = self.facts.reaching(expr.value, site)
        if (
            len(reaching) != 1
            or reaching[0].kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            or reaching[0].index is not None
        ):
            return None
        b = reaching[0]
        if b.site.scope is not site.scope or self._escapes_between(expr.value, b.site, site):
            return None
        if any(
            c.method == "to" and dotted_name(c.receiver) == expr.value and b.site.order < c.site.order < site.order
            for c in self.helpers.calls_in_scope(site.scope)
        ):
            return None  # tokenizer output moves in place: `inputs.to(device)`
        if self.moved_by_key(expr.value, b.site.order, site) is not None:
            return None  # `for k, v in inputs.items(): inputs[k] = v.to(device)`
        creation = self.cpu_creation(b.value)
        return (creation, expr.value) if creation is not None else None

    def crashes_on_device(self, mc: ModelCall) -> bool:
        """The model is on the device and its input (the first argument: others
        may be host values it wants there, such as `pack_padded_sequence`
        lengths) is certainly a CPU tensor made in this scope: on a GPU the
        forward raises a device mismatch (TL102's finding), so nothing after it
        runs there."""
        site = mc.call.site
        args = mc.call.node.args
        return (
            bool(args)
            and not args[0].star
            and args[0].keyword is None
            and self.model_place(mc.model, site) == DEVICE
            and self.cpu_input(args[0].value, site) is not None
        )

    def _escapes_between(self, name: str, start: Site, end: Site) -> bool:
        """Between the binding and the use, the name is handed to code that could
        move or replace its contents (`to_device(x)`; `x.copy_(...)` is fine)."""
        for use in self.facts.uses_of(name):
            if use.site.scope is not end.scope or not (start.order < use.site.order < end.order):
                continue
            if use.site.stmt is start.stmt:
                continue  # read by the binding's own value (`y = ToTensor()(y)`)
            parent = use.site.parent
            if isinstance(parent, cst.Arg):
                call = self.facts.call_of_arg(parent)
                if (
                    call is None
                    or self.values.model_call(call) is not None
                    or (call.qualname or "").startswith("torch.")
                ):
                    continue
                if isinstance(call.node.func, cst.Name) and call.node.func.value in ("print", "len"):
                    continue
                return True
        return False

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
        if "." not in name and self.values.elements_moved(name, site):
            return None  # `targets[i] = targets[i].to(device)`: a list of tensors, not a tensor
        if "." in name:
            bindings = self.facts.bindings_of(name)
        else:
            bindings = self._module_value_at_call(name, site) or self.reaching(name, site)
        if not bindings:
            return None
        place = join([self._binding_tensor_place(b) for b in bindings])
        if place == CPU and "." not in name:
            moved = self.moved_by_key(name, max(b.site.order for b in bindings), site)
            if moved is not None:
                return moved
        return place

    def _module_value_at_call(self, name: str, site: Site) -> List[Binding]:
        """For a global `name` read in a function (`train_label` in `train()`): the
        module's last binding of it, when that binding is a top-level statement
        and every same-file call of the function comes later from module code
        (`train()` at the end of the script): the value it reads is that one."""
        fn_scope = site.scope.function
        fn = self.facts.function_of(fn_scope) if fn_scope is not None else None
        if fn is None or fn.scope.parent is None or fn.scope.parent.kind != ScopeKind.MODULE:
            return []
        visible = self.facts.visible_bindings(name, site.scope)
        if not visible or any(b.site.scope.kind != ScopeKind.MODULE for b in visible):
            return []
        last = max(visible, key=lambda b: b.site.order)
        if last.site.region or last.index is not None:
            return []  # bound in a branch or loop, or unpacked: it need not be the one
        callers = self.values.callers(fn)
        if not callers or any(
            c.site.scope.kind != ScopeKind.MODULE or c.site.order <= last.site.order for c in callers
        ):
            return []
        return [last]

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
                    if call is not None and self._reaches_backward(b):
                        # `loss, est = diffusion.p_loss(model, x)` then `loss.backward()`: a tensor
                        # with a graph, computed from the call's tensor arguments (where they are).
                        parts = [self.tensor_place(a.value, call.site) for a in call.node.args if not a.star]
                        known = [p for p in parts if p is not None]
                        return join(known) if known else TENSOR
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


def _number(expr: Optional[cst.BaseExpression]) -> bool:
    """A number literal: `0`, `0.`, `-1.0`."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float))


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


def backpropagated(call: "Call") -> Optional[cst.BaseExpression]:
    """What `call` runs backward from, when it is `t.backward()`: `t`, also through
    AMP's loss scaling (`scaler.scale(loss).backward()`) and a scaling by a number
    (`(loss / accum_steps).backward()`). None for any other call."""
    if call.method != "backward" or call.receiver is None:
        return None
    expr = call.receiver
    while True:
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "scale"
            and len(expr.args) == 1
            and expr.args[0].keyword is None
            and not expr.args[0].star
        ):
            expr = expr.args[0].value
        elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Divide, cst.Multiply)):
            if isinstance(expr.right, (cst.Integer, cst.Float, cst.Name, cst.Attribute)) and not isinstance(
                expr.left, (cst.Integer, cst.Float)
            ):
                expr = expr.left
            else:
                return expr
        else:
            return expr
