"""The project pass's plain data: kinds (enums) and the per-module summary
(frozen dataclasses), picklable so the cache and a process pool can hold them.

Names inside a summary are dotted names *as written* in that module
(`nn.Module`, `Backbone`, `torch.no_grad`); the index resolves them through
the module's own imports and definitions (torchlint/analysis/project/index.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Tuple, Union


class ClassKind(enum.Enum):
    """What a class is, from its bases (transitively, across the project)."""

    MODULE = "module"  # a torch.nn.Module subclass
    LIGHTNING_MODULE = "lightning-module"  # a LightningModule subclass (Lightning places it)
    DATASET = "dataset"  # a map-style torch Dataset subclass
    ITERABLE_DATASET = "iterable-dataset"
    LOADER = "loader"  # a torch DataLoader subclass
    LIGHTNING_DATAMODULE = "lightning-datamodule"


class ValueKind(enum.Enum):
    """What a call evidently returns: an instance of a class of that kind."""

    MODULE = "module"
    LIGHTNING_MODULE = "lightning-module"
    DATASET = "dataset"
    ITERABLE_DATASET = "iterable-dataset"
    LOADER = "loader"
    LIGHTNING_DATAMODULE = "lightning-datamodule"

    @classmethod
    def of_class(cls, kind: Optional[ClassKind]) -> Optional["ValueKind"]:
        return None if kind is None else cls(kind.value)


class Question(enum.Enum):
    """The index's questions (a file's recorded dependencies name them)."""

    CLASS_KIND = "class_kind"
    BUILDS_LOADER = "builds_loader"
    GUARDS_GRAD = "guards_grad"
    RETURNS = "returns"
    MOVES_ARGUMENT = "moves_argument"
    TRAINS = "trains"
    PLACES_ITSELF = "places_itself"
    ON_ACCELERATOR = "on_accelerator"
    NAMED_ON_ACCELERATOR = "named_on_accelerator"
    NAMED_ELSEWHERE = "named_elsewhere"
    FORWARD_CONTAINER = "forward_container"
    HAS_PARAMETERS = "has_parameters"
    IMPORTED = "imported"
    USED_ELSEWHERE = "used_elsewhere"
    CALLED_GUARDED = "called_guarded"
    SYNCS_ARGUMENT = "syncs_argument"
    METHOD_SYNCS_ARGUMENT = "method_syncs_argument"
    METHOD_TIMES = "method_times"
    BUILDS_DATA_PARALLEL = "builds_data_parallel"
    ITERATES_ARGUMENT = "iterates_argument"
    LOADER_NAMES = "loader_names"
    UNMOVED_CALLERS = "unmoved_callers"
    ALLOCATES = "allocates"
    DATASET_ITEMS = "dataset_items"
    RESULT_ITERATED_AGAIN = "result_iterated_again"


class ItemWork(enum.Enum):
    """What a Dataset class's `__getitem__` does for each item."""

    READS = "reads"  # reads or decodes a file (`Image.open`, `np.load`, `open`)
    INDEXES = "indexes"  # only indexes data held in memory (tensor ops, conversions)


@dataclass(frozen=True)
class GuardNeed:
    """One name that must guard grad for an expression to: `ref` used called
    (`ref(...)`, as in `torch.no_grad()`) or bare (`ref`, as in `@no_grad_dec`)."""

    ref: str
    called: bool


@dataclass(frozen=True)
class Pass:
    """A function hands (part of) its parameter `param` to `callee` as the
    argument at `position` (an int) or keyword (a str)."""

    callee: str
    position: Union[int, str]
    param: str
    always: bool = True  # the call runs on every call of the function (not under an `if`, nor in a handler)


@dataclass(frozen=True)
class ClassSummary:
    name: str
    bases: Tuple[str, ...]  # dotted names as written; `Dataset[int]` is `Dataset`; others skipped
    defines_init: bool  # its body defines `__init__` (its arguments may differ from its base's)
    places: bool = False  # code in its body moves something or passes `device=` (it may place itself)
    # its body defines `forward`: True when every `return` of it hands back a list, tuple or dict
    # (a literal, `list(...)`, or a name bound in it only to one), False otherwise; None: no `forward`
    forward_container: Optional[bool] = None
    # Its own code builds parameters (`nn.Parameter`, a torch.nn layer that has some):
    # True; builds none but for `submodules` (and its bases): False; can't tell: None.
    parameters: Optional[bool] = None
    # Callees as written (not torch.nn) whose instances it keeps as called attributes.
    submodules: Tuple[str, ...] = ()
    # Its own code builds a torch.nn layer that has parameters, or an `nn.Parameter`
    # (stored or not: with `places` False, they are on the CPU).
    builds_layers: bool = False
    # Its `__init__`'s positional parameters after `self`, in order (None: no `__init__`
    # of its own, or one that takes `*args`).
    init_params: Optional[Tuple[str, ...]] = None
    # What its own `__getitem__` does per item (None: no `__getitem__`, or other work we can't name).
    item_work: Optional[ItemWork] = None
    # Its own methods (not `__init__`), as the index follows host reads through them.
    methods: Tuple["MethodSummary", ...] = ()


