"""The project read as a whole (torchlint/analysis/project/): small projects
written to tmp_path and run through `api.run`, the CLI and the text API. Each
of the four facts that a file alone gets wrong is shown right (and its
negative shown unknown): a base class in another file, a project's own grad
guard, a DataLoader subclass, what a function of another file returns or
moves. Then name resolution, the cache, the single-file API and the index's
own questions."""

import os
import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from click.testing import CliRunner

from torchlint.analysis.project import ClassKind, ProjectIndex, ValueKind, summarize
from torchlint.analysis.project.kinds import Dependency, Question
from torchlint.config import Settings
from torchlint.doors.cli import main
from torchlint.files import parallel
from torchlint.files.project_pass import build_index, summarize_bytes
from torchlint.files.runner import run as run_files

from helpers import EVERY_RULE, api
from helpers import write_files as write

Found = List[Tuple[str, int, str]]


def findings(root: Path, target: str = "", settings: Settings = EVERY_RULE, **kwargs) -> Found:
    """(file relative to root, row, code) of a run over `root` (or one file of it),
    every rule on (or `settings`); `mapper` (the runner's) sees the files that are linted."""
    result = run_files([str(root / target) if target else str(root)], settings, **kwargs)
    assert not result.problems, result.problems
    return [(Path(f.path).relative_to(root).as_posix(), f.row, f.code) for f in result.findings]


def index_of(root: Path, files: Dict[str, str]) -> ProjectIndex:
    write(root, files)
    paths = sorted(str(p) for p in root.rglob("*.py"))
    return build_index([(p, Path(p).read_bytes()) for p in paths], [str(root)])


# -- 1. a base class in another file --------------------------------------------------------------

BACKBONE_MODULE = """
import torch.nn as nn

class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
"""
BACKBONE_PLAIN = """
class Backbone:
    def __init__(self):
        self.w = 1
"""
NET_SCRIPT = """
import torch
from models.base import Backbone

class Net(Backbone):
    def forward(self, x):
        return self.fc(x)

device = torch.device("cuda")
net = Net()
for x, y in loader:
    x = x.to(device)
    out = net(x)
    out.sum().backward()
"""


def test_subclass_of_a_module_in_another_file_is_a_module(tmp_path):
    write(tmp_path, {"models/__init__.py": "", "models/base.py": BACKBONE_MODULE, "train.py": NET_SCRIPT})
    assert findings(tmp_path) == [("train.py", 9, "TL101")]  # `net = Net()` is a module never moved


def test_subclass_of_a_plain_class_in_another_file_stays_unknown(tmp_path):
    write(tmp_path, {"models/__init__.py": "", "models/base.py": BACKBONE_PLAIN, "train.py": NET_SCRIPT})
    assert findings(tmp_path) == []


def test_a_file_linted_alone_reads_the_base_it_imports(tmp_path):
    write(tmp_path, {"models/__init__.py": "", "models/base.py": BACKBONE_MODULE, "train.py": NET_SCRIPT})
    assert findings(tmp_path, "train.py") == [("train.py", 9, "TL101")]  # models/base.py is read, not linted


def test_relative_imports_and_re_exports(tmp_path):
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/models/__init__.py": "from .net import Net\n",
            "pkg/models/base.py": BACKBONE_MODULE,
            "pkg/models/net.py": "from .base import Backbone\n\nclass Net(Backbone):\n    pass\n",
            "pkg/train.py": NET_SCRIPT.replace("from models.base import Backbone", "from .models import Net").replace(
                "class Net(Backbone):\n    def forward(self, x):\n        return self.fc(x)\n", ""
            ),
        },
    )
    found = findings(tmp_path)
    assert [(f, c) for f, _, c in found] == [("pkg/train.py", "TL101")]


def test_dataset_subclasses_across_files(tmp_path):
    idx = index_of(
        tmp_path,
        {
            "data/base.py": """
                from torch.utils.data import Dataset, IterableDataset
                class Base(Dataset[int]):
                    pass
                class Stream(IterableDataset):
                    pass
                class NotData:
                    pass
            """,
            "data/sets.py": """
                from .base import Base, Stream, NotData
                class Images(Base):
                    pass
                class Frames(Stream):
                    pass
                class Other(NotData):
                    pass
            """,
        },
    )
    view = idx.view(str(tmp_path / "train.py"))
    assert view.class_kind("data.sets.Images") is ClassKind.DATASET
    assert view.class_kind("data.sets.Frames") is ClassKind.ITERABLE_DATASET
    assert view.class_kind("data.sets.Other") is None
    assert view.class_kind("data.sets.Missing") is None


