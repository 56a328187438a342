"""What torchlint knows of torch and the libraries used with it, as data: per
symbol, what a callable returns and what it does (allocates, samples, syncs,
moves, guards gradients...); per tensor/module method, the same. The category
sets the analysis asks (`vocabulary.ALLOCATING_FACTORIES`, `MOVE_METHODS`...)
are views computed from these tables. tests/test_knowledge.py checks every
`torch.*` name against the installed torch; this module never imports torch."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

if TYPE_CHECKING:
    from torchlint.analysis.facts import Call


class Returns(enum.Enum):
    """What a call gives."""

    TENSOR = "tensor"
    MODULE = "module"  # an nn.Module (a class: its instances)
    DATASET = "dataset"  # a map-style dataset
    ITERABLE_DATASET = "iterable dataset"
    LOADER = "loader"
    HOST_NUMBER = "host number"  # a Python scalar
    HOST_LIST = "host list"  # nested Python lists
    HOST_ARRAY = "host array"  # a numpy array
    TENSORS = "tensors"  # a tuple of tensors: `(values, indices)`, `torch.split(...)`
    SAME = "same"  # (methods) the receiver's kind
    CONTEXT = "context"  # a context manager or mode switch
    OTHER = "other"


class Effect(enum.Enum):
    """What a call does, beyond returning."""

    ALLOCATES = "allocates a fresh tensor from sizes or ranges"
    SAMPLES = "draws random numbers"
    FROM_HOST_DATA = "builds a tensor from host data (a copy is inherent)"
    ACCEPTS_DEVICE = "takes `device=`"
    INDICES = "makes a sequence of integer indices"
    LEGACY_TYPE = "a legacy typed tensor constructor (`torch.FloatTensor`)"
    VARIABLE = "`Variable(t)`: since PyTorch 0.4 the tensor itself"
    SUBCLASSED = "a base class user code subclasses"
    HOLDS_TENSORS = "a dataset over tensors it is handed"
    SCATTERS = "a wrapper that scatters its inputs over devices (DataParallel)"
    PLACES_HANDED = "may place the model it is handed"
    COPIES = "returns a copy of what it is handed (same kind, same device)"
    LOADS_MODEL = "loads a model object, weights included"
    QUERIES_DEVICE = "names or queries a device"
    SETS_DEFAULT_DEVICE = "sets the default device or tensor type"
    DEVICE_CONTEXT = "a context that sets the current device"
    GUARDS_NO_GRAD = "turns gradient recording off (no_grad, inference_mode)"
    SETS_GRAD_MODE = "sets gradient recording from an argument"
    ENABLES_GRAD = "turns gradient recording on"
    EVALUATES_NO_GRAD = "runs the function it is handed as `eval_func=` with gradient recording off"
    USES_GRAD = "computes gradients (autograd.grad/backward)"
    CHECKS_GRADIENTS = "checks gradients numerically (test code)"
    SEEDS = "seeds a random number generator"
    READS_FILE = "reads or decodes a file"
    WRAPS_ITERABLE = "yields the items of the iterable it is handed"
    EXPORTS = "traces, exports or saves a model"
    SUMMARIZES = "summarizes a model (size, FLOPs)"
    BENCHMARKS = "times or benchmarks code"
    READS_CLOCK = "reads a clock"
    BREAKS = "stops in a debugger"
    LOSS = "computes a loss"
    LEGACY_PROFILER = "the autograd profiler torch.profiler replaces"
    JOINS = "joins a sequence of tensors into one, where they are"
    NORMS_GRADIENTS = "returns the total norm of the gradients of the parameters it is handed, where they are"
    COLLATES = "stacks a list of samples into a batch, where they are (default_collate)"
    OPAQUE = "stores, traces or compiles what it is handed: no tensor where its inputs were"
    READS_METADATA = "reads a tensor's metadata, wherever it lives"
    BIG_OP = "work that scales with another tensor (a matmul, a convolution)"
    READS_MEMORY = "reads the accelerator's memory counters"
    RESETS_MEMORY = "empties the allocator's cache or resets its counters"
    SYNCS = "waits for the device (on a device tensor)"
    VOLUMES = "reads, batches or infers 3D volumes (a batch of one volume is the memory-bound norm)"
    TO_TENSOR_TRANSFORM = "a transform whose instances turn host data (an image, an array) into a CPU tensor"
    # -- methods
    MOVES = "moves the receiver (tensors: a copy; modules: in place)"
    TO_HOST = "copies the receiver's data to the host"
    CASTS = "converts the dtype"
    MAY_MOVE = "may move, depending on its argument (`t.type('torch.cuda.FloatTensor')`)"
    DISCARDS_DATA = "moves without the data (`to_empty`)"
    CALLS_USER_CODE = "runs a function it is handed over the receiver"


class Target(enum.Enum):
    """Where a moving method sends its receiver."""

    ARGUMENT = "the device argument"  # `.to(d)`, `.to_empty(device=d)`
    CUDA = "cuda"
    HOST = "cpu"
    SHARED = "shared host memory"
    OTHER_BACKEND = "another backend"  # xpu, ipu, mps


class Receiver(enum.Enum):
    TENSOR = "tensor"
    MODULE = "module"


@dataclass(frozen=True)
class Symbol:
    """A qualified name's knowledge. `real=False`: a spelling user code writes
    (an old API, an alias imported under a new name) that current torch lacks."""

    returns: Returns
    effects: FrozenSet[Effect] = frozenset()
    real: bool = True


@dataclass(frozen=True)
class Method:
    """A tensor or module method's knowledge (by bare name)."""

    returns: Returns
    on: FrozenSet[Receiver]
    effects: FrozenSet[Effect] = frozenset()
    target: Optional[Target] = None  # for MOVES
    real: bool = True


