"""The names the analysis reads: the category sets of torch and library symbols
(views computed from the knowledge table, torchlint/analysis/knowledge.py; add a
symbol there, not here), and the naming conventions of user code (regexes over
variable, function and argument names, device strings, package names): these are
not torch symbols and stay here."""

from __future__ import annotations

import re

from torchlint.analysis.knowledge import (
    CHAIN_METHODS,
    MODULE_ONLY_METHODS,
    MOVE_METHODS,
    NN_NON_MODULES,
    NON_MODEL_PRETRAINED,
    OPTIMIZER_PREFIX,
    STATELESS_LAYER,
    Effect,
    Returns,
)
from torchlint.analysis.knowledge import doing as _doing
from torchlint.analysis.knowledge import symbols as _symbols

__all__ = [
    "CHAIN_METHODS",
    "MODULE_ONLY_METHODS",
    "MOVE_METHODS",
    "NN_NON_MODULES",
    "NON_MODEL_PRETRAINED",
    "OPTIMIZER_PREFIX",
    "STATELESS_LAYER",
]

# -- tensors -------------------------------------------------------------------

# torch functions that allocate a fresh tensor (on the CPU unless given `device=`).
ALLOCATING_FACTORIES = _doing(Effect.ALLOCATES)
# The allocating factories that draw random numbers (from the generator of the device they run on).
RANDOM_FACTORIES = _doing(Effect.ALLOCATES, Effect.SAMPLES)
# torch functions that build a tensor from host data (a copy is inherent).
DATA_CONSTRUCTORS = _doing(Effect.FROM_HOST_DATA)
# Transforms whose instances turn host data into a CPU tensor: `ToTensor()(image)`.
TO_TENSOR_TRANSFORMS = _doing(Effect.TO_TENSOR_TRANSFORM)
# Readers, collates and inferers of 3D volumes (nibabel, SimpleITK, MONAI's patch pipeline).
VOLUME_PIPELINE = _doing(Effect.VOLUMES)
# Every torch function that returns a CPU tensor unless given `device=`.
CPU_TENSOR_SOURCES = _symbols(
    lambda s: (
        s.returns is Returns.TENSOR and bool(s.effects & {Effect.ALLOCATES, Effect.FROM_HOST_DATA, Effect.SAMPLES})
    )
)
# The factories that accept `device=`, and the ones whose tensor-argument forms
# take no `device=` (`torch.normal(mean_tensor, std_tensor)`, `torch.bernoulli(p)`).
ACCEPTS_DEVICE = _doing(Effect.ACCEPTS_DEVICE)
NO_DEVICE_KWARG = CPU_TENSOR_SOURCES - ACCEPTS_DEVICE
# Legacy typed constructors: `torch.FloatTensor(np_array)`, `torch.cuda.FloatTensor(...)`.
LEGACY_TENSOR_TYPES = frozenset(n.rsplit(".", 1)[1] for n in _doing(Effect.LEGACY_TYPE))

# `clip_grad_norm_(model.parameters(), ...)`: the gradients' total norm, a tensor where the parameters are.
GRAD_NORMS = _doing(Effect.NORMS_GRADIENTS)

# `Variable(t)`: since PyTorch 0.4 the tensor itself.
VARIABLE = _doing(Effect.VARIABLE)

# -- modules ---------------------------------------------------------------------