# -- 2. a project's own grad guard --------------------------------------------------------------------

TORCH_UTILS = """
import torch

def check_version(current, minimum):
    return True

def fast_eval(torch_1_9=check_version(torch.__version__, "1.9.0")):
    def decorate(fn):
        return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)
    return decorate

def timed():
    def decorate(fn):
        return fn
    return decorate
"""
VAL = """
import torch
from utils.torch_utils import {name}

@{name}()
def run(weights, loader):
    device = torch.device("cuda")
    model = torch.load(weights).to(device)
    model.eval()
    for x, y in loader:
        out = model(x.to(device))
        print(out)
"""


def test_a_decorator_factory_of_another_file_guards_grad(tmp_path):
    # A name that says nothing (a wrapper named for no_grad/inference_mode is
    # read as one even alone): only the other file tells.
    write(tmp_path, {"utils/torch_utils.py": TORCH_UTILS, "val.py": VAL.format(name="fast_eval")})
    assert findings(tmp_path) == []
    assert findings(tmp_path, "val.py") == []  # alone, it reads the module it imports
    assert api.check(VAL.format(name="fast_eval"), str(tmp_path / "val.py")).findings  # a text alone cannot tell


def test_a_decorator_that_does_something_else_is_not_a_guard(tmp_path):
    write(tmp_path, {"utils/torch_utils.py": TORCH_UTILS, "val.py": VAL.format(name="timed")})
    assert findings(tmp_path) == [("val.py", 10, "TL201")]


HELPERS = """
import torch
from contextlib import contextmanager

@contextmanager
def eval_mode():
    with torch.no_grad():
        yield

@contextmanager
def timer():
    yield

no_grad = torch.no_grad
"""
LOOP = """
import torch
from {module} import {name}

def run(weights, loader):
    device = torch.device("cuda")
    model = torch.load(weights).to(device)
    model.eval()
    for x, y in loader:
        with {name}():
            out = model(x.to(device))
        print(out)

run("model.pt", torch.load("batches.pt"))  # (a function nothing calls runs nothing)
"""


@pytest.mark.parametrize(
    "module,name,guards",
    [
        ("pkg.helpers", "eval_mode", True),  # a @contextmanager around torch.no_grad()
        ("pkg.helpers", "no_grad", True),  # an alias of torch.no_grad
        (".helpers", "eval_mode", True),  # through a relative import
        ("pkg.helpers", "timer", False),  # a context manager that does something else
    ],
)
def test_context_manager_helpers(tmp_path, module, name, guards):
    write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS, "pkg/val.py": LOOP.format(module=module, name=name)},
    )
    assert findings(tmp_path) == ([] if guards else [("pkg/val.py", 10, "TL201")])


# -- 3. DataLoader subclasses -----------------------------------------------------------------------

LOADERS = """
from torch.utils.data import DataLoader

class FastLoader(DataLoader):
    pass

class OwnInit(DataLoader):
    def __init__(self, ds, **kw):
        super().__init__(ds, num_workers=8, **kw)
"""
TRAIN_LOADER = """
import torch
import torchvision
from {module} import {name}

device = torch.device("cuda")
model = torchvision.models.resnet18().to(device)
ds = torchvision.datasets.ImageFolder("data/train")
loader = {name}(ds, batch_size=32)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
"""


def test_a_project_dataloader_subclass_is_a_dataloader(tmp_path):
    write(
        tmp_path,
        {"data/loaders.py": LOADERS, "train.py": TRAIN_LOADER.format(module="data.loaders", name="FastLoader")},
    )
    assert ("train.py", 8, "TL302") in findings(tmp_path)


def test_a_subclass_with_its_own_init_is_not_read_as_dataloader_arguments(tmp_path):
    write(
        tmp_path, {"data/loaders.py": LOADERS, "train.py": TRAIN_LOADER.format(module="data.loaders", name="OwnInit")}
    )
    assert findings(tmp_path) == []


def test_a_library_dataloader_subclass_is_a_dataloader(tmp_path):
    write(tmp_path, {"train.py": TRAIN_LOADER.format(module="torch_geometric.loader", name="DataLoader")})
    assert ("train.py", 8, "TL302") in findings(tmp_path)
    write(tmp_path, {"train.py": TRAIN_LOADER.format(module="somelib.loader", name="DataLoader")})
    assert findings(tmp_path) == []