def _build(groups: Iterable[tuple[str, Returns, FrozenSet[Effect], bool]]) -> Dict[str, Symbol]:
    """Merge the declarations below: a name declared twice unions its effects;
    two answers to what it returns is a contradiction."""
    table: Dict[str, Symbol] = {}
    for names, returns, effects, real in groups:
        for name in names.split():
            old = table.get(name)
            if old is not None and (old.returns is not returns or old.real is not real):
                raise ValueError(f"knowledge: {name} declared twice, differently")
            table[name] = Symbol(returns, effects | old.effects if old else effects, real)
    return table


def _d(
    names: str, returns: Returns, *effects: Effect, real: bool = True
) -> tuple[str, Returns, FrozenSet[Effect], bool]:
    return names, returns, frozenset(effects), real


def _torch(prefix: str, names: str) -> str:
    return " ".join(prefix + n for n in names.split())


R, E = Returns, Effect
_LEGACY_TYPES = " ".join(
    f"torch.{t}Tensor"
    for t in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool", "")
)

SYMBOLS: Mapping[str, Symbol] = _build(
    [
        # -- tensors
        _d(
            "torch.randn torch.rand torch.randint torch.randperm torch.normal",
            R.TENSOR,
            E.ALLOCATES,
            E.SAMPLES,
            E.ACCEPTS_DEVICE,
        ),
        _d(
            _torch(
                "torch.",
                "zeros ones empty full arange linspace logspace eye empty_strided tril_indices triu_indices",
            ),
            R.TENSOR,
            E.ALLOCATES,
            E.ACCEPTS_DEVICE,
        ),
        _d("torch.tensor torch.as_tensor", R.TENSOR, E.FROM_HOST_DATA, E.ACCEPTS_DEVICE),
        _d("torch.from_numpy", R.TENSOR, E.FROM_HOST_DATA),
        _d(
            "torchvision.transforms.functional.to_tensor torchvision.transforms.functional.pil_to_tensor",
            R.TENSOR,
            E.FROM_HOST_DATA,
        ),
        _d(
            "torchvision.transforms.ToTensor torchvision.transforms.PILToTensor "
            "torchvision.transforms.transforms.ToTensor torchvision.transforms.transforms.PILToTensor",
            R.OTHER,
            E.TO_TENSOR_TRANSFORM,
        ),
        _d("torch.bernoulli torch.multinomial torch.poisson", R.TENSOR, E.SAMPLES),  # on their tensor argument's device
        _d("torch.arange torch.randperm", R.TENSOR, E.INDICES),
        _d("numpy.arange numpy.random.permutation", R.HOST_ARRAY, E.INDICES),
        _d(_LEGACY_TYPES, R.TENSOR, E.LEGACY_TYPE),
        _d("torch.autograd.Variable torch.autograd.variable.Variable", R.TENSOR, E.VARIABLE),
        # -- modules and wrappers
        _d("torch.nn.Module torch.nn.modules.module.Module", R.MODULE, E.SUBCLASSED),
        _d("torch.nn.DataParallel torch.nn.parallel.DataParallel", R.MODULE, E.PLACES_HANDED, E.SCATTERS),
        _d("torch.nn.parallel.data_parallel.DataParallel", R.MODULE, E.SCATTERS),
        _d(
            "torch.nn.parallel.DistributedDataParallel torch.distributed.fsdp.FullyShardedDataParallel",
            R.MODULE,
            E.PLACES_HANDED,
        ),
        _d("torch.nn.parallel.DDP", R.MODULE, E.PLACES_HANDED, real=False),
        _d("torch.compile", R.OTHER, E.PLACES_HANDED),
        _d("copy.deepcopy copy.copy", R.SAME, E.COPIES),
        _d("torch.load torch.hub.load torch.jit.load torch.jit.script torch.export.load", R.OTHER, E.LOADS_MODEL),
        # -- devices
        _d("torch.device", R.OTHER, E.QUERIES_DEVICE, E.DEVICE_CONTEXT),
        _d(
            "torch.cuda.is_available torch.cuda.set_device torch.backends.mps.is_available torch.cuda.current_device "
            "torch.accelerator.current_accelerator torch.accelerator.is_available",
            R.OTHER,
            E.QUERIES_DEVICE,
        ),
        _d("torch.set_default_device torch.set_default_tensor_type", R.CONTEXT, E.SETS_DEFAULT_DEVICE),
        _d("torch.set_default_dtype_device", R.CONTEXT, E.SETS_DEFAULT_DEVICE, real=False),
        _d("torch.cuda.device torch.cuda.device_of", R.CONTEXT, E.DEVICE_CONTEXT),
        # -- gradients
        _d(
            "torch.no_grad torch.inference_mode torch.autograd.no_grad torch.autograd.grad_mode.no_grad "
            "torch.autograd.grad_mode.inference_mode",
            R.CONTEXT,
            E.GUARDS_NO_GRAD,
        ),
        _d("torch.set_grad_enabled torch.autograd.set_grad_enabled", R.CONTEXT, E.SETS_GRAD_MODE),
        _d("torch.enable_grad torch.autograd.enable_grad", R.CONTEXT, E.ENABLES_GRAD),
        _d(
            "pytorch_pfn_extras.training.extensions.Evaluator "
            "pytorch_pfn_extras.training.extensions.evaluator.Evaluator",
            R.OTHER,
            E.EVALUATES_NO_GRAD,
        ),
        _d("torch.autograd.grad torch.autograd.backward", R.OTHER, E.USES_GRAD),
        _d(
            "torch.autograd.gradcheck torch.autograd.gradgradcheck torch.autograd.gradcheck.gradcheck "
            "torch.autograd.gradcheck.gradgradcheck",
            R.OTHER,
            E.CHECKS_GRADIENTS,
        ),
        # -- losses (torch.nn.functional)
        _d(
            _torch(
                "torch.nn.functional.",
                "cross_entropy binary_cross_entropy binary_cross_entropy_with_logits nll_loss kl_div mse_loss l1_loss "
                "smooth_l1_loss huber_loss cosine_embedding_loss ctc_loss margin_ranking_loss triplet_margin_loss "
                "poisson_nll_loss gaussian_nll_loss hinge_embedding_loss multilabel_soft_margin_loss soft_margin_loss "
                "multi_margin_loss",
            ),
            R.TENSOR,
            E.LOSS,
        ),
        # -- data loading
        _d(
            "torch.manual_seed torch.random.manual_seed torch.cuda.manual_seed torch.cuda.manual_seed_all random.seed "
            "numpy.random.seed",
            R.OTHER,
            E.SEEDS,
        ),
        _d("torch.utils.data.DataLoader torch.utils.data.dataloader.DataLoader", R.LOADER),
        # torch_geometric's loaders subclass torch's DataLoader and take its keyword
        # arguments (their own positional ones stop before `num_workers`).
        _d(
            _torch(
                "torch_geometric.loader.", "DataLoader DataListLoader DenseDataLoader NeighborLoader LinkNeighborLoader"
            )
            + " "
            + _torch("torch_geometric.data.", "DataLoader DataListLoader DenseDataLoader"),
            R.LOADER,
        ),
        _d("torch.utils.data.default_collate torch.utils.data.dataloader.default_collate", R.OTHER, E.COLLATES),
        _d(
            _torch("torch.", "stack cat concat concatenate vstack hstack dstack row_stack column_stack"),
            R.TENSOR,
            E.JOINS,
        ),
        _d(
            "torch.nn.utils.clip_grad_norm_ torch.nn.utils.clip_grad.clip_grad_norm_ "
            "torch.nn.utils.clip_grad_norm torch.nn.utils.clip_grad.clip_grad_norm",
            R.TENSOR,
            E.NORMS_GRADIENTS,
        ),
        _d("torch.utils.data.Dataset torch.utils.data.dataset.Dataset", R.DATASET, E.SUBCLASSED),
        _d(
            "torch.utils.data.IterableDataset torch.utils.data.dataset.IterableDataset",
            R.ITERABLE_DATASET,
            E.SUBCLASSED,
        ),
        _d("torch.utils.data.TensorDataset torch.utils.data.dataset.TensorDataset", R.DATASET, E.HOLDS_TENSORS),
        _d(
            "open PIL.Image.open cv2.imread cv2.imdecode cv2.VideoCapture imageio.imread imageio.v2.imread "
            "imageio.v3.imread skimage.io.imread numpy.load numpy.fromfile numpy.loadtxt torchaudio.load librosa.load "
            "soundfile.read torchvision.io.read_image torchvision.io.decode_image torchvision.io.decode_jpeg "
            "torchvision.io.read_file torchvision.io.read_video torchvision.datasets.folder.default_loader "
            "torchvision.datasets.folder.pil_loader pandas.read_csv pandas.read_parquet h5py.File scipy.io.loadmat "
            "scipy.io.wavfile.read nibabel.load SimpleITK.ReadImage pydicom.dcmread tifffile.imread",
            R.OTHER,
            E.READS_FILE,
        ),
        _d("torch.load", R.OTHER, E.READS_FILE),
        # 3D volumes: one volume per batch, cut into patches by the collate (MONAI's list_data_collate
        # stacks each volume's `num_samples` crops) or windows by the inferer (which batches them).
        _d(
            "nibabel.load nibabel.save nibabel.Nifti1Image SimpleITK.ReadImage SimpleITK.WriteImage "
            "SimpleITK.GetImageFromArray SimpleITK.GetArrayFromImage monai.data.DataLoader monai.data.list_data_collate "
            "monai.data.pad_list_data_collate monai.data.utils.list_data_collate "
            "monai.inferers.sliding_window_inference monai.inferers.SlidingWindowInferer "
            "monai.inferers.utils.sliding_window_inference torchio.SubjectsLoader torchio.Queue",
            R.OTHER,
            E.VOLUMES,
        ),
        # torchvision datasets that read (and decode) an image file per item. (The in-memory ones, MNIST or
        # CIFAR, still convert every item to a PIL image and run its transforms: work for workers too.)
        _d(
            _torch(
                "torchvision.datasets.",
                "ImageFolder DatasetFolder ImageNet VOCSegmentation VOCDetection CocoDetection CocoCaptions Cityscapes "
                "CelebA LSUN Places365 Flowers102 Food101 StanfordCars OxfordIIITPet Caltech101 Caltech256 INaturalist "
                "DTD FGVCAircraft Kinetics UCF101 HMDB51 SBDataset WIDERFace Kitti LFWPeople LFWPairs SUN397 Country211 "
                "GTSRB EuroSAT Imagenette",
            ),
            R.DATASET,
            E.READS_FILE,
        ),
        _d(
            "enumerate tqdm tqdm.tqdm tqdm.auto.tqdm tqdm.notebook.tqdm tqdm.rich.tqdm tqdm.tqdm_notebook tqdm.std.tqdm",
            R.OTHER,
            E.WRAPS_ITERABLE,
        ),
        # -- what a value handed to a call becomes
        _d("torch.save torch.jit.trace torch.jit.script torch.compile torch.onnx.export", R.OTHER, E.OPAQUE),
        _d("torch.is_tensor torch.is_floating_point torch.is_complex", R.OTHER, E.READS_METADATA),
        _d("torch.numel", R.HOST_NUMBER, E.READS_METADATA),
        _d(
            "torch.matmul torch.mm torch.bmm torch.einsum torch.nn.functional.linear torch.nn.functional.conv2d "
            "torch.nn.functional.conv1d torch.cdist",
            R.TENSOR,
            E.BIG_OP,
        ),
        # -- the accelerator memory API (`torch.cuda.*`; `torch.xpu.*` and other device modules have the same)
        _d(
            _torch(
                "torch.cuda.", "memory_allocated max_memory_allocated memory_reserved max_memory_reserved memory_stats"
            ),
            R.HOST_NUMBER,
            E.READS_MEMORY,
        ),
        _d(
            _torch("torch.cuda.", "empty_cache reset_peak_memory_stats reset_max_memory_allocated"),
            R.OTHER,
            E.RESETS_MEMORY,
        ),
        # -- the code's role
        _d("pdb.set_trace ipdb.set_trace pudb.set_trace breakpoint", R.OTHER, E.BREAKS),
        _d(
            "torch.onnx.export torch.jit.trace torch.jit.save torch.export.export "
            "torch.export.save torch.utils.mobile_optimizer.optimize_for_mobile coremltools.convert",
            R.OTHER,
            E.EXPORTS,
        ),
        _d("torch.onnx.dynamo_export", R.OTHER, E.EXPORTS, real=False),  # removed in torch 2.9
        _d(
            "torchsummary.summary torchinfo.summary thop.profile thop.clever_format fvcore.nn.FlopCountAnalysis "
            "ptflops.get_model_complexity_info torch.utils.flop_counter.FlopCounterMode",
            R.OTHER,
            E.SUMMARIZES,
        ),
        _d("torch.utils.benchmark.Timer torch.cuda.Event timeit.timeit timeit.repeat", R.OTHER, E.BENCHMARKS),
        _d("torch.cuda.synchronize", R.OTHER, E.BENCHMARKS, E.SYNCS),
        _d(
            "time.time time.perf_counter time.monotonic time.process_time datetime.datetime.now",
            R.HOST_NUMBER,
            E.READS_CLOCK,
        ),
        _d("torch.autograd.profiler.profile", R.CONTEXT, E.LEGACY_PROFILER),
        _d("torch.autograd.profile", R.CONTEXT, E.LEGACY_PROFILER, real=False),
        # -- Python builtins that read a tensor's value on the host
        _d("float int bool", R.HOST_NUMBER, E.SYNCS),
    ]
)

