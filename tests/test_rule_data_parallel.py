"""TL601 data-parallel: nn.DataParallel in a training script."""

import textwrap

from helpers import lint_source

HEAD = """\
import torch
import torch.nn as nn
net = nn.Linear(4, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
"""


def rows(src, path="train.py"):
    return [f.row for f in lint_source(HEAD + textwrap.dedent(src), path) if f.code == "TL601"]


def test_training_script():
    assert rows(
        """\
        model = nn.DataParallel(net, device_ids=[0, 1]).cuda()
        for x, y in loader:
            opt.zero_grad()
            model(x.cuda()).sum().backward()
            opt.step()
        """
    ) == [5]
    # fully qualified, and the training loop in a same-file helper
    assert rows(
        """\
        def train_epoch(model):
            for x, y in loader:
                model(x.cuda()).sum().backward()
                opt.step()
        def main():
            model = torch.nn.parallel.DataParallel(net).cuda()
            for epoch in range(3):
                train_epoch(model)
        """
    ) == [10]


def test_files_that_do_not_train_are_left_alone():
    # inference only
    assert not rows(
        """\
        model = nn.DataParallel(net).cuda().eval()
        with torch.no_grad():
            for x, y in loader:
                out = model(x.cuda())
        """
    )
    # a library helper that wraps whatever it is given
    assert not rows("def parallelize(m):\n    return nn.DataParallel(m) if torch.cuda.device_count() > 1 else m\n")
    # unwrapping, not wrapping
    assert not rows(
        """\
        model = net.cuda()
        if isinstance(model, nn.DataParallel):
            model = model.module
        for x, y in loader:
            model(x.cuda()).sum().backward()
            opt.step()
        """
    )


def test_tests_and_benchmarks_are_left_alone():
    src = """\
        model = nn.DataParallel(net).cuda()
        for x, y in loader:
            model(x.cuda()).sum().backward()
            opt.step()
        """
    assert rows(src) == [5]
    assert not rows(src, "tests/test_parallel.py")
    assert not rows(src, "benchmarks/bench_parallel.py")


def test_a_local_class_is_not_torch_s():
    assert not rows(
        """\
        class DataParallel(nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m
        model = DataParallel(net)
        for x, y in loader:
            model(x).sum().backward()
            opt.step()
        """
    )


def test_no_fix_and_the_message_points_at_ddp():
    src = HEAD + "model = nn.DataParallel(net)\nfor x, y in loader:\n    model(x).sum().backward()\n    opt.step()\n"
    found = [f for f in lint_source(src, "train.py") if f.code == "TL601"]
    assert len(found) == 1 and found[0].fix is None
    assert "DistributedDataParallel" in found[0].message and "ddp_tutorial" in found[0].message


def test_inference_wraps_and_gradients_only_read_are_not_training():
    # an evaluation function wrapping a reloaded model, beside a training loop (first sight, rows 46-57)
    assert rows(
        """\
        def evaluate(model, loader):
            model = nn.DataParallel(model)
            with torch.no_grad():
                for x, y in loader:
                    model(x.cuda())
        def train(model, loader):
            model = nn.DataParallel(model)
            for x, y in loader:
                model(x.cuda()).sum().backward()
                opt.step()
        """
    ) == [11]
    # gradients taken to score heads, no optimizer steps: not a training script
    src = """\
        model = nn.DataParallel(net).cuda()
        for x, y in loader:
            model(x.cuda()).sum().backward()
            scores += head_mask.grad.abs()
        """
    assert rows(src.replace("opt = torch.optim", "# opt = torch.optim")) == []


def test_a_script_whose_optimizer_steps_through_an_amp_scaler_trains():
    # yolov7 train.py:237: the only step is `scaler.step(optimizer)`
    src = """\
        scaler = torch.cuda.amp.GradScaler()
        if torch.cuda.device_count() > 1:
            model = torch.nn.DataParallel(net)
        for x, y in loader:
            scaler.scale(model(x.cuda()).sum()).backward()
            scaler.step(opt)
            scaler.update()
        """
    assert rows(src) == [7]
    # gradients scaled and read, no optimizer stepped: no training
    assert rows(src.replace("scaler.step(opt)", "scaler.unscale_(opt)")) == []