# -- 4. what a function of another file returns or moves -------------------------------------------------

MODELS = """
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

def build(cfg):
    net = Net()
    return net

def build_other(cfg):
    return cfg.thing
"""
DATA = """
from torch.utils.data import DataLoader

def get_loader(ds, bs):
    return DataLoader(ds, batch_size=bs)

def get_other(ds, bs):
    return iter(ds)
"""
RUN = """
import torch
from models import {build}
from data import {get}

def run(weights, ds):
    device = torch.device("cuda")
    enc = {build}(weights).to(device)
    for x, y in {get}(ds, 32):
        out = enc(x.to(device))
        print(out)

run("model.pt", torch.load("data.pt"))
"""


@pytest.mark.parametrize(
    "build,get,expected",
    [
        # a module, run over a DataLoader's batches; the loader factory's own file is told that
        # its loader feeds a GPU elsewhere (no workers, no pinned memory: TL302, TL303)
        (
            "build",
            "get_loader",
            [("data/__init__.py", 4, "TL302"), ("data/__init__.py", 4, "TL303"), ("run.py", 9, "TL201")],
        ),
        # returns something unknown (the loader still feeds a GPU)
        ("build_other", "get_loader", [("data/__init__.py", 4, "TL302"), ("data/__init__.py", 4, "TL303")]),
        ("build", "get_other", []),  # not a DataLoader
    ],
)
def test_what_functions_of_other_files_return(tmp_path, build, get, expected):
    write(
        tmp_path, {"models/__init__.py": MODELS, "data/__init__.py": DATA, "run.py": RUN.format(build=build, get=get)}
    )
    assert findings(tmp_path) == expected


UTILS = """
def to_device(batch, device):
    return {k: v.to(device) for k, v in batch.items()}

def show(batch, device):
    print(batch)
    return batch
"""
PIN = """
import torch
from torch.utils.data import DataLoader
from utils import {helper}

device = torch.device("cuda")
loader = DataLoader(ds, batch_size=32, num_workers=4)
for batch in loader:
    batch = {helper}(batch, device)
    print(batch)
"""


def test_a_helper_of_another_file_that_moves_its_argument(tmp_path):
    # Batches handed to a project helper that moves them: pinned memory would pay (TL303).
    write(tmp_path, {"utils.py": UTILS, "train.py": PIN.format(helper="to_device")})
    assert findings(tmp_path) == [("train.py", 6, "TL303")]
    write(tmp_path, {"train.py": PIN.format(helper="show")})
    assert findings(tmp_path) == []


# -- resolving names -------------------------------------------------------------------------------------


def test_ambiguous_module_names_stay_unknown(tmp_path):
    write(
        tmp_path,
        {
            "a/models/base.py": BACKBONE_MODULE,
            "b/models/base.py": BACKBONE_MODULE,
            "train.py": NET_SCRIPT,
        },
    )
    assert findings(tmp_path) == []  # `models.base` could be either


def test_the_nearest_module_wins(tmp_path):
    write(
        tmp_path,
        {
            "a/models/base.py": BACKBONE_MODULE,
            "a/train.py": NET_SCRIPT,
            "b/models/base.py": BACKBONE_PLAIN,
            "b/train.py": NET_SCRIPT,
        },
    )
    assert findings(tmp_path) == [("a/train.py", 9, "TL101")]


def test_resolution_works_whatever_folder_the_run_starts_at(tmp_path):
    write(tmp_path, {"src/proj/models/base.py": BACKBONE_MODULE, "src/proj/train.py": NET_SCRIPT})
    assert findings(tmp_path) == [("src/proj/train.py", 9, "TL101")]
    assert findings(tmp_path, "src/proj") == [("src/proj/train.py", 9, "TL101")]
    assert findings(tmp_path, "src/proj/models") == []