_T, _M = Receiver.TENSOR, Receiver.MODULE
_BOTH, _TENSOR, _MODULE = frozenset({_T, _M}), frozenset({_T}), frozenset({_M})


def _methods(
    names: str,
    returns: Returns,
    on: FrozenSet[Receiver],
    *effects: Effect,
    target: Optional[Target] = None,
    real: bool = True,
) -> Dict[str, Method]:
    return {n: Method(returns, on, frozenset(effects), target, real) for n in names.split()}


def _method_table(*parts: Dict[str, Method]) -> Dict[str, Method]:
    """Join the declarations below; a method declared twice is a contradiction."""
    table: Dict[str, Method] = {}
    for part in parts:
        for name, m in part.items():
            if name in table:
                raise ValueError(f"knowledge: method {name} declared twice")
            table[name] = m
    return table


METHODS: Mapping[str, Method] = _method_table(
    _methods("to", R.SAME, _BOTH, E.MOVES, target=Target.ARGUMENT),
    _methods("cuda", R.SAME, _BOTH, E.MOVES, target=Target.CUDA),
    _methods("cpu", R.SAME, _BOTH, E.MOVES, E.TO_HOST, E.SYNCS, target=Target.HOST),
    _methods("to_empty", R.SAME, _MODULE, E.MOVES, E.DISCARDS_DATA, target=Target.ARGUMENT),
    _methods("xpu ipu", R.SAME, _BOTH, E.MOVES, target=Target.OTHER_BACKEND),
    _methods("mps", R.SAME, _BOTH, E.MOVES, target=Target.OTHER_BACKEND, real=False),
    _methods("share_memory", R.SAME, _MODULE, E.MOVES, target=Target.SHARED),
    _methods("half float double bfloat16", R.SAME, _BOTH, E.CASTS),
    _methods("long int bool", R.SAME, _TENSOR, E.CASTS),
    _methods("type", R.SAME, _BOTH, E.CASTS, E.MAY_MOVE),
    _methods("type_as", R.SAME, _TENSOR, E.CASTS, E.MAY_MOVE),
    _methods("train eval", R.SAME, _MODULE),
    _methods("requires_grad_", R.SAME, _BOTH),
    _methods(
        "unsqueeze squeeze view reshape permute t contiguous flatten clone detach transpose expand repeat "
        "fill_ zero_ normal_ uniform_",
        R.SAME,
        _TENSOR,
    ),
    _methods("apply", R.SAME, _MODULE, E.CALLS_USER_CODE),
    _methods(
        "parameters named_parameters state_dict load_state_dict modules named_modules children named_children "
        "buffers named_buffers register_buffer",
        R.OTHER,
        _MODULE,
    ),
    _methods("max min sort topk kthvalue mode median aminmax", R.TENSORS, _TENSOR),  # (values, indices)
    _methods("item", R.HOST_NUMBER, _TENSOR, E.TO_HOST, E.SYNCS),
    _methods("tolist", R.HOST_LIST, _TENSOR, E.TO_HOST, E.SYNCS),
    _methods("numpy", R.HOST_ARRAY, _TENSOR, E.TO_HOST),
)


