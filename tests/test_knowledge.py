"""The knowledge table (torchlint/analysis/knowledge.py): its torch names exist in
the installed torch, the category views hold what they held, no entry contradicts
another."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from torchlint.analysis import knowledge as k
from torchlint.analysis import vocabulary as v
from torchlint.analysis.knowledge import METHODS, SYMBOLS, Effect, Receiver, Returns, Target

try:
    import torch
except ImportError:  # pragma: no cover - the test extras install torch
    torch = None


def _resolves(name: str) -> bool:
    """Import the longest module prefix of `name`, getattr the rest."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _needs_torch() -> None:
    if torch is None:
        print("torch is not installed: the table's torch names are not checked")
        pytest.skip("torch is not installed")


def test_every_torch_name_resolves() -> None:
    _needs_torch()
    names = [n for n in SYMBOLS if n.split(".")[0] == "torch"]
    assert len(names) > 100
    missing = [n for n in names if SYMBOLS[n].real and not _resolves(n)]
    assert missing == []
    # The spellings kept for user code that torch lacks: mark them real when torch gains them.
    unreal = [n for n in names if not SYMBOLS[n].real]
    assert unreal and not any(_resolves(n) for n in unreal)


def test_every_method_exists_where_it_says() -> None:
    _needs_torch()
    owner = {Receiver.TENSOR: torch.Tensor, Receiver.MODULE: torch.nn.Module}
    wrong = [(name, r) for name, m in METHODS.items() if m.real for r in m.on if not hasattr(owner[r], name)]
    assert wrong == []
    assert not any(hasattr(torch.Tensor, n) or hasattr(torch.nn.Module, n) for n, m in METHODS.items() if not m.real)


def test_no_contradictions() -> None:
    for name, s in SYMBOLS.items():
        if Effect.ACCEPTS_DEVICE in s.effects or s.effects & {Effect.ALLOCATES, Effect.FROM_HOST_DATA}:
            assert s.returns is Returns.TENSOR, name
        if Effect.SUBCLASSED in s.effects:
            assert s.returns in (Returns.MODULE, Returns.DATASET, Returns.ITERABLE_DATASET), name
    for name, m in METHODS.items():
        assert (m.target is not None) == (Effect.MOVES in m.effects), name
        assert m.on, name
        if Effect.TO_HOST in m.effects:
            assert m.target in (None, Target.HOST) and Receiver.TENSOR in m.on, name
    assert not v.NO_DEVICE_KWARG & v.ACCEPTS_DEVICE
    assert not k.MOVE_METHODS & k.CHAIN_METHODS
    assert not v.FILE_READERS & v.TORCHVISION_FILE_DATASETS
    # A name declared twice unions its effects (and only its own).
    t = k._build([k._d("a b", Returns.TENSOR, Effect.ALLOCATES), k._d("a c", Returns.TENSOR, Effect.SAMPLES)])
    assert t["a"].effects == {Effect.ALLOCATES, Effect.SAMPLES} and t["c"].effects == {Effect.SAMPLES}
    # Declaring a name twice with two answers is refused.
    with pytest.raises(ValueError):
        k._build([k._d("torch.x", Returns.TENSOR), k._d("torch.x", Returns.MODULE)])