NN_MODULE = _symbols(lambda s: s.returns is Returns.MODULE and Effect.SUBCLASSED in s.effects)
DATASET_BASES = _symbols(lambda s: s.returns is Returns.DATASET and Effect.SUBCLASSED in s.effects)
ITERABLE_DATASET_BASES = _symbols(lambda s: s.returns is Returns.ITERABLE_DATASET and Effect.SUBCLASSED in s.effects)
# NN_NON_MODULES, STATELESS_LAYER (torch.nn layers never "models"), NON_MODEL_PRETRAINED,
# MODULE_ONLY_METHODS: knowledge.py.
# Wrappers that scatter their inputs to the devices of the wrapped model.
WRAPPER_CLASSES = frozenset({"DataParallel", "DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP"})
# Calls that may place a model they are handed.
PLACERS = _doing(Effect.PLACES_HANDED)
# Calls that return a copy of what they are handed: same kind, same device.
COPIES = _doing(Effect.COPIES)
# Calls that load a model object (weights included).
MODEL_LOADERS = _doing(Effect.LOADS_MODEL)
MODEL_NAME = re.compile(r"(^|_)(model|net|network|module|encoder|decoder|classifier)$", re.I)
# Functions that build or load a model rather than run one: `get_model(args)`, `load_model(path)`.
MODEL_FACTORY_NAME = re.compile(r"^_*(get|load|build|create|make|init|setup|prepare|save|export|define|new)_", re.I)

# -- moves and devices -------------------------------------------------------------

# MOVE_METHODS, CHAIN_METHODS: knowledge.py.
DEVICE_STRING = re.compile(r"""^[rbuRBU]*['"](cuda(:\d+)?|mps|xpu(:\d+)?|npu(:\d+)?)['"]$""")
CPU_STRING = re.compile(r"""^[rbuRBU]*['"]cpu['"]$""")
DEVICE_VAR = re.compile(r"^_?(device|dev|DEVICE|DEV|torch_device|DEFAULT_DEVICE)$")
DEVICE_NAME = re.compile(r"(^|_)(device|dev)s?($|_)|^device|(^|_)(gpu|cuda)($|_)|local_rank", re.I)
DEVICE_CALLS = _doing(Effect.QUERIES_DEVICE)
DEFAULT_DEVICE_SETTERS = _doing(Effect.SETS_DEFAULT_DEVICE)
DEVICE_CONTEXTS = _doing(Effect.DEVICE_CONTEXT)
# Top-level packages whose presence means a framework places models and batches.
FRAMEWORKS = frozenset(
    {
        "accelerate",
        "lightning",
        "pytorch_lightning",
        "lightning_fabric",
        "deepspeed",
        "ignite",
        "composer",
        "colossalai",
        "ray",
    }
)
XLA_PACKAGES = frozenset({"torch_xla"})
# A callee whose name says it places what it is handed (`to_device(batch)`).
PLACING_NAME = re.compile(r"(device|cuda|gpu|prefetch|accelerat|prepare)", re.I)

# -- gradients ---------------------------------------------------------------------

NO_GRAD_CONTEXTS = _doing(Effect.GUARDS_NO_GRAD)
SET_GRAD_ENABLED = _doing(Effect.SETS_GRAD_MODE)
ENABLE_GRAD = _doing(Effect.ENABLES_GRAD)
NO_GRAD_EVALUATORS = _doing(Effect.EVALUATES_NO_GRAD)
GRAD_USERS = _doing(Effect.USES_GRAD)

# -- losses ------------------------------------------------------------------------

LOSS_FUNCTIONS = frozenset(n.rsplit(".", 1)[1] for n in _doing(Effect.LOSS))
LOSS_NAME = re.compile(r"loss|crit", re.I)

# -- data loading --------------------------------------------------------------------