# torch.nn names that are not Module classes.
NN_NON_MODULES = (
    "torch.nn.functional",
    "torch.nn.init",
    "torch.nn.utils",
    "torch.nn.Parameter",
    "torch.nn.parameter",
    "torch.nn.attention",
    "torch.nn.grad",
)
# torch.nn layers without parameters or buffers worth moving: never "models".
STATELESS_LAYER = re.compile(
    r"(Loss|Dropout\w*|\w*Pool\w*|\w*Pad\dd|Flatten|Unflatten|Identity|Softmax\w*|Softmin|LogSoftmax|ReLU6?|"
    r"LeakyReLU|GELU|SiLU|Sigmoid|LogSigmoid|Tanh|ELU|SELU|CELU|Mish|Hard\w+|Softplus|Softsign|Softshrink|"
    r"Tanhshrink|Threshold|Upsampl\w*|Fold|Unfold|PixelShuffle|PixelUnshuffle|ChannelShuffle|CosineSimilarity|"
    r"PairwiseDistance|GLU)$"
)
# `X.from_pretrained(...)` (transformers, diffusers) that does not build a model.
NON_MODEL_PRETRAINED = re.compile(r"(Tokenizer|Processor|Config|FeatureExtractor|Scheduler|Pipeline)", re.I)
OPTIMIZER_PREFIX = "torch.optim."