def test_index_resolution(tmp_path):
    idx = index_of(
        tmp_path,
        {
            "lib/__init__.py": "from .core import *\nfrom . import extra\n",
            "lib/core.py": "import torch.nn as nn\nclass Block(nn.Module):\n    pass\nAlias = Block\n",
            "lib/extra.py": "from torch.utils.data import DataLoader as DL\nclass Loader(DL):\n    pass\n",
            "lib/cycle_a.py": "from .cycle_b import X\n",
            "lib/cycle_b.py": "from .cycle_a import X\n",
            "app/main.py": "",
        },
    )
    view = idx.view(str(tmp_path / "app" / "main.py"))
    assert view.class_kind("lib.Block") is ClassKind.MODULE  # through a star import in __init__
    assert view.class_kind("lib.core.Alias") is ClassKind.MODULE  # a module-level alias
    assert view.class_kind("lib.extra.Loader") is ClassKind.LOADER
    assert view.builds_loader("lib.extra.Loader")
    assert view.class_kind("lib.cycle_a.X") is None  # a cycle of re-exports resolves to nothing
    assert view.class_kind("torch.nn.Conv2d") is ClassKind.MODULE  # a library name
    assert view.class_kind("lightning.LightningModule") is ClassKind.LIGHTNING_MODULE
    assert view.class_kind("numpy.ndarray") is None
    inside = idx.view(str(tmp_path / "lib" / "extra.py"))
    assert inside.class_kind(inside.local("Loader")) is ClassKind.LOADER
    assert inside.class_kind(".core.Block") is ClassKind.MODULE


def test_guard_forms(tmp_path):
    idx = index_of(
        tmp_path,
        {
            "g.py": """
                import functools
                import torch

                def no_grad_dec(fn):
                    @functools.wraps(fn)
                    def wrapper(*args, **kwargs):
                        with torch.no_grad():
                            return fn(*args, **kwargs)
                    return wrapper

                def logged(fn):
                    @functools.wraps(fn)
                    def wrapper(*args, **kwargs):
                        print("call")
                        return fn(*args, **kwargs)
                    return wrapper

                def returns_guard():
                    return torch.inference_mode()

                def chained():
                    return returns_guard()

                ctx = torch.no_grad()
                alias = no_grad_dec
                decorate = returns_guard()
            """,
        },
    )
    view = idx.view(str(tmp_path / "main.py"))
    assert view.guards_grad("g.no_grad_dec", called=False)  # `@no_grad_dec`
    assert not view.guards_grad("g.no_grad_dec", called=True)  # `@no_grad_dec()` would not
    assert not view.guards_grad("g.logged", called=False)
    assert view.guards_grad("g.returns_guard", called=True)
    assert view.guards_grad("g.chained", called=True)  # through another project function
    assert view.guards_grad("g.ctx", called=False) and not view.guards_grad("g.ctx", called=True)
    assert view.guards_grad("g.alias", called=False)
    assert view.guards_grad("g.decorate", called=False)
    assert view.guards_grad("torch.no_grad") and not view.guards_grad("torch.enable_grad")
    assert not view.guards_grad("g.missing")


def test_returns_moves_and_trains(tmp_path):
    idx = index_of(
        tmp_path,
        {
            "f.py": """
                import torch
                from torch.utils.data import DataLoader
                from transformers import AutoModel, AutoTokenizer

                class Net(torch.nn.Module):
                    pass

                def model(cfg):
                    if cfg:
                        return Net().cuda()
                    return AutoModel.from_pretrained(cfg)

                def tokenizer(cfg):
                    return AutoTokenizer.from_pretrained(cfg)

                def mixed(cfg):
                    if cfg:
                        return Net()
                    return DataLoader(cfg)

                def via(cfg):
                    return model(cfg)

                def move(x, device):
                    x = x.to(device)
                    return x

                def forward_move(batch, device=None):
                    return move(batch[0], device=device)

                def step(model, opt):
                    loss = model().sum()
                    loss.backward()
                    opt.step()

                def epoch(model, opt):
                    step(model, opt)
            """,
        },
    )
    view = idx.view(str(tmp_path / "main.py"))
    assert view.returns("f.model") is ValueKind.MODULE
    assert view.returns("f.via") is ValueKind.MODULE
    assert view.returns("f.tokenizer") is None
    assert view.returns("f.mixed") is None  # not one kind
    assert view.moves_argument("f.move", 0) and view.moves_argument("f.move", "x")
    assert not view.moves_argument("f.move", 1)
    assert view.moves_argument("f.forward_move", 0)  # through another project function
    assert view.trains("f.step") and view.trains("f.epoch") and not view.trains("f.move")
    assert view.places_itself("f.Net") is False and view.places_itself("f.model") is None


