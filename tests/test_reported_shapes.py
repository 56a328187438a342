"""The shapes of the mistakes users report (issue 39), each on a small realistic
program, linted as a project with every rule on: what the linter reports on
them today, and where it stays silent on purpose (a `ModuleList`, a registered
buffer, a model a caller moves, a metrics object that detaches), each silence
paired with the same program carrying a mistake the linter reports, so that
either half can fail.

Only shapes the linter finds today are asserted here; the shapes it does not
find yet are listed in docs/accuracy.md ("Mistakes users report: the shapes,
on real instances"), not written as failing tests."""

import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from torchlint.files.runner import run as run_files

from helpers import EVERY_RULE

Found = List[Tuple[str, int, str]]


def lint(root: Path, files: Dict[str, str]) -> Found:
    """(file relative to root, row, code) of every finding of a run over the
    project `files` written under `root`, every rule on (as `--preview`)."""
    for name, src in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(src).lstrip("\n"), encoding="utf-8")
    result = run_files([str(root)], EVERY_RULE)
    assert not result.problems, result.problems
    return [(Path(f.path).relative_to(root).as_posix(), f.row, f.code) for f in result.findings]


def messages(root: Path, code: str) -> List[str]:
    result = run_files([str(root)], EVERY_RULE)
    return [f.message for f in result.findings if f.code == code]


# A training loop over a pinned, multi-worker loader, the model on the GPU: nothing
# in it is a mistake, so what a test reports comes from the shape it adds.
STEP = """
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
SETUP = """
device = torch.device("cuda")
model = {model}
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
"""


# -- 1. placement through objects ------------------------------------------------------------------

WEIGHTED_NET = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)
        {weights}

    def forward(self, x):
        return self.fc(x) * self.class_weights
"""


@pytest.mark.parametrize(
    "weights,expected",
    [
        # a plain tensor attribute: `model.to(device)` leaves it on the CPU, the forward fails
        ("self.class_weights = torch.ones(4)", [("train.py", 8, "TL102")]),
        # the same tensor registered as a buffer moves with the model: silent
        ('self.register_buffer("class_weights", torch.ones(4))', []),
    ],
    ids=["plain-attribute", "registered-buffer"],
)
def test_a_plain_tensor_attribute_is_left_behind_a_registered_buffer_is_not(tmp_path, weights, expected):
    src = WEIGHTED_NET.format(weights=weights) + SETUP.format(model="Net().to(device)") + STEP
    assert lint(tmp_path, {"train.py": src}) == expected


def test_the_plain_attribute_message_says_to_register_a_buffer(tmp_path):
    src = WEIGHTED_NET.format(weights="self.class_weights = torch.ones(4)") + SETUP.format(model="Net().to(device)")
    lint(tmp_path, {"train.py": src + STEP})
    (message,) = messages(tmp_path, "TL102")
    assert "plain attribute of `Net`" in message and "register it as a buffer" in message


LAYERED_NET = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)
"""


@pytest.mark.parametrize(
    "model,expected",
    [
        # layers in a ModuleList are submodules: `model.to(device)` moves them, silent
        ("Net().to(device)", []),
        # the same model never moved, its inputs on the device: the forward fails
        ("Net()", [("train.py", 16, "TL101")]),
    ],
    ids=["module-list-moved", "module-list-not-moved"],
)
def test_a_module_list_model_moved_is_silent(tmp_path, model, expected):
    assert lint(tmp_path, {"train.py": LAYERED_NET + SETUP.format(model=model) + STEP}) == expected


MODELS = """
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x)
"""
TRAINER = """
import torch
import torch.nn as nn

