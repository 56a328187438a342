"""A `torch.cuda.synchronize()` every step of a loop over what a logger's method
yields and times (`for x, y in metric_logger.log_every(loader, 10):`, the
MetricLogger of DeiT, MAE, DINO and ConvNeXt, whose `log_every` reads
`time.time()` around each step): timing code, silent (mae engine_finetune.py:72,
dino eval_linear.py:186, ConvNeXt engine.py:85). A training loop that
synchronizes with no clock anywhere is reported (srviest char-cnn train.py:124)."""

from torchlint.analysis.project.summary import summarize

from helpers import lint_in_project, lint_source

_MISC = """\
import time

class MetricLogger(object):
    def __init__(self, delimiter="\\t"):
        self.delimiter = delimiter

    def log_every(self, iterable, print_freq, header=None):
        end = time.time()
        for obj in iterable:
            yield obj
            print(header, time.time() - end)
            end = time.time()

class Counter(object):
    def log_every(self, iterable, print_freq, header=None):
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0:
                print(header, i)
"""

_ENGINE = """\
import torch
import util.misc as misc

def train_one_epoch(model, criterion, data_loader, optimizer, device):
    metric_logger = misc.MetricLogger(delimiter="  ")
    for samples, targets in metric_logger.log_every(data_loader, 10, "Epoch"):
        samples = samples.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        loss = criterion(model(samples), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
"""

_MAIN = """\
import torch
from engine import train_one_epoch

model = torch.nn.Linear(4, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    train_one_epoch(model, torch.nn.CrossEntropyLoss(), loader, optimizer, "cuda")
"""


def tl403(tmp_path, engine: str) -> list:
    files = {"util/__init__.py": "", "util/misc.py": _MISC, "engine.py": engine, "main.py": _MAIN}
    return [f.row for f in lint_in_project(tmp_path, files, "engine.py") if f.code == "TL403"]


def test_the_summary_records_which_methods_read_a_clock():
    (logger, counter) = summarize(_MISC).classes
    assert [m.function.times for m in logger.methods] == [True]
    assert [m.function.times for m in counter.methods] == [False]


def test_a_loop_over_a_timing_loggers_steps_may_synchronize(tmp_path):
    assert tl403(tmp_path, _ENGINE) == []
    # through enumerate(...), as ConvNeXt writes it
    wrapped = _ENGINE.replace(
        'for samples, targets in metric_logger.log_every(data_loader, 10, "Epoch"):',
        'for step, (samples, targets) in enumerate(metric_logger.log_every(data_loader, 10, "Epoch")):',
    )
    assert tl403(tmp_path, wrapped) == []


def test_a_logger_that_reads_no_clock_times_nothing(tmp_path):
    counted = _ENGINE.replace('misc.MetricLogger(delimiter="  ")', "misc.Counter()")
    assert tl403(tmp_path, counted) == [13]


def test_a_same_file_timing_logger(tmp_path):
    same_file = (
        _MISC
        + _ENGINE.replace("import util.misc as misc\n", "").replace("misc.MetricLogger", "MetricLogger")
        + "train_one_epoch(model, criterion, loader, optimizer, 'cuda')\n"
    )
    rows = [f.row for f in lint_source(same_file, str(tmp_path / "engine.py")) if f.code == "TL403"]
    assert rows == []
    counted = same_file.replace('MetricLogger(delimiter="  ")', "Counter()")
    rows = [f.row for f in lint_source(counted, str(tmp_path / "engine.py")) if f.code == "TL403"]
    assert rows == [counted.splitlines().index("        torch.cuda.synchronize()") + 1]


def test_a_training_loop_synchronizing_with_no_clock_is_reported():
    # srviest char-cnn train.py:124: `if args.cuda: torch.cuda.synchronize()` after the step
    src = """\
import torch

def train(train_loader, model, optimizer, args):
    for epoch in range(args.epochs):
        for i_batch, (inputs, target) in enumerate(train_loader):
            if args.cuda:
                inputs, target = inputs.cuda(), target.cuda()
            loss = torch.nn.functional.nll_loss(model(inputs), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.cuda:
                torch.cuda.synchronize()
"""
    assert [f.row for f in lint_source(src, "train.py") if f.code == "TL403"] == [13]