def test_functions_that_return_a_fresh_cpu_tensor(tmp_path):
    idx = index_of(
        tmp_path,
        {
            "g.py": """
                import functools
                import torch as T
                from torch import zeros

                def rand(n):
                    pts: T.Tensor = T.rand(n, 3)
                    return pts

                @functools.lru_cache()
                def grid(n, flat):
                    if flat:
                        return zeros(n).view(-1, 1)
                    return T.triu(T.ones(n, n)).long()

                def placed(n, device):
                    return T.rand(n, device=device)

                def moved(n):
                    return T.rand(n).cuda()

                def shadowed(T, n):
                    return T.rand(n)

                def reassigned(n):
                    pts = T.rand(n)
                    pts = pts.cuda()
                    return pts

                @to_device
                def decorated(n):
                    return T.rand(n)

                def generated(n):
                    yield T.rand(n)
            """,
        },
    )
    view = idx.view(str(tmp_path / "main.py"))
    assert view.allocates("g.rand") == ("torch.rand",)
    assert view.allocates("g.grid") == ("torch.zeros", "torch.ones")
    for name in ("placed", "moved", "shadowed", "reassigned", "decorated", "generated", "missing"):
        assert view.allocates(f"g.{name}") is None, name


def test_summary_of_unparsable_text_knows_nothing():
    assert not summarize("def f(:\n").parsed
    assert summarize_bytes("nb.ipynb", b"not json").parsed is False


# -- the cache ---------------------------------------------------------------------------------------------


def test_cached_findings_follow_a_change_in_another_file(tmp_path):
    proj = tmp_path / "proj"
    write(
        proj,
        {"models/base.py": BACKBONE_MODULE, "train.py": NET_SCRIPT, "other.py": "import torch\nx = torch.zeros(2)\n"},
    )
    cache = {"cache_root": str(tmp_path)}
    assert findings(proj, **cache) == [("train.py", 9, "TL101")]

    linted: List[str] = []

    def record(fn, items):
        linted.extend(Path(job.path).name for job, _ in items)
        return [fn(item) for item in items]

    assert findings(proj, mapper=record, **cache) == [("train.py", 9, "TL101")]
    assert linted == []  # nothing changed: every result comes from the cache
    write(proj, {"models/base.py": BACKBONE_PLAIN})
    assert findings(proj, mapper=record, **cache) == []  # the base is no module any more
    assert sorted(linted) == ["base.py", "train.py"]  # other.py asked nothing that changed
    linted.clear()
    write(proj, {"models/base.py": BACKBONE_MODULE})
    assert findings(proj, mapper=record, **cache) == [("train.py", 9, "TL101")]
    assert linted == ["train.py"]  # base.py as it was at first: its own result is still cached


def test_a_cached_result_is_not_reused_when_an_imported_file_changes(tmp_path):
    proj = tmp_path / "proj"
    write(proj, {"models/base.py": BACKBONE_MODULE, "train.py": NET_SCRIPT})
    cache = {"cache_root": str(tmp_path)}
    assert findings(proj, **cache) == [("train.py", 9, "TL101")]
    write(proj, {"models/base.py": BACKBONE_PLAIN})  # train.py unchanged: its cached result must not be reused
    assert findings(proj, "train.py", **cache) == []  # alone, it reads the base it imports
    write(proj, {"models/base.py": BACKBONE_MODULE})
    assert findings(proj, "train.py", **cache) == [("train.py", 9, "TL101")]


def test_a_cached_create_then_move_follows_the_other_files_factory(tmp_path):
    # train.py unchanged; the function it imports gains `device=`: the cached finding goes
    proj = tmp_path / "proj"
    sampler = "import torch\ndef noise(n):\n    z = torch.randn(n, 8{device})\n    return z\n"
    script = "import torch\nfrom sampler import noise\nz = noise(4).to('cuda')\n"
    write(proj, {"sampler.py": sampler.format(device=""), "train.py": script})
    cache = {"cache_root": str(tmp_path)}
    assert findings(proj, **cache) == [("train.py", 3, "TL104")]
    write(proj, {"sampler.py": sampler.format(device=", device='cuda'")})
    assert findings(proj, **cache) == []
    assert findings(proj, "train.py", **cache) == []
    write(proj, {"sampler.py": sampler.format(device="")})
    assert findings(proj, "train.py", **cache) == [("train.py", 3, "TL104")]