@dataclass(frozen=True)
class FunctionSummary:
    name: str
    params: Tuple[str, ...]  # positional parameters, in order
    keywords: Tuple[str, ...]  # every named parameter (positional ones included)
    # `f(...)` used as a decorator or `with` item guards grad when every need
    # holds (() : unconditionally); None: not a guard that way.
    guard_called: Optional[Tuple[GuardNeed, ...]] = None
    # `f` used bare as a decorator guards grad when every need holds.
    guard_bare: Optional[Tuple[GuardNeed, ...]] = None
    # What each `return` hands back: the dotted callee of a call (`Net`,
    # `DataLoader`, `build_model`), through `.to()`/`.eval()` chains and a
    # name bound once to such a call. None: some return is not that evident
    # (or the function returns nothing, or yields).
    returns: Optional[Tuple[str, ...]] = None
    moves: Tuple[str, ...] = ()  # parameters (or parts of them) moved with .to(...)/.cuda()
    passes: Tuple[Pass, ...] = ()  # parameters handed on to other calls
    trains: bool = False  # calls .backward(), torch.autograd.grad/backward or an optimizer's step()
    callees: Tuple[str, ...] = ()  # dotted callees of its calls (for `trains` through helpers)
    # parameters read on the host on every call: `.item()`/`.tolist()` of a value computed
    # from one (`torch.eq(y_true, y_pred).sum().item()`, `dice = 2 * torch.sum(a * b)`, then
    # `dice.item()`), not under an `if` nor in a handler: (parameter, the method)
    syncs: Tuple[Tuple[str, str], ...] = ()
    # parameters a `for` of its own body iterates on every call (through `enumerate`/`tqdm`),
    # not under an `if` on a setting nor in a handler: a loader handed in makes one pass
    iterates: Tuple[str, ...] = ()
    # Every `return` hands back a tensor freshly allocated on the CPU (knowledge.allocates_on_cpu:
    # a factory given no `device=`/`generator=`, outside `with torch.device(...)`, through
    # shape/dtype methods and wrappers, or a name assigned once to one): each return's
    # factory, qualified (`torch.rand`). None: some return is not that evident.
    allocates: Optional[Tuple[str, ...]] = None
    # it reads a clock (`time.time()`, `time.perf_counter()`): a logger that times each step
    times: bool = False


class MethodBinding(enum.Enum):
    """What a method's first parameter is bound to."""

    INSTANCE = "instance"  # `self`: called on an instance, or on the class with the instance first
    CLASS = "class"  # `@classmethod`: `cls`
    STATIC = "static"  # `@staticmethod`: nothing bound


@dataclass(frozen=True)
class MethodSummary:
    """One method of a class: its summary as a function whose parameters leave
    out the bound `self` or `cls` (so position 0 is the first argument of
    `obj.method(...)`); calls it makes on `self` are passes to `self.<name>`."""

    binding: MethodBinding
    function: "FunctionSummary"


@dataclass(frozen=True)
class Handed:
    """An argument a call hands over: the name of a module the calling code
    builds itself, binds once, and never moves, wraps or hands to another call.
    `key` is the position (an int) or keyword (a str); `built` the dotted
    callee of its construction, as written (`Seq2Seq`, `nn.Linear`)."""

    key: Union[int, str]
    built: str


@dataclass(frozen=True)
class NameUse:
    """A use of a dotted name, as written, of which a part (through the
    module's imports) is capitalised: a class, or an attribute of one. `args`:
    a direct call whose result is only used through its methods (or not at
    all), with the arguments it hands over that are modules built unmoved;
    None: any other use (a base, a value passed on or stored, a call with
    `*`/`**`, or a result that goes elsewhere)."""

    name: str
    args: Optional[Tuple[Handed, ...]] = None


@dataclass(frozen=True)
class AssignSummary:
    """A module-level `name = value` whose value is a dotted name (an alias:
    `no_grad = torch.no_grad`) or a call of one (`ctx = torch.no_grad()`), or a
    conditional choice between such values."""

    name: str
    options: Tuple[Tuple[str, bool], ...]  # (dotted, called) per option


@dataclass(frozen=True)
class ModuleSummary:
    """One file, summarised from its text alone (no other file is read)."""

    # local name -> what it imports: "torch.nn", "models.base.Backbone", or a
    # relative name with its leading dots (".base.Backbone", "..utils").
    imports: Tuple[Tuple[str, str], ...] = ()
    star_imports: Tuple[str, ...] = ()  # `from .base import *`: ".base"
    classes: Tuple[ClassSummary, ...] = ()
    functions: Tuple[FunctionSummary, ...] = ()
    assigns: Tuple[AssignSummary, ...] = ()
    uses: Tuple[NameUse, ...] = ()  # capitalised names used anywhere (handoffs.py)
    # every import, module level or nested, with the attributes read off the name it
    # binds ("*": used whole): (target as written, attributes) (import_uses.py)
    import_uses: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    # every called name (`f(...)`, `x.f(...)`) with its calls inside and outside no-grad
    # regions, and whether this file defines a function or method of that name (guarded_calls.py)
    guarded_calls: Tuple[Tuple[str, int, int, bool], ...] = ()
    # the calls (as written) whose result, or an element of it (-1: the whole), a scope
    # iterates in a loop that repeats: `for epoch ...: for x in train_loader` (result_passes.py)
    result_passes: Tuple[Tuple[str, int], ...] = ()
    parsed: bool = True  # False: the text did not parse (the module knows nothing)
    # its code moves something to an accelerator: `.cuda()`, `.to(<a device>)` (a "cuda"/"mps"
    # string, `torch.device(...)` of one, a name that says device), or `device="cuda"`
    accelerates: bool = False


@dataclass(frozen=True)
class Dependency:
    """One question a file's analysis asked the index, and the answer it got.
    A cached result stays valid while every answer is still the same."""

    question: Question
    qualname: str
    arg: Union[None, int, str, bool]
    answer: Union[None, bool, str, ClassKind, ValueKind, Tuple[str, ...]]

    def sort_key(self) -> Tuple[str, str, str]:
        return (self.question.value, self.qualname, repr(self.arg))
