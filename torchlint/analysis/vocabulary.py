"""The names the analysis knows: torch APIs, wrappers, frameworks, naming
conventions. One place, so every fact reads the same lists."""

from __future__ import annotations

import re

# -- tensors -------------------------------------------------------------------

# torch functions that allocate a fresh tensor (on the CPU unless given `device=`).
ALLOCATING_FACTORIES = frozenset(
    "torch." + n
    for n in (
        "randn rand randint randperm zeros ones empty full arange linspace logspace eye "
        "empty_strided tril_indices triu_indices normal"
    ).split()
)
# The allocating factories that draw random numbers (from the generator of the device they run on).
RANDOM_FACTORIES = frozenset("torch." + n for n in "randn rand randint randperm normal".split())
# torch functions that build a tensor from host data (a copy is inherent).
DATA_CONSTRUCTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy"})
# Every torch function that returns a CPU tensor unless given `device=`.
CPU_TENSOR_SOURCES = (
    ALLOCATING_FACTORIES | DATA_CONSTRUCTORS | {"torch.bernoulli", "torch.multinomial", "torch.poisson"}
)
# The factories that accept `device=`, and the ones whose tensor-argument forms
# take no `device=` (`torch.normal(mean_tensor, std_tensor)`, `torch.bernoulli(p)`).
ACCEPTS_DEVICE = ALLOCATING_FACTORIES | {"torch.tensor", "torch.as_tensor"}
NO_DEVICE_KWARG = frozenset({"torch.bernoulli", "torch.multinomial", "torch.poisson", "torch.from_numpy"})
# Legacy typed constructors: `torch.FloatTensor(np_array)`, `torch.cuda.FloatTensor(...)`.
LEGACY_TENSOR_TYPES = frozenset(
    f"{t}Tensor" for t in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool", "")
)

# `Variable(t)`: since PyTorch 0.4 the tensor itself.
VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

# -- modules ---------------------------------------------------------------------

NN_MODULE = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})
ITERABLE_DATASET_BASES = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})
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
    r"Tanhshrink|Threshold|Upsample\w*|PixelShuffle|PixelUnshuffle|ChannelShuffle|CosineSimilarity|"
    r"PairwiseDistance|GLU)$"
)
# `X.from_pretrained(...)` that does not build a model.
NON_MODEL_PRETRAINED = re.compile(r"(Tokenizer|Processor|Config|FeatureExtractor|Scheduler|Pipeline)", re.I)
# Methods only an nn.Module has (a name used so is a module, whatever its class).
MODULE_ONLY_METHODS = frozenset(
    {
        "eval",
        "parameters",
        "named_parameters",
        "state_dict",
        "load_state_dict",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "buffers",
        "named_buffers",
        "register_buffer",
        "apply",
        "train",
    }
)
# Wrappers that scatter their inputs to the devices of the wrapped model.
WRAPPER_CLASSES = frozenset({"DataParallel", "DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP"})
# Calls that may place a model they are handed.
PLACERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.DDP",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.compile",
    }
)
# Calls that return a copy of what they are handed: same kind, same device.
COPIES = frozenset({"copy.deepcopy", "copy.copy"})
# Calls that load a model object (weights included).
MODEL_LOADERS = frozenset({"torch.load", "torch.hub.load", "torch.jit.load", "torch.jit.script", "torch.export.load"})
MODEL_NAME = re.compile(r"(^|_)(model|net|network|module|encoder|decoder|classifier)$", re.I)
# Functions that build or load a model rather than run one: `get_model(args)`, `load_model(path)`.
MODEL_FACTORY_NAME = re.compile(r"^_*(get|load|build|create|make|init|setup|prepare|save|export|define|new)_", re.I)

# -- moves and devices -------------------------------------------------------------