def test_dependencies_record_questions_and_answers(tmp_path):
    idx = index_of(tmp_path, {"models/base.py": BACKBONE_MODULE, "train.py": ""})
    path = str(tmp_path / "train.py")
    view = idx.view(path)
    assert view.class_kind("models.base.Backbone") is ClassKind.MODULE
    assert not view.guards_grad("models.base.Backbone")
    deps = idx.take_dependencies(path)
    assert deps == (
        Dependency(Question.CLASS_KIND, "models.base.Backbone", None, ClassKind.MODULE),
        Dependency(Question.GUARDS_GRAD, "models.base.Backbone", True, False),
    )
    assert idx.take_dependencies(path) == ()
    assert idx.still_answers(path, deps)
    plain = index_of(tmp_path, {"models/base.py": BACKBONE_PLAIN})
    assert not plain.still_answers(path, deps)


# -- doors: the CLI, a process pool, the text API, an editor's workspace ---------------------------------------


def test_cli_reads_the_project(tmp_path, monkeypatch):
    write(tmp_path, {"utils/torch_utils.py": TORCH_UTILS, "val.py": VAL.format(name="timed")})
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--preview", "--no-cache", "--output-format", "concise", "."])
    assert result.exit_code == 1 and "val.py:10:" in result.output and "TL201" in result.output
    write(tmp_path, {"val.py": VAL.format(name="smart_inference_mode")})
    result = CliRunner().invoke(main, ["check", "--preview", "--no-cache", "--output-format", "concise", "."])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_get_the_index(tmp_path, monkeypatch, method):
    if method not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    monkeypatch.setenv("TORCHLINT_MP_START", method)
    monkeypatch.setattr(parallel, "MIN_POOL_WEIGHT", 0)
    monkeypatch.setattr(parallel, "MIN_POOL_WEIGHT_SPAWN", 0)
    files = {"models/base.py": BACKBONE_MODULE, "train.py": NET_SCRIPT}
    files.update({f"more/m{i}.py": "import torch\nx = torch.ones(1)\n" for i in range(4)})
    write(tmp_path, files)
    assert findings(tmp_path, jobs=2) == [("train.py", 9, "TL101")]


def test_single_text_api(tmp_path):
    # Alone, a text knows its own helpers: a same-file decorator factory guards grad.
    src = textwrap.dedent(TORCH_UTILS) + textwrap.dedent(VAL.format(name="smart_inference_mode")).replace(
        "from utils.torch_utils import smart_inference_mode\n", ""
    )
    assert [f.code for f in api.lint_source(src, "val.py")] == []
    assert [f.code for f in api.lint_source(src.replace("@smart_inference_mode()", "@timed()"), "val.py")] == ["TL201"]
    # Given the project's index, a text is read as part of it.
    write(tmp_path, {"models/base.py": BACKBONE_MODULE, "train.py": NET_SCRIPT})
    train = str(tmp_path / "train.py")
    text = (tmp_path / "train.py").read_text()
    assert [f.code for f in api.lint_source(text, train)] == []
    index = api.project_index([str(tmp_path)])
    assert [f.code for f in api.lint_source(text, train, project=index)] == ["TL101"]


def test_workspace_index_follows_an_editor(tmp_path):
    write(tmp_path, {"models/base.py": BACKBONE_MODULE, "train.py": NET_SCRIPT})
    ws = api.workspace([str(tmp_path)])
    train = str(tmp_path / "train.py")
    text = (tmp_path / "train.py").read_text()
    assert [f.code for f in api.lint_source(text, train, project=ws.index_for(train, text))] == ["TL101"]
    base = str(tmp_path / "models" / "base.py")
    edited = ws.index_for(base, textwrap.dedent(BACKBONE_PLAIN))  # an unsaved edit of the base
    assert [f.code for f in api.lint_source(text, train, project=edited)] == []
    assert ws.index_for(train, text) is edited  # nothing changed since: the same index


def test_facts_record_relative_imports():
    import libcst as cst

    from torchlint.analysis import Analysis

    src = "from .base import Backbone as B\nfrom .. import utils\nfrom . import helpers\n"
    facts = Analysis(cst.parse_module(src), "pkg/net.py", src).facts
    assert facts.aliases == {"B": ".base.Backbone", "utils": "..utils", "helpers": ".helpers"}
    assert facts.qualname(cst.parse_expression("B")) == ".base.Backbone"


