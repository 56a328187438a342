"""TL106 move-in-loop: modules and loop-invariant tensors moved every step."""

import textwrap

import pytest

from helpers import fix_source, lint_source, run_fixed_pair

HEAD = """\
import torch
import torch.nn as nn
device = torch.device("cuda")
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.CrossEntropyLoss()
mask = torch.ones(2)
"""


def rows(src, path="train.py"):
    return [f.row for f in lint_source(HEAD + textwrap.dedent(src), path) if f.code == "TL106"]


def test_module_and_constant_moved_every_step():
    assert rows(
        """\
        for x, y in loader:
            model.to(device)
            out = model(x.to(device)) * mask.to(device)
            crit(out, y.to(device)).backward()
            opt.step()
        """
    ) == [9, 10]


def test_values_that_change_are_left_alone():
    # the receiver is the loop's batch, or bound from it
    assert not rows(
        """\
        for x, y in loader:
            z = x * 2
            out = model(z.to(device))
            crit(out, y.to(device)).backward()
            opt.step()
        """
    )
    # the device changes in the loop
    assert not rows(
        """\
        for i, (x, y) in enumerate(loader):
            dev = devices[i % 2]
            out = model(x.to(dev)) * mask.to(dev)
            crit(out, y.to(dev)).backward()
            opt.step()
        """
    )
    # a function the loop calls may change the tensor in place
    assert not rows(
        """\
        def decay():
            mask.mul_(0.9)
        for x, y in loader:
            decay()
            out = model(x.to(device)) * mask.to(device)
            crit(out, y.to(device)).backward()
            opt.step()
        """
    )
    # a `global` rebinding elsewhere
    assert not rows(
        """\
        def reset():
            global mask
            mask = torch.zeros(2)
        for x, y in loader:
            out = model(x.to(device)) * mask.to(device)
            crit(out, y.to(device)).backward()
            opt.step()
        """
    )
    # a dtype conversion of the module, under a branch
    assert not rows(
        """\
        for step, (x, y) in enumerate(loader):
            if step == warmup:
                model.to(device)
            crit(model(x.to(device)), y.to(device)).backward()
            opt.step()
        """
    )


def test_not_a_step_loop_not_a_test():
    # a loop over files, no model work
    assert not rows("for path in paths:\n    t = mask.to(device)\n    save(t, path)\n")
    src = "for x, y in loader:\n    model.to(device)\n    crit(model(x.to(device)), y.to(device)).backward()\n"
    assert not rows(src, "tests/test_train.py")
    # no accelerator in play
    cpu = "import torch\nmodel = torch.nn.Linear(2, 2)\nfor x in loader:\n    model.to('cpu')\n    model(x).sum().backward()\n"
    assert [f for f in lint_source(cpu, "train.py") if f.code == "TL106"] == []


@pytest.mark.slow
def test_fixed_script_runs_and_prints_the_same(tmp_path):
    src = textwrap.dedent(
        """\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        torch.manual_seed(0)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(4, 2).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        weights = torch.tensor([0.25, 0.75])
        loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=8)


        def train():
            total = 0.0
            for x, y in loader:
                model.to(device)
                x, y = x.to(device), y.to(device)
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y, weight=weights.to(device))
                loss.backward()
                opt.step()
                total += loss.item()
            return total


        print(round(train(), 5), weights.device)
        """
    )
    fixed, before, after = run_fixed_pair(tmp_path, src)
    assert "    model.to(device)\n    weights_on_device = weights.to(device)\n    for x, y" in fixed
    assert before == after
    again, _ = fix_source(fixed, "script.py", unsafe=True)
    assert again == fixed
    assert not [f for f in lint_source(fixed, "script.py") if f.code == "TL106"]