# Calls that seed the random number generators of a run (a same-file `seed_everything` calls these).
RNG_SEEDERS = _doing(Effect.SEEDS)
SEEDING_NAMES = frozenset({"seed_everything", "set_seed", "set_random_seed"})
# Calls that make a sequence of integer indices (a loader over one yields batches of indices).
INDEX_FACTORIES = _doing(Effect.INDICES)
DATALOADER = frozenset(n for n in _symbols(lambda s: s.returns is Returns.LOADER) if n.startswith("torch."))
# Calls that read or decode a file: a dataset calling one per item gives worker processes real work.
FILE_READERS = _symbols(lambda s: Effect.READS_FILE in s.effects and s.returns is not Returns.DATASET)
# torchvision datasets that read (and decode) an image file per item. (The in-memory ones, MNIST or
# CIFAR, still convert every item to a PIL image and run its transforms: work for workers too.)
# What a Dataset's `__getitem__` may call and still only index data held in memory: tensor
# methods that convert or reshape (and a dict's views), builtins that count or convert, and NumPy's
# conversions and sorted lookup.
ITEM_PLAIN_METHODS = frozenset(
    {"float", "long", "int", "clone", "view", "reshape", "unsqueeze", "squeeze", "items", "keys", "values"}
)
ITEM_PLAIN_BUILTINS = frozenset({"len", "int", "float", "range", "tuple"})
ITEM_PLAIN_CALLS = frozenset({"numpy.asarray", "numpy.array", "numpy.searchsorted"})
TORCHVISION_FILE_DATASETS = _symbols(lambda s: Effect.READS_FILE in s.effects and s.returns is Returns.DATASET)
TENSOR_DATASET = _doing(Effect.HOLDS_TENSORS)
LOADER_NAME = re.compile(r"loader", re.I)
# Iterables that wrap another and yield its items (first positional argument).
ITER_WRAPPERS = _doing(Effect.WRAPS_ITERABLE)

# -- calls that never place or keep what they are handed ---------------------------------

NON_PLACING = frozenset(
    {
        "print",
        "len",
        "isinstance",
        "type",
        "id",
        "repr",
        "str",
        "hasattr",
        "getattr",
        "vars",
        "dir",
        "format",
        "hash",
        "callable",
        "next",
        "iter",
        "sum",
        "sorted",
        "list",
        "tuple",
        "max",
        "min",
    }
)

# -- the code's role ------------------------------------------------------------------

TEST_FUNCTION = re.compile(r"^_*test(_|$)", re.I)
# What only tests do: check gradients numerically, run a test framework.
GRADIENT_CHECKS = _doing(Effect.CHECKS_GRADIENTS)
# What only debugging code does: stop in a debugger.
DEBUGGER_BREAKS = _doing(Effect.BREAKS)
TEST_FRAMEWORKS = ("pytest", "unittest")
TEST_CLASS = re.compile(r"^Test[A-Z_0-9]")
INFERENCE_NAME = re.compile(
    r"^_*(eval|evaluate|evalute|test|predict|infer|inference|validate|validation|valid|"
    r"generate|sample|decode|translate|caption|beam_search)",
    re.I,
)
EXPORT_CALLS = _doing(Effect.EXPORTS)
SUMMARY_CALLS = _doing(Effect.SUMMARIZES)
BENCHMARK_CALLS = _doing(Effect.BENCHMARKS)
# Keyword or name of an argument that points a dataset at data to read or transform.
DATA_ARGUMENT_NAME = re.compile(
    r"path|dir|root|file|folder|csv|json|txt|data|img|image|audio|split|url|transform|token", re.I
)
# Calls that choose the next token from a model's scores (a decoding loop).
TOKEN_PICKS = frozenset({"argmax", "topk", "multinomial", "sample"})
# Clock reads that time code.
CLOCKS = _doing(Effect.READS_CLOCK)
# A console script's entry point (`main`, `cli_main`, `train_main`): packaging files name it, not code.
ENTRY_POINT_NAME = re.compile(r"^(main|cli|run_cli|\w+_main|main_\w+)$")
BENCHMARK_NAME = re.compile(r"(bench|latency|throughput|speed|profil|timing|export|onnx|summary|flops)", re.I)
# Packages that show or write data on the host (plots, images, video): a loop feeding them is I/O.
HOST_OUTPUT_PACKAGES = frozenset({"matplotlib", "PIL", "imageio", "cv2", "seaborn", "plotly", "wandb", "tensorboardX"})
# Graph learning libraries: their loaders batch whole graphs (one graph per dataset is common).
GRAPH_PACKAGES = frozenset({"torch_geometric", "dgl", "torch_cluster", "ogb"})
# Online, one-observation-at-a-time code (RL acting): a batch of one is inherent.
ONLINE_PACKAGES = frozenset({"gym", "gymnasium", "stable_baselines3", "pettingzoo"})

# torch.nn classes that hold what they are given (no parameters of their own).
NN_CONTAINER_LAYERS = frozenset({"Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})