# -- asking the tables ---------------------------------------------------------------------


def symbols(where: Callable[[Symbol], bool]) -> FrozenSet[str]:
    """The qualified names whose knowledge satisfies `where`."""
    return frozenset(n for n, s in SYMBOLS.items() if where(s))


def doing(*effects: Effect) -> FrozenSet[str]:
    """The qualified names that have all `effects`."""
    return symbols(lambda s: all(e in s.effects for e in effects))


def methods(where: Callable[[Method], bool]) -> FrozenSet[str]:
    """The method names whose knowledge satisfies `where`."""
    return frozenset(n for n, m in METHODS.items() if where(m))


def symbol(name: Optional[str]) -> Optional[Symbol]:
    return SYMBOLS.get(name) if name else None


def method(name: Optional[str]) -> Optional[Method]:
    return METHODS.get(name) if name else None


# -- the method groups the analysis asks (views) ---------------------------------------------

# Methods that move a module or tensor to a device (in place for modules).
MOVE_METHODS = methods(lambda m: E.MOVES in m.effects and m.target not in (Target.HOST, Target.SHARED))
# Methods that return the same module/tensor kind without moving it.
CHAIN_METHODS = methods(
    lambda m: m.returns is R.SAME and E.MOVES not in m.effects and E.CALLS_USER_CODE not in m.effects
)
# Methods only an nn.Module has (a name used so is a module, whatever its class).
MODULE_ONLY_METHODS = methods(lambda m: m.on == _MODULE and E.MOVES not in m.effects)
# Methods a module answers with itself (moved, cast or switched): `Net().to(d).eval()` is a Net.
# (The project summaries ask it without `share_memory`, as they always did.)
MODULE_SAME_KIND_METHODS = methods(
    lambda m: (
        m.returns is R.SAME
        and _M in m.on
        and m.target is not Target.OTHER_BACKEND
        and not m.effects & {E.MAY_MOVE, E.CALLS_USER_CODE}
    )
)
# ... of which those that keep a freshly built module what it was (its data, on a device).
MODULE_BUILD_CHAIN = frozenset(
    n
    for n in MODULE_SAME_KIND_METHODS
    if METHODS[n].target not in (Target.HOST, Target.SHARED) and E.DISCARDS_DATA not in METHODS[n].effects
)
# Methods whose result stays where the tensor is.
SAME_PLACE_TENSOR_METHODS = frozenset(
    n for n in CHAIN_METHODS if _T in METHODS[n].on and E.MAY_MOVE not in METHODS[n].effects
)
# Moves to cuda or the host (the common ones, other backends left out), of tensors or of either.
CUDA_OR_HOST_MOVES = methods(lambda m: E.MOVES in m.effects and m.target in (Target.ARGUMENT, Target.CUDA, Target.HOST))
TENSOR_CUDA_OR_HOST_MOVES = frozenset(n for n in CUDA_OR_HOST_MOVES if _T in METHODS[n].on)
TENSOR_DEVICE_MOVES = frozenset(n for n in TENSOR_CUDA_OR_HOST_MOVES if METHODS[n].target is not Target.HOST)
# Reads of a tensor's values on the host: into Python values, or copies of the whole tensor.
HOST_VALUE_READS = methods(lambda m: E.TO_HOST in m.effects and m.returns in (R.HOST_NUMBER, R.HOST_LIST))
HOST_TENSOR_COPIES = methods(lambda m: E.TO_HOST in m.effects and m.returns in (R.SAME, R.HOST_ARRAY))
HOST_COPIES = methods(lambda m: E.TO_HOST in m.effects and m.returns is not R.HOST_NUMBER)
# NumPy calls that make a fresh array on the host (`numpy.random.*` draws its numbers there too).
NUMPY_ARRAY_FACTORIES = frozenset(
    "numpy.zeros numpy.ones numpy.full numpy.empty numpy.random.normal numpy.random.random "
    "numpy.random.rand numpy.random.randn numpy.random.uniform numpy.random.randint "
    "numpy.random.standard_normal".split()
)
# The legacy typed tensor classes (`torch.FloatTensor`, `torch.cuda.FloatTensor`): their names.
LEGACY_TENSOR_TYPES = frozenset(
    f"{kind}Tensor" for kind in "Float Double Half BFloat16 Long Int Short Char Byte Bool".split()
)
# Logging methods that read the value they are handed on the host (TensorBoard's
# `SummaryWriter.add_scalar` converts a tensor to NumPy): name -> (position, keyword) of the value.
SCALAR_LOGGERS: Mapping[str, Tuple[int, str]] = {"add_scalar": (1, "scalar_value")}
# Builtins that read a tensor's value on the host: `float(t)`.
HOST_CASTS = symbols(lambda s: s.returns is R.HOST_NUMBER and E.SYNCS in s.effects)

