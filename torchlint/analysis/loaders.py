"""DataLoader facts for the loading rules: the `Loaders` of a file.

In layers, each a class: the file's DataLoader calls, their arguments and
workers, and its loading settings (loader_calls.py); what their dataset is,
in memory, tiny, iterable, one that places items on the device, one that
reads or decodes files per item, where a TensorDataset's tensors live, and
whether items are random in a seeded run (loader_datasets.py); and here what
their `collate_fn` returns, whether the loader is used at all, whether a
training loop iterates it, and how its batches are moved (`info`). The kinds
of answer are loader_kinds.py."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.facts import (
    Binding,
    BindingKind,
    Call,
    Function,
    Loop,
    NameUse,
    Scope,
    ScopeKind,
    Site,
    dotted_name,
    is_main_guard,
)
from torchlint.analysis.helpers import root_name
from torchlint.analysis.knowledge import Effect, doing, is_move_call
from torchlint.analysis.place_kinds import DEVICE
from torchlint.analysis.value_kinds import DATASET
from torchlint.analysis.values import bound_value
from torchlint.analysis.vocabulary import ITER_WRAPPERS, NON_PLACING, PLACING_NAME, VOLUME_PIPELINE
from torchlint.analysis.walk import mentions

if TYPE_CHECKING:
    pass
from torchlint.analysis.loader_datasets import LoaderDatasets
from torchlint.analysis.loader_kinds import (
    COLLATE_POSITION,
    CPU_COLLATE,
    DEVICE_COLLATE,
    LOCAL_COLLATE,
    NESTED_COLLATE,
    NO_COLLATE,
    UNKNOWN_COLLATE,
    BatchUse,
    CollateKind,
    LoaderInfo,
)


class Loaders(LoaderDatasets):
    def info(self, call: Call) -> LoaderInfo:
        key = id(call.node)
        if key not in self._info:
            ds_kind, local = self._dataset(call)
            loops = self.loops_over(call)
            self._info[key] = LoaderInfo(
                call,
                ds_kind,
                self._collate(call),
                self._used(call),
                local,
                self._batches(call),
                trains=any(self._loop_trains(site) for site in loops),
                non_blocking=any(self._loop_moves(site, non_blocking=True) for site in loops),
                copied_as_loaded=any(self._copied_as_loaded(site) for site in loops),
                whole_dataset_batch=self._whole_dataset_batch(call),
                host_items=self._host_items(call),
                collate_works=self._collate_works(call),
                peeked=self.only_peeked(call),
            )
        return self._info[key]

    # -- collate_fn --------------------------------------------------------------------------

    def _collate(self, call: Call) -> CollateKind:
        arg = self.argument(call, "collate_fn", COLLATE_POSITION)
        if arg is None or (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
            return NO_COLLATE
        value = arg.value
        if isinstance(value, cst.Lambda):
            return LOCAL_COLLATE
        if isinstance(value, cst.Call):
            c = self.facts.call_for(value)
            if c is not None and (c.qualname == "functools.partial" or dotted_name(value.func) == "partial"):
                if any(a.keyword is not None and "device" in a.keyword.value for a in value.args) or any(
                    self._is_device_name(a.value) for a in value.args
                ):
                    return DEVICE_COLLATE
            return UNKNOWN_COLLATE
        name = dotted_name(value)
        if name is None:
            return UNKNOWN_COLLATE
        fn = self._named_function(value, call.site.scope) if isinstance(value, cst.Name) else None
        if fn is None:
            return UNKNOWN_COLLATE
        if any(is_move_call(c) or c.keyword("device") is not None for c in self.helpers.calls_in(fn)):
            return DEVICE_COLLATE
        if fn.scope.parent is not None and fn.scope.parent.kind != ScopeKind.MODULE:
            return NESTED_COLLATE
        return CPU_COLLATE

    def _named_function(self, name: cst.Name, scope: Scope) -> Optional[Function]:
        """The same-file function a name bound once holds: a `def`, or what a call of
        a same-file factory returns when its every `return` names one nested `def`
        of it (`collate_fn = get_collate_fn(pad_index)`)."""
        bs = self.facts.visible_bindings(name.value, scope)
        if len(bs) != 1:
            return None
        b = bs[0]
        if b.kind == BindingKind.DEF:
            return self.facts.function_for_def(b.target)
        made = self.facts.call_for(b.value) if b.kind == BindingKind.ASSIGN and isinstance(b.value, cst.Call) else None
        factory = self.helpers.function(made) if made is not None and b.index is None else None
        if factory is None:
            return None
        found: Optional[Function] = None
        for ret, site in self.facts.returns_of(factory):
            if not isinstance(ret.value, cst.Name):
                return None
            inner = self.facts.visible_bindings(ret.value.value, site.scope)
            if len(inner) != 1 or inner[0].kind != BindingKind.DEF or inner[0].site.scope is not factory.scope:
                return None
            fn = self.facts.function_for_def(inner[0].target)
            if fn is None or (found is not None and fn is not found):
                return None
            found = fn
        return found

    def _collate_works(self, call: Call) -> bool:
        """The loader's `collate_fn` is a same-file function, or a method of the
        same-file dataset class it is taken from (`collate_fn=ds.collate_fn`),
        whose body (or a same-file function or method it calls, two deep) calls
        something besides torch's own ops and builtins (`tokenizer.pad(...)`,
        `processor(images)`, a transform): per-batch work in the process that
        collates."""
        fn = self._collate_function(call)
        todo = [(fn, 0)] if fn is not None else []
        seen = set()
        while todo:
            current, depth = todo.pop()
            if id(current.node) in seen:
                continue
            seen.add(id(current.node))
            for inner in self.helpers.calls_in(current):
                q = inner.qualname or ""
                if q.startswith("torch.") or q in _COLLATE_PLAIN:
                    continue
                if inner.qualname is None and isinstance(inner.node.func, cst.Name):
                    name = inner.node.func.value
                    if name in _BUILTIN_CALLS and not self.facts.bindings_of(name):
                        continue
                if inner.method in _TENSOR_METHODS or inner.method in _CONTAINER_METHODS:
                    continue
                callee = self.helpers.function(inner)
                if callee is not None and depth < 2:
                    todo.append((callee, depth + 1))  # a same-file helper: what it calls
                    continue
                return True
        return False

    def _collate_function(self, call: Call) -> Optional[Function]:
        """The same-file function the loader's `collate_fn` names, or the method
        of the same-file class whose instance it is read from (`ds.collate_fn`)."""
        arg = self.argument(call, "collate_fn", COLLATE_POSITION)
        value = arg.value if arg is not None else None
        if isinstance(value, cst.Name):
            return self._named_function(value, call.site.scope)
        if not (isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name)):
            return None
        owner = self._resolve(value.value, call.site)
        if not (isinstance(owner, cst.Call) and isinstance(owner.func, cst.Name)):
            return None
        cls, method = owner.func.value, value.attr.value
        for fn in self.facts.functions:
            parent = fn.scope.parent
            if fn.name == method and parent is not None and parent.kind == ScopeKind.CLASS and parent.name == cls:
                return fn
        return None

    def _is_device_name(self, expr: cst.BaseExpression) -> bool:
        name = dotted_name(expr)
        return bool(name and PLACING_NAME.search(name.rsplit(".", 1)[-1]))

    # -- use ---------------------------------------------------------------------------------

    def binding_of(self, call: Call) -> Optional[Binding]:
        return self.facts.binding_of_value(call.node)

    def reads(self, b: Binding) -> List[NameUse]:
        """The reads of `b`'s name that see `b`: in its own scope after it and
        before the name is bound again there; in nested scopes where the name
        is not bound anew (not a parameter or local of the same name, which
        holds what that function's callers pass). A statement that only shows
        the name (a notebook cell's last line `loader`, `train_dl, test_dl`)
        reads nothing that runs."""
        later = [x for x in self.facts.scoped_bindings(b.name, b.site.scope) if x.site.order > b.site.order]
        nxt = min(later, key=lambda x: x.site.order) if later else None
        out = []
        for use in self.facts.local_uses(b.name, b.site.scope):
            if use.site.stmt is b.site.stmt or _only_shown(use):
                continue
            if use.site.scope is b.site.scope:
                if use.site.order <= b.site.order:
                    continue
                if nxt is not None and use.site.order > nxt.site.order and use.site.stmt is not nxt.site.stmt:
                    continue  # (`a, b, loader = wrap(loader)` reads it before binding the name again)
            elif b not in self.facts.visible_bindings(b.name, use.site.scope):
                continue
            elif use.site.order <= b.site.order and use.site.scope.function is None:
                continue  # a comprehension or lambda at module level, before the binding
            out.append(use)
        return out

    def _used(self, call: Call) -> bool:
        """Something reads the loader: it is iterated, handed on, returned or
        stored. A loader bound to a name that nothing reads before the name is
        rebound is dead."""
        if self._never_built(call):
            return False
        stmt = call.site.stmt
        if not isinstance(stmt, (cst.Assign, cst.AnnAssign)):
            return True  # returned, passed on directly, in a container...
        b = self.binding_of(call)
        if b is None or "." in b.name:
            return True  # stored on an object or unpacked: used elsewhere
        return any(not _measured(self, use) for use in self.reads(b))

    def _never_built(self, call: Call) -> bool:
        """The loader is built in a top-level function of a script (a file with an
        `if __name__ == "__main__":` block) that the file never calls or names
        (its one call commented out) and no other project file imports, as the
        project index says: the code never runs. Without the index: can't tell."""
        fn_scope = call.site.scope.function
        if fn_scope is None or fn_scope.parent is None or fn_scope.parent.kind != ScopeKind.MODULE:
            return False
        fn = self.facts.function_of(fn_scope)
        project = self.values.project
        if fn is None or project is None or self.values.callers(fn) or self.facts.uses_of(fn.name):
            return False
        module = self.facts.module_scope.node if self.facts.module_scope is not None else None
        body = module.body if isinstance(module, cst.Module) else ()
        if not any(isinstance(stmt, cst.If) and is_main_guard(stmt) for stmt in body):
            return False  # a module of helpers: its functions are for others to call
        return not project.imported(project.local(fn.name))

    def may_feed_any_accelerator(self) -> bool:
        """Some loader of this file may feed an accelerator (`may_feed_accelerator`)."""
        return self.places.accelerator_in_play() or any(self.feeds_accelerator_elsewhere(c) for c in self.calls())

    def may_feed_accelerator(self, call: Call) -> bool:
        """The loader `call` builds may feed an accelerator: this file puts work on
        one, or the loader is a factory's, handed to files that do."""
        return self.places.accelerator_in_play() or self.feeds_accelerator_elsewhere(call)

    def feeds_accelerator_elsewhere(self, call: Call) -> bool:
        """The loader `call` builds is handed back by a top-level function of this
        file (`return loader`, `return train_loader, val_loader`) that another
        project file names and that file puts work on an accelerator: a loader
        factory whose batches feed a GPU in its callers' files. A file that
        imports this module for another of its names does not count. Without
        the project index: can't tell (False)."""
        project = self.values.project
        found = self._returned_by(call) if project is not None else None
        if found is None or project is None:
            return False
        return project.named_on_accelerator(project.local(found[0].name))

    def iterated_again_by_callers(self, call: Call) -> Optional[str]:
        """The loader `call` builds is handed back by a top-level function of this
        file that another project file calls, iterating the loader it gets in a
        loop that repeats (`train_loader, val_loader = get_dataloaders(...)`,
        then `for epoch ...: for x, y in train_loader:`): that function's name.
        Without the project index: None (can't tell)."""
        project = self.values.project
        found = self._returned_by(call) if project is not None else None
        if found is None or project is None:
            return None
        fn, element = found
        return fn.name if project.result_iterated_again(project.local(fn.name), element) else None

    def _returned_by(self, call: Call) -> Optional[Tuple[Function, int]]:
        """The top-level function whose `return` hands back the loader `call` builds:
        the call itself, or a plain name bound to it, alone (element -1) or in a
        returned tuple (its position there)."""
        fn_scope = call.site.scope.function
        if fn_scope is None or fn_scope.parent is None or fn_scope.parent.kind != ScopeKind.MODULE:
            return None
        fn = self.facts.function_of(fn_scope)
        if fn is None or call.site.scope is not fn_scope:
            return None
        b = self.binding_of(call)
        name = b.name if b is not None and b.index is None and "." not in b.name else None
        for ret, site in self.facts.returns_of(fn):
            value = ret.value
            if (
                value is None
                or isinstance(value, cst.Tuple)
                and any(isinstance(e, cst.StarredElement) for e in value.elements)
            ):
                continue  # `return *loaders, n`: positions unknown
            parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
            for i, part in enumerate(parts):
                element = i if isinstance(value, cst.Tuple) else -1
                if part is call.node:
                    return fn, element
                if (
                    name is not None
                    and isinstance(part, cst.Name)
                    and part.value == name
                    and b in self.places.reaching(name, site)
                ):
                    return fn, element
        return None

    def feeds_no_pass(self, call: Call) -> bool:
        """`only_peeked`, or also walked by `for` loops that do no work with its
        batches (no model run, nothing trained: `for batch in loader: pass`,
        a print of the last batch)."""
        return self.only_peeked(call, idle_loops=True)

    def only_peeked(self, call: Call, idle_loops: bool = False) -> bool:
        """What `call` returns (a loader, or loaders from a builder, bound to a
        name or unpacked into names) is only turned into an iterator to look at
        a batch or two (`next(iter(loader))`, `it = iter(loader)` then
        `next(it)`, a `for` over it that stops after a few batches), outside
        any loop of the code that does it: never otherwise looped over, handed
        on or returned. Names nobody reads before they are rebound
        count as unused; at least one must be peeked at."""
        if self._peek(call.node):
            return True  # `next(iter(DataLoader(...)))`
        stmt = call.site.stmt
        if not (isinstance(stmt, cst.Assign) and stmt.value is call.node and len(stmt.targets) == 1):
            return False
        target = stmt.targets[0].target
        if not isinstance(target, (cst.Name, cst.Tuple, cst.List)):
            return False
        names = _target_names(target)
        if not names or len(names) != len(target.elements if not isinstance(target, cst.Name) else [target]):
            return False  # nested or starred targets
        peeked = False
        for b in self.facts.bindings_at(stmt):
            if b.name not in names:
                continue
            for use in self.reads(b):
                if self._peek(use.node) or self._brief_loop_over(use) or (idle_loops and self._idle_loop_over(use)):
                    peeked = True
                elif not _measured(self, use):
                    return False
        return peeked

    def _brief_loop_over(self, use: NameUse) -> bool:
        """`use` is what a `for` iterates (also through `enumerate`/`tqdm`), and
        that loop stops after its first batch or first few (`loops.runs_once`):
        a look at them, as `next(iter(loader))` is."""
        node: cst.CSTNode = use.node
        parent = self.facts.parent_of(node)
        while isinstance(parent, cst.Arg):
            outer = self.facts.call_of_arg(parent)
            if outer is None or (dotted_name(outer.node.func) or "") not in ITER_WRAPPERS:
                return False
            node, parent = outer.node, self.facts.parent_of(outer.node)
        if not (isinstance(parent, cst.For) and parent.iter is node):
            return False
        loop = self.loops.loop_for(parent)
        return loop is not None and self.loops.runs_once(loop)

    def _idle_loop_over(self, use: NameUse) -> bool:
        """`use` is what a `for` iterates, and that loop neither trains nor runs
        a model over the data (no loop role) and calls nothing but builtins
        (`print`, `len`): its batches go nowhere."""
        parent = use.site.parent
        if not (isinstance(parent, cst.For) and parent.iter is use.node):
            return False
        loop = self.loops.loop_for(parent)
        if loop is None or self.loops.role(loop) is not None:
            return False
        for inner in self.loops.calls_in(loop):
            func = inner.node.func
            if not (
                isinstance(func, cst.Name) and func.value in _IDLE_CALLS and not self.facts.bindings_of(func.value)
            ):
                return False
        return True

    def _peek(self, node: cst.BaseExpression) -> bool:
        """`node` (a loader) is handed to `iter(...)` only to draw a batch or two
        outside a loop: `next(iter(node))`, or `it = iter(node)` whose every
        read is a `next(it)` outside a loop."""
        parent = self.facts.parent_of(node)
        outer = self.facts.call_of_arg(parent) if isinstance(parent, cst.Arg) else None
        if outer is None or dotted_name(outer.node.func) != "iter" or self.facts.bindings_of("iter"):
            return False
        if self._draws_once(outer.node):
            return True
        b = self.facts.binding_of_value(outer.node)
        if b is None or "." in b.name or b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN):
            return False
        uses = self.reads(b)
        return bool(uses) and all(self._draws_once(u.node) for u in uses)

    def _draws_once(self, node: cst.BaseExpression) -> bool:
        """`next(node)` (or `node.next()`), not inside a loop of its own code."""
        parent = self.facts.parent_of(node)
        if isinstance(parent, cst.Arg):
            outer = self.facts.call_of_arg(parent)
            if outer is None or dotted_name(outer.node.func) != "next" or self.facts.bindings_of("next"):
                return False
            site = outer.site
        elif isinstance(parent, cst.Attribute) and parent.attr.value in ("next", "__next__"):
            call = self.facts.parent_of(parent)
            c = self.facts.call_for(call) if isinstance(call, cst.Call) else None
            if c is None:
                return False
            site = c.site
        else:
            return False
        return site.loop is None or site.loop.scope is not site.scope

    def _batches(self, call: Call) -> BatchUse:
        """How the loader's batches are used in this file (see LoaderInfo.batches)."""
        b = self.binding_of(call)
        if b is None or "." in b.name:
            return BatchUse.ELSEWHERE
        sampled = handed = False
        for use in self.reads(b):
            parent = use.site.parent
            if isinstance(parent, cst.Arg):
                outer = self.facts.call_of_arg(parent)
                name = dotted_name(outer.node.func) if outer is not None else None
                if (
                    outer is not None
                    and name == "iter"
                    and isinstance(self.facts.parent_of(outer.node), (cst.Arg, cst.Attribute))
                ):
                    sampled = True  # `next(iter(loader))`, `iter(loader).next()`
                    continue
                if name in ("enumerate", "tqdm", "len", "zip", "iter") or (name or "").startswith("tqdm"):
                    continue
                handed = True
            elif not isinstance(parent, (cst.For, cst.Attribute)):
                handed = True  # returned, stored, aliased
        loops = self.iterated_in(call)
        if handed:
            return BatchUse.ELSEWHERE
        if loops:
            return BatchUse.MOVED if any(self._loop_moves(s) for s in loops) else BatchUse.KEPT
        return BatchUse.SAMPLED if sampled else BatchUse.ELSEWHERE

    def _loop_moves(self, site: Site, non_blocking: bool = False) -> bool:
        """The `for` at `site` moves a batch to a device, hands one to a helper
        that does (or to code we cannot see), or feeds one to a model on the
        device (the batch must go there: TL103's case). With `non_blocking`:
        some move in the loop is `non_blocking=True` (an asynchronous copy)."""
        node = site.stmt
        loop = self.loops.loop_for(node) if node is not None else None
        if loop is None:
            return False
        names = {n for n in _target_names(node.target)} if isinstance(node, cst.For) else set()
        for call in self.loops.calls_in(loop):
            if is_move_call(call) or call.keyword("device") is not None or self.places.casts_to_cuda_type(call):
                if not non_blocking:
                    return True
                flag = call.keyword("non_blocking")
                if flag is not None and isinstance(flag.value, cst.Name) and flag.value.value == "True":
                    return True
                continue
            if non_blocking:
                continue
            if any(
                dotted_name(a.value) in names
                or (isinstance(a.value, cst.Subscript) and dotted_name(a.value.value) in names)
                for a in call.node.args
            ):
                forward = self.values.model_call(call)
                if forward is not None and self.places.model_place(forward.model, call.site) == DEVICE:
                    return True
                fn = self.helpers.function(call)
                builtin = isinstance(call.node.func, cst.Name) and call.node.func.value in NON_PLACING
                if (
                    fn is None
                    and call.qualname is None
                    and not builtin
                    and self.values.model_call(call) is None
                    and not self.values.is_loss_call(call)
                ):
                    return True  # handed to code we cannot see: it may move it
                if fn is not None and self.helpers.summary(fn).moves:
                    return True
                if fn is None and self._project_moves(call, names):
                    return True
        return False

    def _project_moves(self, call: Call, names: Set[str]) -> bool:
        """`call` hands a batch name to a function of another project file that
        the project index says moves that argument to a device."""
        project = self.values.project
        if project is None or call.qualname is None:
            return False
        position = 0
        for arg in call.node.args:
            where = arg.keyword.value if arg.keyword is not None else position
            if arg.keyword is None:
                if arg.star:
                    return False
                position += 1
            value = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
            if dotted_name(value) in names and project.moves_argument(call.qualname, where):
                return True
        return False

    def _copied_as_loaded(self, site: Site) -> bool:
        """The loop at `site` moves the batch tensors as the loader yields them at
        least as often as copies of them made on the host, or feeds them to a
        model on the device as they are (TL103's case: once moved, pinning pays)."""
        node = site.stmt
        loop = self.loops.loop_for(node) if node is not None else None
        if loop is None or not isinstance(node, cst.For):
            return False
        names = set(_target_names(node.target))
        items = self._comprehension_items()
        names |= {
            b for name in list(names) for b in items.get(name, ())
        }  # `{k: v.to(device) for k, v in batch.items()}`
        unpacked, remade = self._unpacked_in_body(loop, names)
        names |= unpacked
        direct = derived = 0
        for call in self.loops.calls_in(loop):
            if (is_move_call(call) or self.places.casts_to_cuda_type(call)) and call.receiver is not None:
                if _as_loaded(call.receiver, names):
                    direct += 1
                elif root_name(call.receiver) in names | remade:
                    derived += 1
                continue
            if not any(_as_loaded(a.value, names) for a in call.node.args):
                continue
            forward = self.values.model_call(call)
            if forward is not None and self.places.model_place(forward.model, call.site) == DEVICE:
                direct += 1
                continue
            fn = self.helpers.function(call)
            if fn is not None and self.helpers.summary(fn).moves:
                direct += 1  # handed as it is to a same-file helper that moves it
            elif fn is None and self._project_moves(call, names):
                direct += 1  # ... or to a function of another project file that moves it
        return direct > derived

    def _unpacked_in_body(self, loop: Loop, names: Set[str]) -> Tuple[Set[str], Set[str]]:
        """Names the loop's body binds, in order, to the batch as loaded (`img, label =
        data`, `x = batch[0]`, `img = img.view(n, -1)`: the same memory), and names
        it binds to tensors made on the host from the batch (`img = augment(img)`)."""
        found: Set[str] = set()
        remade: Set[str] = set()
        for b in self.facts.bindings_in(loop.scope):
            if not loop.contains(b.site.order) or b.kind not in (BindingKind.ASSIGN, BindingKind.ANNASSIGN):
                continue
            value = bound_value(b) or b.value  # `x, y = batch[0].to(dev), batch[1]`: its element
            if "." in b.name or value is None or self._is_move(value):
                continue
            if _as_loaded(value, names | found):
                found.add(b.name)
                remade.discard(b.name)
            else:
                made_from_batch = mentions(value, names | found | remade)
                found.discard(b.name)
                if made_from_batch:
                    remade.add(b.name)  # `x = augment(x)`: made on the host from the batch
                else:
                    remade.discard(b.name)
        return found, remade

    def _is_move(self, expr: Optional[cst.BaseExpression]) -> bool:
        """`x.cuda()`, `x.to(device)`, `x.type(torch.cuda.FloatTensor)`."""
        call = self.facts.call_for(expr) if isinstance(expr, cst.Call) else None
        return call is not None and (is_move_call(call) or self.places.casts_to_cuda_type(call))

    def _comprehension_items(self) -> Dict[str, List[str]]:
        """Names a comprehension binds from `<name>.items()` / `.values()`, by that name."""
        if self._items is None:
            self._items = {}
            for b in self.facts.bindings:
                value = b.value
                if (
                    b.kind == BindingKind.COMPREHENSION
                    and isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value in ("items", "values")
                ):
                    receiver = dotted_name(value.func.value)
                    if receiver:
                        self._items.setdefault(receiver, []).append(b.name)
        return self._items

    def _loop_trains(self, site: Site) -> bool:
        loop = self.loops.loop_for(site.stmt) if site.stmt is not None else None
        return loop is not None and self.loops.trains(loop)

    def volume_pipeline(self) -> bool:
        """The file reads 3D volumes or feeds them through MONAI's patch pipeline
        (`list_data_collate`, sliding-window inference, MONAI's DataLoader): its
        batches count volumes, each cut into patches or windows that are batched
        further on, and one volume per batch is what fits in memory."""
        if self._volumes is None:
            self._volumes = any(c.qualname in VOLUME_PIPELINE for c in self.facts.calls) or any(
                v in VOLUME_PIPELINE for v in self.facts.aliases.values()
            )
        return self._volumes

    def one_item(self, call: Call) -> bool:
        """The loader's dataset is one item of a dataset (`DataLoader(ds[i])`,
        `DataLoader(datasets["valid"][idx])`): one sample, looked at."""
        ds = self.dataset_expr(call)
        if not isinstance(ds, cst.Subscript) or len(ds.slice) != 1 or not isinstance(ds.slice[0].slice, cst.Index):
            return False
        index = ds.slice[0].slice.value
        if (
            not isinstance(index, (cst.Integer, cst.Name))
            or isinstance(index, cst.Name)
            and not self._int_name(index, call.site)
        ):
            return False
        return (
            self.values.expr_kind(ds.value, call.site) == DATASET
            or isinstance(ds.value, cst.Subscript)
            or bool(re.search(r"data_?set|(^|_)ds$", (dotted_name(ds.value) or "").rsplit(".", 1)[-1], re.I))
        )

    def _int_name(self, name: cst.Name, site: Site) -> bool:
        """`idx` bound (only) to an integer: a literal, `randint(...)`, `len(...)` arithmetic."""
        bindings = self.facts.reaching(name.value, site)
        if not bindings:
            return False
        for b in bindings:
            value = b.value if b.kind == BindingKind.ASSIGN and b.index is None else None
            if isinstance(value, cst.Integer):
                continue
            call = self.facts.call_for(value) if isinstance(value, cst.Call) else None
            last = (
                (call.qualname or dotted_name(value.func) or "")
                if call is not None and isinstance(value, cst.Call)
                else ""
            )
            if last.rsplit(".", 1)[-1] not in ("randint", "choice", "randrange", "int"):
                return False
        return True

    def _whole_dataset_batch(self, call: Call) -> bool:
        """`batch_size=len(dataset)`: a single batch per pass."""
        arg = self.argument(call, "batch_size", 1)
        value = arg.value if arg is not None else None
        return isinstance(value, cst.Call) and dotted_name(value.func) == "len"

    def loops_over(self, call: Call) -> List[Site]:
        """The `for` loops that iterate the loader `call` builds: where the name it
        is bound to is visible as that binding, and in same-file functions it is
        passed to, over the parameter that receives it (not a same-named
        parameter that receives something else), and in the methods of a
        same-file class whose instance keeps it (`Trainer(train_loader)`)."""
        return [site for site, _ in self._passes(call)]

    def _passes(self, call: Call) -> List[Tuple[Site, Optional[Call]]]:
        """`loops_over`, each with the call of the same-file function that holds
        the loop and receives the loader (None: the loop reads the loader's own
        name, or the attribute of a same-file class's instance that keeps it)."""
        b = self.binding_of(call)
        if b is None:
            return []
        if "." in b.name:
            return [(site, None) for site in self.iterated_in(call)]
        out: List[Tuple[Site, Optional[Call]]] = []
        for loop in self._loops_over().get(b.name, []):
            if any(s is b.site.scope for s in loop.scope.chain()) and b in self.facts.visible_bindings(
                b.name, loop.scope
            ):
                site = self.facts.site_of_statement(loop.node)
                if site is not None:
                    out.append((site, None))
        for use in self.reads(b):
            parent = use.site.parent
            if not isinstance(parent, cst.Arg) or parent.value is not use.node:
                continue
            outer = self.facts.call_of_arg(parent)
            fn = self.helpers.function(outer) if outer is not None else None
            if outer is not None and fn is None:
                for site in self._kept_by_instance(outer, use.node):
                    if all(site is not s for s, _ in out):
                        out.append((site, None))  # the loop reads the attribute holding the loader
            if outer is None or fn is None:
                continue
            for param in fn.params:
                if self.values.argument_for(outer, fn, param) is use.node:
                    for loop in self._loops_over().get(param, []):
                        if loop.scope is fn.scope:
                            site = self.facts.site_of_statement(loop.node)
                            if site is not None and all(site is not s for s, _ in out):
                                out.append((site, outer))
        return out

    def _kept_by_instance(self, built: Call, arg: cst.BaseExpression) -> List[Site]:
        """`Trainer(train_loader, ...)` of a same-file class whose `__init__` keeps the
        argument as an attribute (`self.train_loader = train_loader`, the attribute's
        only binding in the class): the `for` loops over that attribute in the
        class's methods."""
        cls = self.values.constructed_class(built.node, built.site.scope)
        init = self.facts.function_named_in_node("__init__", cls) if cls is not None else None
        if cls is None or init is None:
            return []
        out = []
        for param in init.params:
            if self.values.argument_for(built, init, param) is not arg:
                continue
            for b in self.facts.bindings_under(init.scope):
                if not (b.name.startswith("self.") and isinstance(b.value, cst.Name) and b.value.value == param):
                    continue
                if len(self.facts.attribute_bindings(b.name, [cls])) != 1:
                    continue  # bound again elsewhere in the class: which loader a loop sees is unknown
                for loop in self._loops_over().get(b.name, []):
                    site = self.facts.site_of_statement(loop.node)
                    if site is not None and any(s.node is cls for s in loop.scope.chain()):
                        out.append(site)
        return out

    def restarted_each_pass(self, call: Call) -> Optional[Site]:
        """A `for` over the loader `call` builds that runs again and again: in a
        loop (in the same function, or around a call of the function holding the
        `for`: `for epoch in ...: train_one_epoch(loader)`, `self.train_epoch()`)
        that does not build the loader anew, not only now and then (`if epoch %
        10 == 0: evaluate(...)`). Each such pass starts the loader's worker
        processes again. Returns that `for`'s site, or the site of the call of a
        function of another project file that holds the `for`."""
        for site, via in self._passes(call):
            loop = self.loops.loop_for(site.stmt) if site.stmt is not None else None
            if loop is None or self.loops.runs_once(loop):
                continue
            if via is None and self._repeats(site, call.site, 0):
                return site
            if via is not None and (self._repeats(site, call.site, 3) or self._repeats(via.site, call.site, 0)):
                return site
        for outer in self._handed_to_other_files(call):
            if self._repeats(outer.site, call.site, 0):
                return outer.site
        return None

    def _handed_to_other_files(self, call: Call) -> List[Call]:
        """The calls that hand the loader `call` binds to a function of another
        project file that iterates it with a `for` on every call
        (`validate(test_loader, model)` of `utils/validation.py`)."""
        b = self.binding_of(call)
        project = self.values.project
        if b is None or "." in b.name or project is None:
            return []
        out = []
        for use in self.reads(b):
            parent = use.site.parent
            if not isinstance(parent, cst.Arg) or parent.value is not use.node:
                continue
            outer = self.facts.call_of_arg(parent)
            if outer is None or outer.qualname is None or self.helpers.function(outer) is not None:
                continue
            if not self.facts.calls_import(outer):
                continue  # a parameter or local of that name, not the import
            position = outer.position_of(parent)
            if position is not None and project.iterates_argument(outer.qualname, position):
                out.append(outer)
        return out

    def _repeats(self, site: Site, built: Site, depth: int) -> bool:
        """`site` runs in every iteration of a loop that does not hold `built`,
        directly or through the same-file callers of its function."""
        loop = site.loop
        while loop is not None and loop.scope is site.scope:
            if loop.scope is built.scope and loop.contains(built.order):
                return False  # the loader is built anew each pass
            if not self.loops.runs_once(loop) and not self.loops.occasional_guard(site, loop):
                return True
            loop = loop.parent
        fn_scope = site.scope.function
        if depth >= 3 or fn_scope is None or site.scope is not fn_scope or self.loops.occasional_guard(site):
            return False
        fn = self.facts.function_of(fn_scope)
        return fn is not None and any(self._repeats(c.site, built, depth + 1) for c in self.values.callers(fn))

    def _loops_over(self) -> Dict[str, List[Loop]]:
        """`for` loops by the dotted name they iterate (through enumerate/tqdm)."""
        if self._loops_by_name is None:
            index: Dict[str, List[Loop]] = {}
            for loop in self.facts.loops:
                node = loop.node
                if isinstance(node, cst.For):
                    expr = node.iter
                    while isinstance(expr, cst.Call) and expr.args:
                        expr = expr.args[0].value
                    name = dotted_name(expr)
                    if name:
                        index.setdefault(name, []).append(loop)
            self._loops_by_name = index
        return self._loops_by_name

    def iterated_in(self, call: Call) -> List[Site]:
        """Where the loader bound by `call` is iterated by a `for` (directly or
        through enumerate/tqdm)."""
        b = self.binding_of(call)
        if b is None:
            return []
        out = []
        for loop in self._loops_over().get(b.name, []):
            site = self.facts.site_of_statement(loop.node)
            if site is not None:
                out.append(site)
        return out


# Calls a collate function makes that only stack or arrange what it is handed.
_COLLATE_PLAIN = doing(Effect.COLLATES)


_BUILTIN_CALLS = frozenset(
    "len zip list tuple dict set sorted max min sum range enumerate isinstance int float bool str map filter".split()
)


# Builtins a loop may call on its batches and still do no work with them.
_IDLE_CALLS = _BUILTIN_CALLS | {"print"}


_TENSOR_METHODS = frozenset(
    "stack cat float long int half bool view reshape unsqueeze squeeze permute transpose contiguous clone".split()
)


_CONTAINER_METHODS = frozenset("append extend items keys values get pop update".split())


def _target_names(target: cst.BaseExpression) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[str] = []
        for el in target.elements:
            out.extend(_target_names(el.value))
        return out
    return []


def _only_shown(use: NameUse) -> bool:
    """The read is a statement that only shows the name (`loader`, `train_dl,
    test_dl` as a notebook cell's last line): nothing runs on it."""
    stmt = use.site.stmt
    if not isinstance(stmt, cst.Expr):
        return False
    value = stmt.value
    if value is use.node:
        return True
    return (
        isinstance(value, cst.Tuple)
        and all(isinstance(e.value, cst.Name) for e in value.elements)
        and any(e.value is use.node for e in value.elements)
    )


def _measured(loaders: "Loaders", use: NameUse) -> bool:
    """`len(loader)`: the loader's length read, no batch drawn."""
    parent = use.site.parent
    outer = loaders.facts.call_of_arg(parent) if isinstance(parent, cst.Arg) else None
    return outer is not None and dotted_name(outer.node.func) == "len" and not loaders.facts.bindings_of("len")


def _as_loaded(expr: cst.BaseExpression, names: Set[str]) -> bool:
    """`x`, `batch["x"]`/`batch[0]` of a batch variable, or a view of one
    (`x.view(-1, 784)`, `x.unsqueeze(1)`): the memory the loader yielded, which
    a pinned batch copies from. Not a copy made on the host first (a slice
    along a later dimension, a dtype conversion)."""
    while isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _VIEWS:
            expr = expr.func.value
        elif (dotted_name(expr.func) or "").endswith("Variable") and expr.args:
            expr = expr.args[0].value  # `Variable(x)`: the tensor itself since PyTorch 0.4
        else:
            break
    if isinstance(expr, cst.Name):
        return expr.value in names
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and expr.value.value in names:
        return len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)
    return False


# Methods that return a view of the same memory (of a contiguous batch).
_VIEWS = frozenset({"view", "view_as", "unsqueeze", "squeeze", "flatten", "contiguous", "detach"})