class Trainer:
    def __init__(self, model, loader, device):
        self.model = model
        self.loader = loader
        self.device = device
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def fit(self):
        for x, y in self.loader:
            x, y = x.to(self.device), y.to(self.device)
            loss = nn.functional.cross_entropy(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
"""
MAIN = """
import torch
from models import Net
from trainer import Trainer

device = torch.device("cuda")
model = {model}
loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
Trainer(model, loader, device).fit()
"""


@pytest.mark.parametrize(
    "model,expected",
    [
        # the model arrives as a parameter of a trainer in another file; the one caller moves it
        ("Net().to(device)", []),
        # ... and no caller moves it: reported where the trainer keeps it
        ("Net()", [("trainer.py", 6, "TL101")]),
    ],
    ids=["caller-moves", "no-caller-moves"],
)
def test_a_model_handed_to_a_trainer_of_another_file(tmp_path, model, expected):
    files = {"models.py": MODELS, "trainer.py": TRAINER, "main.py": MAIN.format(model=model)}
    assert lint(tmp_path, files) == expected
    if expected:
        (message,) = messages(tmp_path, "TL101")
        assert "every caller hands `Trainer` a model it never moves (`Net(...)` in main.py)" in message


# -- 2. accumulation across steps ----------------------------------------------------------------

HISTORY = (
    """
import torch
import torch.nn as nn
"""
    + SETUP.format(model="nn.Linear(16, 4).to(device)")
    + """
history = []
for x, y in loader:
    x, y = x.to(device), y.to(device)
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    history.append({kept})
"""
)


@pytest.mark.parametrize(
    "kept,expected",
    [
        ("out", [("train.py", 17, "TL202")]),  # every step's graph stays alive in the list
        ("out.detach()", []),
    ],
    ids=["output-with-graph", "detached-output"],
)
def test_history_append_of_an_output_with_its_graph(tmp_path, kept, expected):
    assert lint(tmp_path, {"train.py": HISTORY.format(kept=kept)}) == expected


METERS = """
class AverageMeter:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.total += {added}
        self.count += n

    @property
    def avg(self):
        return self.total / max(self.count, 1)
"""
METERED_LOOP = (
    """
import torch
import torch.nn as nn
from meters import AverageMeter
"""
    + SETUP.format(model="nn.Linear(16, 4).to(device)")
    + """
meter = AverageMeter()
total = 0.0
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    {accumulate}
print(meter.avg, total)
"""
)


@pytest.mark.parametrize(
    "added,accumulate,expected",
    [
        # a metrics object of another file that detaches what it adds up: silent
        ("value.detach() * n", "meter.update(loss, x.size(0))", []),
        # ... or that is handed `.item()`: a host read per step is TL401's business, not TL202's
        ("value * n", "meter.update(loss.item(), x.size(0))", [("train.py", 18, "TL401")]),
        # the same loop adding the loss up itself, graph and all: TL202 (a meter that adds
        # `value` up graph and all is not found yet: docs/accuracy.md)
        ("value.detach() * n", "total += loss", [("train.py", 18, "TL202")]),
        ("value.detach() * n", "total += loss.detach()", []),
    ],
    ids=["meter-detaches", "meter-gets-item", "running-total-with-graph", "running-total-detached"],
)
def test_a_metrics_object_that_detaches_is_silent(tmp_path, added, accumulate, expected):
    files = {"meters.py": METERS.format(added=added), "train.py": METERED_LOOP.format(accumulate=accumulate)}
    assert lint(tmp_path, files) == expected


# -- 3. aliases of the APIs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "imported,call,message",
    [
        ("from torch.cuda import empty_cache as free", "free()", "returns the cached blocks to the driver"),
        ("from torch.cuda import synchronize", "synchronize()", "the host waits for the GPU to drain"),
    ],
    ids=["empty_cache-as-free", "synchronize-imported"],
)
def test_a_device_call_imported_under_another_name_runs_every_step(tmp_path, imported, call, message):
    src = "import torch\nimport torch.nn as nn\n" + imported + "\n" + SETUP.format(model="nn.Linear(16, 4).to(device)")
    src += STEP + "    " + call + "\n"
    assert lint(tmp_path, {"train.py": src}) == [("train.py", 16, "TL403")]
    (found,) = messages(tmp_path, "TL403")
    assert message in found


LOADERS = """
from torch.utils.data import DataLoader

class FastLoader(DataLoader):
    pass
"""
SUBCLASSED = (
    """
import torch
import torch.nn as nn
from loaders import FastLoader

device = torch.device("cuda")
model = nn.Linear(16, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = FastLoader(dataset, batch_size=32)
"""
    + STEP
)


def test_a_project_dataloader_subclass_of_another_file(tmp_path):
    # no workers, no pinned memory, through a subclass the caller names
    assert lint(tmp_path, {"loaders.py": LOADERS, "train.py": SUBCLASSED}) == [
        ("train.py", 8, "TL302"),
        ("train.py", 8, "TL303"),
    ]


WRAPPED = (
    """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

def make_loader(ds, batch_size):
    return DataLoader(ds, batch_size=batch_size, shuffle=True)

device = torch.device("cuda")
model = nn.Linear(16, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = make_loader(dataset, 32)
"""
    + STEP
)


def test_a_dataloader_built_by_a_wrapper_of_the_same_file(tmp_path):
    assert lint(tmp_path, {"train.py": WRAPPED}) == [("train.py", 6, "TL302"), ("train.py", 6, "TL303")]


# -- 4. per-step work in helpers called every step -------------------------------------------------

CHECKED = (
    """
import torch
import torch.nn as nn
"""
    + SETUP.format(model="nn.Linear(16, 4).to(device)")
    + """
def check_finite(loss):
    if loss.item() != loss.item():
        raise RuntimeError("loss is NaN")

for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    check_finite(loss)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
)


def test_a_host_read_in_a_helper_the_loop_calls(tmp_path):
    # reported at the call: the helper syncs every step
    assert lint(tmp_path, {"train.py": CHECKED}) == [("train.py", 16, "TL401")]
    (message,) = messages(tmp_path, "TL401")
    assert "`check_finite()` reads a device tensor on the host" in message


PER_SAMPLE_LOSS = (
    """
import torch
import torch.nn as nn

def per_sample_loss(pred, target):
    total = 0.0
    for i in range(pred.size(0)):
        total = total + (pred[i] - target[i]).abs().sum()
    return total / pred.size(0)
"""
    + SETUP.format(model="nn.Linear(16, 4).to(device)")
    + STEP.replace("nn.functional.cross_entropy(model(x), y)", "per_sample_loss(model(x), y)")
)


def test_a_python_loop_over_the_batch_inside_a_loss(tmp_path):
    assert lint(tmp_path, {"train.py": PER_SAMPLE_LOSS}) == [("train.py", 6, "TL402")]


RANDOM_BATCHES = """
import torch
import torch.nn as nn

device = torch.device("cuda")
model = nn.Linear(16, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data_x = torch.randn(10000, 16, device=device)
data_y = torch.randint(0, 4, (10000,), device=device)
for step in range(1000):
    idx = torch.randint(0, 10000, (32,)).to(device)
    x, y = data_x[idx], data_y[idx]
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_random_indices_drawn_on_the_host_every_step(tmp_path):
    assert lint(tmp_path, {"train.py": RANDOM_BATCHES}) == [("train.py", 10, "TL104")]


MASKED = """
import torch
import torch.nn as nn

device = torch.device("cuda")
model = Decoder().to(device)
opt = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
for src, tgt in loader:
    src, tgt = src.to(device), tgt.to(device)
    mask = (tgt != 0).unsqueeze(-2)
    mask = mask & torch.ones(1, tgt.size(-1), tgt.size(-1)).tril().type_as(mask)
    loss = model(src, tgt, mask)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_mask_built_on_the_host_and_moved_by_type_as(tmp_path):
    # the factory written in the loop; through a `subsequent_mask(n)` helper it is not found yet
    assert lint(tmp_path, {"train.py": MASKED}) == [("train.py", 11, "TL104")]


# -- 5. split statements -------------------------------------------------------------------------


def test_a_factory_then_its_move_in_the_next_statement(tmp_path):
    src = 'import torch\n\ndevice = torch.device("cuda")\nn = 1024\nbuf = torch.zeros(n)\nstate = buf.cuda()\n'
    assert lint(tmp_path, {"train.py": src + "print(state.sum())\n"}) == [("train.py", 5, "TL104")]


EVALUATE = """
import torch
import torch.nn as nn

device = torch.device("cuda")
model = nn.Linear(16, 4).to(device)
val_loader = torch.utils.data.DataLoader(val_ds, batch_size=32, num_workers=4, pin_memory=True)

def evaluate(model, val_loader):
    with torch.no_grad():
        model.eval()
{loop}
    return correct.item()

print(evaluate(model, val_loader))
"""
EVAL_LOOP = """
    correct = 0
    for x, y in val_loader:
        x, y = x.to(device), y.to(device)
        pred = model(x).argmax(1)
        correct += (pred == y).sum()
"""


@pytest.mark.parametrize(
    "loop,expected",
    [
        # no_grad around `model.eval()` only, the forward after the block
        (EVAL_LOOP, [("train.py", 14, "TL201")]),
        # the forward inside the block
        (textwrap.indent(EVAL_LOOP, "    "), []),
    ],
    ids=["forward-after-the-block", "forward-inside-the-block"],
)
def test_no_grad_around_model_eval_only(tmp_path, loop, expected):
    assert lint(tmp_path, {"train.py": EVALUATE.format(loop=loop.strip("\n"))}) == expected


EVAL_SCRIPT = """
import torch
import torch.nn as nn

device = torch.device("cuda")
model = nn.Linear(16, 4).to(device)
model.load_state_dict(torch.load("model.pt"))
val_loader = torch.utils.data.DataLoader(val_ds, batch_size=32, num_workers=4, pin_memory=True)
with torch.no_grad():
    model.eval()
{loop}
print(correct.item())
"""


@pytest.mark.parametrize(
    "loop,expected",
    [
        (textwrap.dedent(EVAL_LOOP), [("eval.py", 13, "TL201")]),
        (textwrap.indent(textwrap.dedent(EVAL_LOOP), "    "), []),
    ],
    ids=["forward-after-the-block", "forward-inside-the-block"],
)
def test_no_grad_around_model_eval_only_in_an_evaluation_script(tmp_path, loop, expected):
    # a checkpointed model evaluated at module level
    src = EVAL_SCRIPT.format(loop=loop.strip("\n"))
    assert lint(tmp_path, {"eval.py": src}) == expected


PARALLEL = """
import torch
import torch.nn as nn

def DataParallel(module, device_ids=None, chunk_sizes=None):
    if chunk_sizes is None:
        return torch.nn.DataParallel(module, device_ids)
    return _ChunkedParallel(module, device_ids, chunk_sizes)

def Distributed(module, rank):
    return nn.parallel.DistributedDataParallel(module, device_ids=[rank])

class _ChunkedParallel(nn.Module):
    def __init__(self, module, device_ids, chunk_sizes):
        super().__init__()
        self.module = module
"""
WRAPPED_BY_A_PROJECT_FUNCTION = (
    """
import torch
import torch.nn as nn
from parallel import {wrap}

device = torch.device("cuda")
model = {wrap}(nn.Linear(16, 4), {args}).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
"""
    + STEP
)


@pytest.mark.parametrize(
    "wrap, args, expected",
    [
        # a function of another file named like torch's, returning torch's on one path
        ("DataParallel", "device_ids=[0, 1]", [("train.py", 6, "TL601")]),
        # a function of another file returning DistributedDataParallel: the recommended wrap
        ("Distributed", "0", []),
    ],
)
def test_data_parallel_built_by_a_function_of_another_file(tmp_path, wrap, args, expected):
    src = WRAPPED_BY_A_PROJECT_FUNCTION.format(wrap=wrap, args=args)
    found = lint(tmp_path, {"parallel.py": PARALLEL, "train.py": src})
    assert [f for f in found if f[2] == "TL601"] == expected


HELD_BY_A_TRAINER = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

class Trainer:
    def __init__(self, train_loader, epochs):
        self.train_loader = train_loader
        self.epochs = epochs
        self.model = nn.Linear(16, 4).cuda()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def train(self):
        for epoch in range(self.epochs):
            self.train_epoch()

    def train_epoch(self):
        for x, y in self.train_loader:
            loss = nn.functional.cross_entropy(self.model(x.cuda()), y.cuda())
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)
Trainer(loader, 90).train()
"""


@pytest.mark.parametrize(
    "change, expected",
    [
        # the loader kept by a trainer of the same file, iterated in a method every epoch
        (("", ""), [("train.py", 23, "TL304")]),
        # the trainer builds its own loader again each pass: which one a loop sees is not known
        (
            ("    def train(self):\n", "    def train(self):\n        self.train_loader = DataLoader(dataset)\n"),
            [],
        ),
        # persistent workers
        (("pin_memory=True)", "pin_memory=True, persistent_workers=True)"), []),
    ],
)
def test_a_loader_kept_by_a_trainer_class(tmp_path, change, expected):
    src = HELD_BY_A_TRAINER.replace(*change)
    assert [f for f in lint(tmp_path, {"train.py": src}) if f[2] == "TL304"] == expected


VALIDATION = """
import torch

def validate(val_loader, model, verbose=False):
    model.eval()
    with torch.no_grad():
        for i, (images, target) in enumerate(val_loader):
            model(images.cuda(non_blocking=True))

def maybe_validate(val_loader, model, verbose=False):
    if verbose:
        for images, target in val_loader:
            model(images.cuda(non_blocking=True))

def run_over(items, model):
    for images, target in items:
        model(images.cuda(non_blocking=True))

def validate_dataset(val_loader, model):
    run_over(val_loader.dataset, model)

def validate_rebatched(val_loader, model):
    val_loader = torch.utils.data.DataLoader(val_loader.dataset, batch_size=64)
    for images, target in val_loader:
        model(images.cuda(non_blocking=True))
"""
VALIDATED_EACH_EPOCH = (
    """
import torch
import torch.nn as nn
from validation import {helper}

device = torch.device("cuda")
model = nn.Linear(16, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)
val_loader = torch.utils.data.DataLoader(valset, batch_size=32, num_workers=4, pin_memory=True)
for epoch in range(90):
"""
    + textwrap.indent(STEP.strip("\n"), "    ")
    + "\n    {helper}(val_loader, model)\n"
)


@pytest.mark.parametrize(
    "helper, expected",
    [
        # a function of another file iterating the loader it is handed, called every epoch
        ("validate", [("train.py", 9, "TL304")]),
        # one that iterates it only under a setting
        ("maybe_validate", []),
        # one that hands a part of it on (its dataset), or iterates a loader of its own
        ("validate_dataset", []),
        ("validate_rebatched", []),
    ],
)
def test_a_loader_iterated_by_a_function_of_another_file_every_epoch(tmp_path, helper, expected):
    src = VALIDATED_EACH_EPOCH.replace("{helper}", helper)
    found = lint(tmp_path, {"validation.py": VALIDATION, "train.py": src})
    assert [f for f in found if f[2] == "TL304"] == expected