# -- fresh CPU allocations (TL104 asks them of a file's own code, the project summaries of another's) --

# Methods between an allocating factory and its use that keep the tensor a fresh, local one.
FRESH_KEEPING_METHODS = CHAIN_METHODS | frozenset(
    "expand_as tril triu masked_fill masked_fill_ mul mul_ add add_ div div_ sub sub_ clamp clamp_".split()
)
# Wrappers that hand back the tensor they wrap: `Variable(t)`, `nn.Parameter(t)`.
TENSOR_WRAPPERS = doing(E.VARIABLE) | frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_ALLOCATES = doing(E.ALLOCATES)
# Keywords that place an allocation on purpose: an explicit device, a CPU generator (which
# must stay with CPU tensors).
_PLACING_KEYWORDS = frozenset({"device", "generator"})


def allocates_on_cpu(qualname: Optional[str], keywords: Iterable[Optional[str]]) -> bool:
    """A call of `qualname` given these keyword arguments (None: a `**kwargs`)
    allocates a fresh tensor on the CPU: an allocating factory (`torch.zeros`,
    `torch.rand`; not a data constructor, not a sampler of a tensor) given no
    `device=` nor `generator=`. (Inside `with torch.device(...):` it does not:
    the caller knows where the call is.)"""
    if qualname not in _ALLOCATES:
        return False
    return not any(k is None or k in _PLACING_KEYWORDS for k in keywords)


# -- symbol groups the rules ask ------------------------------------------------------------

LEGACY_PROFILERS = doing(E.LEGACY_PROFILER)
# The memory API by bare name (any device module's: `torch.cuda.`, `torch.xpu.`).
MEMORY_READS = frozenset(n.rsplit(".", 1)[1] for n in doing(E.READS_MEMORY))
MEMORY_RESETS = frozenset(n.rsplit(".", 1)[1] for n in doing(E.RESETS_MEMORY))
PYG_LOADERS = frozenset(n for n in symbols(lambda s: s.returns is R.LOADER) if n.startswith("torch_geometric."))
# Methods that return a tuple of tensors (values, indices).
TUPLE_METHODS = methods(lambda m: m.returns is R.TENSORS)
DATA_PARALLEL = doing(E.SCATTERS)


def is_move_call(call: "Call") -> bool:
    """`x.to(...)` (with an argument), `x.cuda()`, `x.to_empty(...)`..."""
    if call.method not in MOVE_METHODS or call.receiver is None:
        return False
    return not (call.method == "to" and not call.node.args)