@pytest.mark.parametrize(
    ("view", "members", "non_members"),
    [
        (
            v.ALLOCATING_FACTORIES,
            {"torch.zeros", "torch.randn", "torch.triu_indices"},
            {"torch.tensor", "torch.bernoulli"},
        ),
        (v.RANDOM_FACTORIES, {"torch.randn", "torch.normal"}, {"torch.zeros", "torch.bernoulli"}),
        (v.DATA_CONSTRUCTORS, {"torch.tensor", "torch.from_numpy"}, {"torch.zeros"}),
        (v.CPU_TENSOR_SOURCES, {"torch.zeros", "torch.tensor", "torch.poisson"}, {"numpy.arange", "torch.load"}),
        (
            v.NO_DEVICE_KWARG,
            {"torch.bernoulli", "torch.multinomial", "torch.poisson", "torch.from_numpy"},
            {"torch.tensor"},
        ),
        (v.LEGACY_TENSOR_TYPES, {"FloatTensor", "Tensor", "BFloat16Tensor"}, {"torch.FloatTensor"}),
        (v.MODEL_LOADERS, {"torch.load", "torch.jit.script"}, {"torch.jit.trace"}),
        (v.FILE_READERS, {"open", "torch.load", "PIL.Image.open"}, {"torchvision.datasets.ImageFolder"}),
        (v.DATALOADER, {"torch.utils.data.DataLoader"}, {"torch.utils.data.Dataset"}),
        (v.LOSS_FUNCTIONS, {"cross_entropy", "mse_loss"}, {"torch.nn.functional.cross_entropy", "softmax"}),
        (v.INDEX_FACTORIES, {"torch.arange", "numpy.random.permutation"}, {"torch.zeros"}),
        (v.ITER_WRAPPERS, {"enumerate", "tqdm.auto.tqdm"}, {"zip"}),
        (k.MOVE_METHODS, {"to", "cuda", "to_empty", "xpu", "mps", "ipu"}, {"cpu", "share_memory"}),
        (k.CHAIN_METHODS, {"eval", "long", "view", "type_as", "uniform_"}, {"to", "cpu", "apply", "item"}),
        (k.MODULE_ONLY_METHODS, {"eval", "state_dict", "apply"}, {"to_empty", "share_memory", "to"}),
        (k.MODULE_SAME_KIND_METHODS, {"to", "cpu", "to_empty", "share_memory", "eval"}, {"type", "xpu", "long"}),
        (k.MODULE_BUILD_CHAIN, {"to", "eval", "requires_grad_"}, {"cpu", "to_empty", "share_memory"}),
        (k.HOST_VALUE_READS, {"item", "tolist"}, {"cpu", "numpy"}),
        (k.HOST_COPIES, {"tolist", "cpu", "numpy"}, {"item"}),
        (k.HOST_CASTS, {"float", "int", "bool"}, {"str", "torch.tensor"}),
        (
            k.DATA_PARALLEL,
            {"torch.nn.parallel.data_parallel.DataParallel"},
            {"torch.nn.parallel.DistributedDataParallel"},
        ),
        (k.LEGACY_PROFILERS, {"torch.autograd.profiler.profile"}, {"torch.profiler.profile"}),
        (k.PYG_LOADERS, {"torch_geometric.loader.NeighborLoader"}, {"torch.utils.data.DataLoader"}),
        (v.DATALOADER, {"torch.utils.data.dataloader.DataLoader"}, {"torch_geometric.loader.DataLoader"}),
        (k.TUPLE_METHODS, {"max", "topk", "aminmax"}, {"argmax", "item"}),
        (k.doing(Effect.OPAQUE), {"torch.save", "torch.compile"}, {"torch.load", "torch.jit.save"}),
        (k.doing(Effect.JOINS), {"torch.cat", "torch.column_stack"}, {"torch.split"}),
        (v.GRAD_NORMS, {"torch.nn.utils.clip_grad_norm_"}, {"torch.nn.utils.clip_grad_value_"}),
        (v.CPU_TENSOR_SOURCES, {"torchvision.transforms.functional.to_tensor"}, {"torchvision.transforms.ToTensor"}),
        (v.TO_TENSOR_TRANSFORMS, {"torchvision.transforms.ToTensor"}, {"torchvision.transforms.Normalize"}),
        (v.VOLUME_PIPELINE, {"monai.inferers.sliding_window_inference", "SimpleITK.ReadImage"}, {"PIL.Image.open"}),
    ],
)
def test_views_hold_what_they_held(view, members, non_members) -> None:
    assert members <= view
    assert not non_members & view


def test_view_sizes() -> None:
    sizes = {
        "ALLOCATING_FACTORIES": 16,
        "CPU_TENSOR_SOURCES": 24,
        "FILE_READERS": 32,
        "TORCHVISION_FILE_DATASETS": 33,
        "LOSS_FUNCTIONS": 19,
        "CHAIN_METHODS": 29,
        "MODULE_ONLY_METHODS": 14,
    }
    assert {n: len(getattr(v, n)) for n in sizes} == sizes


def test_the_linter_does_not_import_torch() -> None:
    code = "import sys, torchlint.analysis.knowledge, torchlint.analysis.vocabulary; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
