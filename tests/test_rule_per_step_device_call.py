"""TL403 per-step-device-call: empty_cache, synchronize and checkpoint saves every step."""

import textwrap

from helpers import lint_source

HEAD = """\
import time
import torch
import torch.nn as nn
device = torch.device("cuda")
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.CrossEntropyLoss()
"""


def rows(src, path="train.py"):
    return [f.row for f in lint_source(HEAD + textwrap.dedent(src), path) if f.code == "TL403"]


def test_every_step():
    assert rows(
        """\
        for x, y in loader:
            crit(model(x.to(device)), y.to(device)).backward()
            opt.step()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            state = {"model": model.state_dict(), "opt": opt.state_dict()}
            torch.save(state, "last.pt")
        """
    ) == [12, 14]
    # in a helper the training loop calls every step: reported at the call
    assert rows(
        """\
        def step(x, y):
            crit(model(x.to(device)), y.to(device)).backward()
            opt.step()
            torch.cuda.empty_cache()
        for x, y in loader:
            step(x, y)
        """
    ) == [13]
    # a training function that synchronizes with no clock in sight times nothing:
    # the sync is pure cost, reported at the call (srviest char-cnn train.py:124)
    assert rows(
        """\
        def step(x, y):
            crit(model(x.to(device)), y.to(device)).backward()
            torch.cuda.synchronize()
        for x, y in loader:
            step(x, y)
        """
    ) == [12]
    # one that reads a clock around it is timing code (roles): not reported
    assert not rows(
        """\
        def step(x, y):
            t0 = time.time()
            crit(model(x.to(device)), y.to(device)).backward()
            torch.cuda.synchronize()
            print(time.time() - t0)
        for x, y in loader:
            step(x, y)
        """
    )
    # a script that only runs the model and synchronizes is a latency benchmark (roles): not reported
    assert not rows(
        """\
        with torch.no_grad():
            for x, y in loader:
                out = model(x.to(device))
                torch.cuda.synchronize()
        """
    )


def test_timing_guards_and_epochs_are_left_alone():
    # timing with CUDA events
    assert not rows(
        """\
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for x, y in loader:
            start.record()
            crit(model(x.to(device)), y.to(device)).backward()
            end.record()
            torch.cuda.synchronize()
            print(start.elapsed_time(end))
        """
    )
    # every N steps, or once the loss improves
    assert not rows(
        """\
        for step, (x, y) in enumerate(loader):
            crit(model(x.to(device)), y.to(device)).backward()
            if step % 500 == 0:
                torch.cuda.empty_cache()
                torch.save(model.state_dict(), "ck.pt")
        """
    )
    # after the batch loop, once per epoch
    assert not rows(
        """\
        for epoch in range(10):
            for x, y in loader:
                crit(model(x.to(device)), y.to(device)).backward()
                opt.step()
            torch.save(model.state_dict(), f"epoch{epoch}.pt")
            torch.cuda.empty_cache()
        """
    )
    # a loop that does no model work
    assert not rows("for path in paths:\n    torch.save(model.state_dict(), path)\n")
    # a benchmark file
    assert not rows(
        "for x, y in loader:\n    model(x.to(device)).sum().backward()\n    torch.cuda.synchronize()\n",
        "benchmarks/bench_train.py",
    )


def test_saves_of_other_values_are_left_alone():
    assert not rows(
        """\
        for i, (x, y) in enumerate(loader):
            out = model(x.to(device))
            crit(out, y.to(device)).backward()
            torch.save(out.detach().cpu(), f"pred{i}.pt")
        """
    )


def test_no_fix_offered():
    src = HEAD + "for x, y in loader:\n    model(x.to(device)).sum().backward()\n    torch.cuda.empty_cache()\n"
    found = [f for f in lint_source(src, "train.py") if f.code == "TL403"]
    assert found and all(f.fix is None for f in found)