def test_index_pickles_without_its_memos(tmp_path):
    import pickle

    idx = index_of(tmp_path, {"models/base.py": BACKBONE_MODULE})
    view = idx.view(str(tmp_path / "x.py"))
    assert view.class_kind("models.base.Backbone") is ClassKind.MODULE
    copy = pickle.loads(pickle.dumps(idx))
    assert copy.take_dependencies(str(tmp_path / "x.py")) == ()
    assert copy.view(str(tmp_path / "x.py")).class_kind("models.base.Backbone") is ClassKind.MODULE
    assert os.path.basename(copy.paths[0]) == "base.py"


def test_a_project_class_wrapping_a_model_takes_its_place(tmp_path):
    # opacus' GradSampleModule shape: a module class of another file built around
    # a model that is already placed: the wrapper is not "built on the CPU".
    write(
        tmp_path,
        {
            "wrap.py": """
                import torch.nn as nn
                class Wrapper(nn.Module):
                    def __init__(self, inner):
                        super().__init__()
                        self.inner = inner
            """,
            "train.py": """
                import torch
                from wrap import Wrapper
                sharded_model = place(build(), "cuda")
                wrapped = Wrapper(sharded_model)
                x = torch.ones(2, device="cuda")
                out = wrapped(x)
                out.sum().backward()
            """,
        },
    )
    assert findings(tmp_path) == []
    write(tmp_path, {"train.py": (tmp_path / "train.py").read_text().replace("Wrapper(sharded_model)", "Wrapper(4)")})
    assert findings(tmp_path) == [("train.py", 4, "TL101")]


def test_a_run_with_no_analysis_rule_skips_the_project_pass(tmp_path):
    from torchlint.files.runner import FileJob, _project_index

    write(tmp_path, {"models/base.py": BACKBONE_MODULE})
    files = [(str(tmp_path / "models" / "base.py"), (tmp_path / "models" / "base.py").read_bytes())]
    syntax_only = [FileJob(files[0][0], frozenset({"TL000"}))]
    assert _project_index(files, [str(tmp_path)], items=syntax_only).paths == ()
    every = [FileJob(files[0][0], frozenset({"TL000", "TL101"}))]
    assert len(_project_index(files, [str(tmp_path)], items=every).paths) == 1


# -- a file no enabled rule may report on is not analysed ---------------------------------------------

FAST_LOADER = """
from torch.utils.data import {base}

class Fast({base}):
    pass
"""
UNNAMED_LOADER = """
import torch
from data.fast import Fast
from data import Quick

device = torch.device("cuda")
it = {cls}(ds, batch_size=32, num_workers=4)
for x, y in it:
    x = x.to(device, non_blocking=True)
    model(x).sum().backward()
"""
ONLY_TL303 = Settings(select=("TL303",))  # without preview mode: the tests use `stable_rule`


@pytest.mark.parametrize("cls", ["Fast", "Quick"])  # a project subclass, and a re-export of it under another name
def test_a_loader_class_of_another_file_is_found_by_the_default_rules(tmp_path, stable_rule, cls):
    # The caller never says "loader": TL303's pre-check asks the index which names build one.
    files = {
        "data/__init__.py": "from .fast import Fast as Quick\n",
        "data/fast.py": FAST_LOADER.format(base="DataLoader"),
        "train.py": UNNAMED_LOADER.format(cls=cls),
    }
    write(tmp_path, files)
    assert findings(tmp_path, settings=ONLY_TL303) == [("train.py", 6, "TL303")]
    assert findings(tmp_path) == [("train.py", 6, "TL303")]
    idx = index_of(tmp_path, files)
    assert idx.loader_names() == ("Fast", "Quick")
    write(tmp_path, {"data/fast.py": FAST_LOADER.format(base="Dataset")})
    assert findings(tmp_path, settings=ONLY_TL303) == []


def test_a_cached_result_skipped_by_the_precheck_follows_a_new_loader_class(tmp_path, stable_rule):
    proj = tmp_path / "proj"
    write(
        proj,
        {
            "data/__init__.py": "",
            "data/fast.py": FAST_LOADER.format(base="Dataset"),
            "train.py": UNNAMED_LOADER.format(cls="Fast").replace("from data import Quick\n", ""),
        },
    )
    cache = {"cache_root": str(tmp_path), "settings": ONLY_TL303}
    assert findings(proj, **cache) == []
    write(proj, {"data/fast.py": FAST_LOADER.format(base="DataLoader")})
    assert findings(proj, **cache) == [("train.py", 5, "TL303")]


# -- functions nothing runs ---------------------------------------------------------------------

