"""The one answer to "is this call a model forward" (`model_call`) and to "is
this call a loss" (`is_loss_call`); optimizer steps, training calls (a
library trainer's run too), parameter-free and pretrained modules.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING, Optional, Set

import libcst as cst

from torchlint.analysis.facts import BindingKind, Call, ScopeKind, Site, dotted_name, strip_methods
from torchlint.analysis.vocabulary import (
    GRAD_USERS,
    LOSS_FUNCTIONS,
    LOSS_NAME,
    MODEL_FACTORY_NAME,
    MODEL_LOADERS,
    MODEL_NAME,
)

if TYPE_CHECKING:
    pass
from typing import TYPE_CHECKING

from torchlint.analysis.value_kinds import (
    _SAME_KIND_METHODS,
    LOSS_FN,
    MODULE,
    OPTIMIZER,
    ForwardMethod,
    ModelCall,
    ValueKinds,
)

_OPT_NAME = re.compile(r"^(opt|optimi[sz]er)(_\w+)?$|^\w+_opt$")


class Forwards(ValueKinds):
    """Forwards, losses and training calls, on top of the value kinds."""

    if TYPE_CHECKING:  # answered by Values (values.py)

        def forward_returns_container(self, model: cst.BaseExpression, site: Site) -> bool:
            raise NotImplementedError

    # -- forwards and losses -------------------------------------------------------------

    def model_call(self, call: Call) -> Optional[ModelCall]:
        """The one answer to "is this a model forward" (memoised per call)."""
        key = id(call.node)
        if key in self._model_calls:
            return self._model_calls[key]
        found = self._model_calls[key] = self._model_call(call)
        return found

    def _model_call(self, call: Call) -> Optional[ModelCall]:
        func = call.node.func
        method = None
        model: cst.BaseExpression = func
        if isinstance(func, cst.Attribute) and func.attr.value in ("forward", "generate"):
            method, model = ForwardMethod(func.attr.value), func.value
        if not isinstance(model, (cst.Name, cst.Attribute)) or self.is_loss_call(call):
            return None
        kind = self.expr_kind(model, call.site)
        if kind == MODULE:
            return ModelCall(call, model, method, True)
        if kind is not None:
            return None
        if self._loaded_model(model, call.site):
            return ModelCall(call, model, method, True)
        name = dotted_name(model) or ""
        last = name.rsplit(".", 1)[-1]
        if MODEL_NAME.search(last) and not MODEL_FACTORY_NAME.match(last) and not self._names_function(name, call.site):
            return ModelCall(call, model, method, False)
        return None

    def _names_function(self, name: str, site: Site) -> bool:
        """`name` is a function, not a module instance: bound by `def` or an
        import, or an attribute of an imported module (`utils.load_model`)."""
        root = name.split(".", 1)[0]
        if "." not in name:
            return any(
                b.kind in (BindingKind.DEF, BindingKind.IMPORT, BindingKind.CLASS)
                for b in self.bindings_for(name, site)
            )
        return any(b.kind == BindingKind.IMPORT for b in self.bindings_for(root, site))

    def _loaded_model(self, model: cst.BaseExpression, site: Site) -> bool:
        """A name bound to `torch.load(...)` (and friends) that is called: a model."""
        name = dotted_name(model)
        if name is None:
            return False
        for b in self.bindings_for(name, site):
            if b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and isinstance(b.value, cst.Call):
                inner = strip_methods(b.value, _SAME_KIND_METHODS)
                if isinstance(inner, cst.Call) and self.facts.qualname(inner.func) in MODEL_LOADERS:
                    return True
        return False

    def is_loss_call(self, call: Call) -> bool:
        """The one answer to "is this a loss": `F.cross_entropy(...)`, a call of
        an `nn.*Loss()` instance, or of a callee named like one (`criterion`,
        `loss_fn`, `self.loss_fct`). Memoised per call."""
        key = id(call.node)
        found = self._loss_calls.get(key)
        if found is None:
            found = self._loss_calls[key] = self._is_loss_call(call)
        return found

    def _is_loss_call(self, call: Call) -> bool:
        q = call.qualname or ""
        if q.startswith("torch.nn.functional.") and q.rsplit(".", 1)[-1] in LOSS_FUNCTIONS:
            return True
        func = call.node.func
        name = dotted_name(func)
        if name is None:
            return False
        if self.local_function(call) is not None:
            return False  # a same-file helper (`calc_loss(batch, model)`) is read, not guessed from its name
        if self.forward_returns_container(func, call.site):
            return False  # `model_with_loss(batch)` returning `(outputs, loss, stats)`: a model, not a loss
        if LOSS_NAME.search(name.rsplit(".", 1)[-1]):
            return True
        return self.expr_kind(func, call.site) == LOSS_FN

    def is_optimizer_step(self, call: Call) -> bool:
        """`optimizer.step()` on an optimizer (by kind, or by a name like `optim`, `opt_g`),
        or an AMP scaler's `scaler.step(optimizer)`, handed one."""
        if call.method != "step" or call.receiver is None:
            return False
        if self.names_optimizer(call.receiver, call.site):
            return True
        first = call.positional[0].value if len(call.positional) == 1 else None
        return first is not None and self.names_optimizer(first, call.site)

    def names_optimizer(self, expr: cst.BaseExpression, site: Site) -> bool:
        """An optimizer, by kind or by a name like `optim`, `opt_g`."""
        last = (dotted_name(expr) or "").rsplit(".", 1)[-1].lower()
        if last and ("optim" in last or _OPT_NAME.match(last)):
            return True
        return self.expr_kind(expr, site) == OPTIMIZER

    def is_train_call(self, call: Call) -> bool:
        """`.backward()`, `torch.autograd.grad`/`backward`, an optimizer step, or a
        library trainer's loop (`trainer.train()` / `trainer.fit(...)` of an
        imported `...Trainer` class: Hugging Face's, Lightning's)."""
        return (
            (call.method == "backward" and call.receiver is not None)
            or call.qualname in GRAD_USERS
            or self.is_optimizer_step(call)
            or self.library_trainer_run(call)
            or self._steps_through(call)
        )

    def _steps_through(self, call: Call) -> bool:
        """`loss_scaler(loss, optimizer, clip_grad=...)`: a call handed an optimizer
        and a loss (a value a loss call computed, perhaps scaled in place) runs the
        backward pass and the step for it (an AMP scaler object, a
        `backward_and_step(loss, opt)` of another file). A same-file function is
        read instead."""
        if self.local_function(call) is not None or not call.node.args:
            return False
        values = [a.value for a in call.node.args if not a.star]
        return any(self.names_optimizer(v, call.site) for v in values) and any(
            self._loss_value(v, call.site, 0) for v in values
        )

    def _loss_value(self, expr: cst.BaseExpression, site: Site, depth: int) -> bool:
        """Every binding of the name reaching `site` is a loss call's result
        (`loss = criterion(out, y)`), or scales one in place (`loss /= accum_iter`)."""
        if not isinstance(expr, cst.Name) or depth > 3:
            return False
        bindings = self.facts.reaching(expr.value, site)
        if not bindings:
            return False
        for b in bindings:
            if b.kind == BindingKind.AUGASSIGN and b.site is not site:
                if not self._loss_value(expr, b.site, depth + 1):
                    return False
                continue
            made = self.facts.call_for(b.value) if isinstance(b.value, cst.Call) else None
            if b.kind != BindingKind.ASSIGN or b.index is not None or made is None or not self.is_loss_call(made):
                return False
            if self._makes_loss_module(made):
                return False  # `loss_fn = nn.CrossEntropyLoss()`: the criterion, not a loss
        return True

    def _makes_loss_module(self, call: Call) -> bool:
        """`nn.CrossEntropyLoss()`, `FocalLoss(gamma=2)`: a class (a capitalised
        name, or one known as a loss module) constructed, not a loss computed."""
        name = dotted_name(call.node.func) or ""
        return name.rsplit(".", 1)[-1][:1].isupper() or self.expr_kind(call.node, call.site) == LOSS_FN

    def library_trainer_run(self, call: Call) -> bool:
        """`trainer.train()` / `trainer.fit(...)` of an imported `...Trainer` class."""
        if call.method not in ("train", "fit") or not isinstance(call.receiver, cst.Name):
            return False
        return call.receiver.value in self._library_trainers

    @cached_property
    def _library_trainers(self) -> Set[str]:
        """Names bound (somewhere in the file) to an instance of an imported
        `...Trainer` class, or of a class of the file deriving from one
        (`class DistillationTrainer(Trainer):` overriding `compute_loss`); the
        file's own `Trainer` may do anything."""

        def imported_trainer(qualname: Optional[str]) -> bool:
            return qualname is not None and "." in qualname and qualname.rsplit(".", 1)[1].endswith("Trainer")

        subclasses = {
            name
            for name, info in self.facts.classes.items()
            if any(imported_trainer(self.facts.qualname(base)) for base in info.bases)
        }
        out: Set[str] = set()
        for b in self.facts.bindings:
            built = self.facts.call_for(b.value) if isinstance(b.value, cst.Call) else None
            if built is None:
                continue
            func = built.node.func
            if imported_trainer(built.qualname) or (isinstance(func, cst.Name) and func.value in subclasses):
                out.add(b.name)
        return out

    def parameter_free(self, model: cst.BaseExpression, site: Site, depth: int = 0) -> bool:
        """The module is an instance of a class (of this file or the project) that
        certainly builds no parameters: buffers only (`register_buffer`),
        parameter-free layers, plain values. Its forward records no graph of its own."""
        if self.project is None or depth > 5:
            return False
        if isinstance(model, cst.Call):
            c = self.facts.call_for(model)
            if c is None:
                return False
            if c.method in _SAME_KIND_METHODS and c.receiver is not None:
                return self.parameter_free(c.receiver, site, depth + 1)
            func = c.node.func
            q = c.qualname
            if q is None and isinstance(func, cst.Name) and func.value in self.facts.classes:
                if any(b.site.scope.kind != ScopeKind.MODULE for b in self.facts.bindings_of(func.value)):
                    return False  # a class the index does not know by this file's summary
                q = self.project.local(func.value)
            return q is not None and self.project.has_parameters(q) is False
        name = dotted_name(model)
        if name is None:
            return False
        bindings = self.bindings_for(name, site)
        return bool(bindings) and all(
            b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN)
            and b.index is None
            and b.value is not None
            and self.parameter_free(b.value, b.site, depth + 1)
            for b in bindings
        )

    def is_pretrained(self, model: cst.BaseExpression, site: Site, depth: int = 0) -> bool:
        """The model carries trained weights: `from_pretrained`, a hub/checkpoint
        load, `pretrained=`/`weights=`, or `load_state_dict` on it."""
        if depth > 5:
            return False
        if isinstance(model, cst.Call):
            c = self.facts.call_for(model)
            if c is None:
                return False
            if c.method == "from_pretrained" or c.qualname in MODEL_LOADERS:
                return True
            for kw in ("pretrained", "weights"):
                # `resnet50(weights=...)`, `timm.create_model(..., pretrained=True)`, and any
                # model class given trained weights the same way (`InceptionResnetV1(pretrained="vggface2")`).
                arg = c.keyword(kw)
                if arg is not None and not (
                    isinstance(arg.value, (cst.Name, cst.Integer)) and arg.value.value in ("None", "False", "0")
                ):
                    return True
            if c.method in _SAME_KIND_METHODS and c.receiver is not None:
                return self.is_pretrained(c.receiver, site, depth + 1)
            return False
        name = dotted_name(model)
        if name is None:
            return False
        for c in self.facts.calls:
            if c.method in ("load_state_dict", "from_pretrained") and dotted_name(c.receiver) == name:
                return True
        values = [
            b
            for b in self.bindings_for(name, site)
            if b.kind in (BindingKind.ASSIGN, BindingKind.ANNASSIGN) and b.value is not None and b.index is None
        ]
        return any(b.value is not None and self.is_pretrained(b.value, b.site, depth + 1) for b in values)