# Methods that move a module or tensor (in place for modules).
MOVE_METHODS = frozenset({"to", "cuda", "to_empty", "xpu", "mps", "ipu"})
# Methods that return the same module/tensor kind without moving it.
CHAIN_METHODS = frozenset(
    {
        "eval",
        "train",
        "half",
        "float",
        "double",
        "bfloat16",
        "long",
        "int",
        "bool",
        "requires_grad_",
        "unsqueeze",
        "squeeze",
        "view",
        "reshape",
        "permute",
        "t",
        "contiguous",
        "flatten",
        "clone",
        "detach",
        "transpose",
        "expand",
        "repeat",
        "type",
        "type_as",
        "fill_",
        "zero_",
        "normal_",
        "uniform_",
    }
)
DEVICE_STRING = re.compile(r"""^[rbuRBU]*['"](cuda(:\d+)?|mps|xpu(:\d+)?|npu(:\d+)?)['"]$""")
CPU_STRING = re.compile(r"""^[rbuRBU]*['"]cpu['"]$""")
DEVICE_VAR = re.compile(r"^_?(device|dev|DEVICE|DEV|torch_device|DEFAULT_DEVICE)$")
DEVICE_NAME = re.compile(r"(^|_)(device|dev)s?($|_)|^device|(^|_)(gpu|cuda)($|_)|local_rank", re.I)
DEVICE_CALLS = frozenset(
    {
        "torch.device",
        "torch.cuda.is_available",
        "torch.cuda.set_device",
        "torch.backends.mps.is_available",
        "torch.cuda.current_device",
        "torch.accelerator.current_accelerator",
        "torch.accelerator.is_available",
    }
)
DEFAULT_DEVICE_SETTERS = frozenset(
    {"torch.set_default_device", "torch.set_default_tensor_type", "torch.set_default_dtype_device"}
)
DEVICE_CONTEXTS = frozenset({"torch.device", "torch.cuda.device", "torch.cuda.device_of"})
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

NO_GRAD_CONTEXTS = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})
ENABLE_GRAD = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
GRAD_USERS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})

# -- losses ------------------------------------------------------------------------

LOSS_FUNCTIONS = frozenset(
    {
        "cross_entropy",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "nll_loss",
        "kl_div",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "cosine_embedding_loss",
        "ctc_loss",
        "margin_ranking_loss",
        "triplet_margin_loss",
        "poisson_nll_loss",
        "gaussian_nll_loss",
        "hinge_embedding_loss",
        "multilabel_soft_margin_loss",
        "soft_margin_loss",
        "multi_margin_loss",
    }
)
LOSS_NAME = re.compile(r"loss|crit", re.I)

# -- data loading --------------------------------------------------------------------