SCORES = """
import torch

def {name}(model, loader):
    total = 0.0
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        total += loss.item()
    return total
{extra}"""


@pytest.mark.parametrize(
    "name,extra,train,reported",
    [
        ("fit", "", "", False),  # nothing calls or imports `fit`: it never runs
        ("fit", "", "from tools.metrics import fit\nfit(model, loader)\n", True),
        ("fit", "", "from tools import metrics\nmetrics.fit(model, loader)\n", True),  # the module, imported whole
        ("fit", "", "from tools import metrics\nprint(metrics.other)\n", False),  # ... and nothing reads `fit`
        ("fit", "", "from tools import metrics as m\nrun_all(m)\n", True),  # ... and handed on whole
        ("fit", "", "import tools\ntools.metrics.fit(model, loader)\n", True),  # through the package
        ("fit", "", "def main():\n    from tools.metrics import fit\n    fit(model, loader)\n", True),  # nested
        ("fit", "", "from tools.metricz import fit\nfit(model, loader)\n", False),  # a misspelt module: not this one
        ("fit", "", "from mytools.metrics import fit\nfit(model, loader)\n", True),  # installed as another name?
        ("fit", "__all__ = ['fit']\n", "", True),  # exported by name
        ("fit", "def outer(m, l):\n    return fit(m, l)\n", "", False),  # called only from dead code
        ("fit", "def outer(m, l):\n    return fit(m, l)\nouter(net, data)\n", "", True),
        ("main", "", "", True),  # an entry point's name: a console script may run it
    ],
)
def test_a_function_nothing_calls_or_imports_runs_nothing(tmp_path, name, extra, train, reported):
    files = {"tools/__init__.py": "", "tools/metrics.py": SCORES.format(name=name, extra=extra)}
    write(tmp_path, {**files, "train.py": "import torch\n" + train})
    found = [f for f in findings(tmp_path) if f[0] == "tools/metrics.py" and f[2] == "TL401"]
    assert found == ([("tools/metrics.py", 8, "TL401")] if reported else [])


def test_a_run_over_some_files_of_a_project_cannot_tell_a_function_is_unused(tmp_path):
    # `torchlint tools/metrics.py` (pre-commit's changed files, an editor's buffer) reads
    # only the importers it finds: it cannot know that no file uses `fit`.
    write(tmp_path, {"tools/__init__.py": "", "tools/metrics.py": SCORES.format(name="fit", extra=""), "train.py": ""})
    assert [f[2] for f in findings(tmp_path, "tools/metrics.py")] == ["TL401"]


def test_a_function_of_a_project_of_one_file_may_be_called_from_outside(tmp_path):
    write(tmp_path, {"metrics.py": SCORES.format(name="fit", extra="")})
    assert [f for f in findings(tmp_path) if f[2] == "TL401"] == [("metrics.py", 8, "TL401")]


TRAINER = """
import torch

class Trainer:
    def __init__(self, model, loader):
        self.model = model.cuda()
        self.loader = loader

    def infer(self, batch):
        return self._one_pass(batch)

    def _one_pass(self, batch):
        self.model.eval()
        outs = []
        for x in self.loader:
            outs.append(self.model(x.cuda()))
        return outs
"""
CALLBACK = """
import torch

class Validation:
    def __init__(self, model):
        self.model = model

    def on_epoch_end(self, batch):
        {body}
"""


@pytest.mark.parametrize(
    "body,reported",
    [
        ("with torch.no_grad():\n            return self.model.infer(batch)", False),  # every call is guarded
        ("with torch.inference_mode():\n            return self.model.infer(batch)", False),
        ("return self.model.infer(batch)", True),  # a call with autograd on
    ],
)
def test_a_method_every_project_call_of_which_runs_under_no_grad_is_guarded(tmp_path, body, reported):
    write(tmp_path, {"trainer.py": TRAINER, "callbacks.py": CALLBACK.format(body=body)})
    found = [f for f in findings(tmp_path) if f[2] == "TL201"]
    assert found == ([("trainer.py", 15, "TL201")] if reported else [])


def test_a_run_over_the_trainer_alone_cannot_see_its_callers_guard(tmp_path):
    body = "with torch.no_grad():\n            return self.model.infer(batch)"
    write(tmp_path, {"trainer.py": TRAINER, "callbacks.py": CALLBACK.format(body=body)})
    assert [f[2] for f in findings(tmp_path, "trainer.py") if f[2] == "TL201"] == ["TL201"]