# Calls that seed the random number generators of a run (a same-file `seed_everything` calls these).
RNG_SEEDERS = frozenset(
    {
        "torch.manual_seed",
        "torch.random.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "random.seed",
        "numpy.random.seed",
    }
)
SEEDING_NAMES = frozenset({"seed_everything", "set_seed", "set_random_seed"})
# Calls that make a sequence of integer indices (a loader over one yields batches of indices).
INDEX_FACTORIES = frozenset({"torch.arange", "torch.randperm", "numpy.arange", "numpy.random.permutation"})
DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# Calls that read or decode a file: a dataset calling one per item gives worker processes real work.
FILE_READERS = frozenset(
    {
        "open",
        "PIL.Image.open",
        "cv2.imread",
        "cv2.imdecode",
        "cv2.VideoCapture",
        "imageio.imread",
        "imageio.v2.imread",
        "imageio.v3.imread",
        "skimage.io.imread",
        "numpy.load",
        "numpy.fromfile",
        "numpy.loadtxt",
        "torch.load",
        "torchaudio.load",
        "librosa.load",
        "soundfile.read",
        "torchvision.io.read_image",
        "torchvision.io.decode_image",
        "torchvision.io.decode_jpeg",
        "torchvision.io.read_file",
        "torchvision.io.read_video",
        "torchvision.datasets.folder.default_loader",
        "torchvision.datasets.folder.pil_loader",
        "pandas.read_csv",
        "pandas.read_parquet",
        "h5py.File",
        "scipy.io.loadmat",
        "scipy.io.wavfile.read",
        "nibabel.load",
        "SimpleITK.ReadImage",
        "pydicom.dcmread",
        "tifffile.imread",
    }
)
# torchvision datasets that read (and decode) an image file per item. (The in-memory ones, MNIST or
# CIFAR, still convert every item to a PIL image and run its transforms: work for workers too.)
TORCHVISION_FILE_DATASETS = frozenset(
    "torchvision.datasets." + n
    for n in (
        "ImageFolder DatasetFolder ImageNet VOCSegmentation VOCDetection CocoDetection CocoCaptions Cityscapes "
        "CelebA LSUN Places365 Flowers102 Food101 StanfordCars OxfordIIITPet Caltech101 Caltech256 INaturalist "
        "DTD FGVCAircraft Kinetics UCF101 HMDB51 SBDataset WIDERFace Kitti LFWPeople LFWPairs SUN397 Country211 "
        "GTSRB EuroSAT Imagenette"
    ).split()
)
TENSOR_DATASET = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
LOADER_NAME = re.compile(r"loader", re.I)
# Iterables that wrap another and yield its items (first positional argument).
ITER_WRAPPERS = frozenset(
    {
        "enumerate",
        "tqdm",
        "tqdm.tqdm",
        "tqdm.auto.tqdm",
        "tqdm.notebook.tqdm",
        "tqdm.rich.tqdm",
        "tqdm.tqdm_notebook",
        "tqdm.std.tqdm",
    }
)
OPTIMIZER_PREFIX = "torch.optim."

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
GRADIENT_CHECKS = frozenset(
    {
        "torch.autograd.gradcheck",
        "torch.autograd.gradgradcheck",
        "torch.autograd.gradcheck.gradcheck",
        "torch.autograd.gradcheck.gradgradcheck",
    }
)
# What only debugging code does: stop in a debugger.
DEBUGGER_BREAKS = frozenset({"pdb.set_trace", "ipdb.set_trace", "pudb.set_trace", "breakpoint"})
TEST_FRAMEWORKS = ("pytest", "unittest")
TEST_CLASS = re.compile(r"^Test[A-Z_0-9]")
INFERENCE_NAME = re.compile(
    r"^_*(eval|evaluate|evalute|test|predict|infer|inference|validate|validation|valid|"
    r"generate|sample|decode|translate|caption|beam_search)",
    re.I,
)
EXPORT_CALLS = frozenset(
    {
        "torch.onnx.export",
        "torch.onnx.dynamo_export",
        "torch.jit.trace",
        "torch.jit.save",
        "torch.export.export",
        "torch.export.save",
        "torch.utils.mobile_optimizer.optimize_for_mobile",
        "coremltools.convert",
    }
)
SUMMARY_CALLS = frozenset(
    {
        "torchsummary.summary",
        "torchinfo.summary",
        "thop.profile",
        "thop.clever_format",
        "fvcore.nn.FlopCountAnalysis",
        "ptflops.get_model_complexity_info",
        "torch.utils.flop_counter.FlopCounterMode",
    }
)
BENCHMARK_CALLS = frozenset(
    {"torch.utils.benchmark.Timer", "torch.cuda.Event", "timeit.timeit", "timeit.repeat", "torch.cuda.synchronize"}
)
# Keyword or name of an argument that points a dataset at data to read or transform.
DATA_ARGUMENT_NAME = re.compile(
    r"path|dir|root|file|folder|csv|json|txt|data|img|image|audio|split|url|transform|token", re.I
)
# Calls that choose the next token from a model's scores (a decoding loop).
TOKEN_PICKS = frozenset({"argmax", "topk", "multinomial", "sample"})
# Clock reads that time code.
CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.process_time", "datetime.datetime.now"})
BENCHMARK_NAME = re.compile(r"(bench|latency|throughput|speed|profil|timing|export|onnx|summary|flops)", re.I)
# Packages that show or write data on the host (plots, images, video): a loop feeding them is I/O.
HOST_OUTPUT_PACKAGES = frozenset({"matplotlib", "PIL", "imageio", "cv2", "seaborn", "plotly", "wandb", "tensorboardX"})
# Graph learning libraries: their loaders batch whole graphs (one graph per dataset is common).
GRAPH_PACKAGES = frozenset({"torch_geometric", "dgl", "torch_cluster", "ogb"})
# Online, one-observation-at-a-time code (RL acting): a batch of one is inherent.
ONLINE_PACKAGES = frozenset({"gym", "gymnasium", "stable_baselines3", "pettingzoo"})
