"""TL202 graph-retained: graphs kept across iterations, and the accumulations that need them."""

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
"""


def rows(src):
    return [f.row for f in lint_source(HEAD + textwrap.dedent(src), "train.py") if f.code == "TL202"]


def test_sum_and_append_of_losses_and_outputs():
    assert rows(
        """\
        total = 0
        for x, y in loader:
            out = model(x.to(device))
            loss = crit(out, y.to(device))
            loss.backward()
            opt.step()
            total = total + loss
        print(f"{total}")
        """
    ) == [13]
    # a side metric computed with grad on, never backwarded
    assert rows(
        """\
        l1 = []
        for x, y in loader:
            out = model(x.to(device))
            crit(out, y.to(device)).backward()
            opt.step()
            l1.append(nn.functional.l1_loss(out, torch.zeros_like(out)))
        """
    ) == [12]


def test_gradient_accumulation_is_left_alone():
    # reset inside the loop and backwarded every 4 steps
    assert not rows(
        """\
        acc = 0
        for i, (x, y) in enumerate(loader):
            acc = acc + crit(model(x.to(device)), y.to(device))
            if (i + 1) % 4 == 0:
                acc.backward()
                opt.step()
                acc = 0
        """
    )
    # handed to a backward function after the loop
    assert not rows(
        """\
        total = 0
        for x, y in loader:
            loss = crit(model(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
            total += loss
        accelerator.backward(total)
        """
    )
    # a value computed from the accumulator reaches backward
    assert not rows(
        """\
        parts = []
        for x, y in loader:
            parts.append(crit(model(x.to(device)), y.to(device)))
            opt.step()
        mean = sum(parts) / len(parts)
        mean.backward()
        """
    )


def test_no_graph_no_finding():
    # an evaluation under no_grad, inside the training loop
    assert not rows(
        """\
        val = 0.0
        for x, y in loader:
            crit(model(x.to(device)), y.to(device)).backward()
            opt.step()
            with torch.no_grad():
                val += crit(model(x.to(device)), y.to(device))
        print(val)
        """
    )
    # an inference pass (no training in the loop): TL201's business, not this rule's
    assert not rows(
        """\
        total = 0.0
        for x, y in loader:
            total += crit(model(x.to(device)), y.to(device))
        print(total)
        """
    )
    # detached values, `.data`, numbers
    for value in ("loss.detach()", "loss.data", "float(loss)", "loss.item() * 2", "x.shape[0]"):
        assert not rows(
            f"""\
            total = 0.0
            for x, y in loader:
                loss = crit(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
                total += {value}
            print(total)
            """
        ), value
    # an attribute: who reads it is not ours to see
    assert not rows(
        """\
        for x, y in loader:
            loss = crit(model(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
            self.losses.append(loss)
        """
    )


def test_tests_are_not_reported():
    src = (
        HEAD + "total = 0\nfor x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    total += loss\n"
    )
    assert [f for f in lint_source(src, "tests/test_train.py") if f.code == "TL202"] == []


def test_fix_only_where_the_accumulator_is_only_read():
    src = HEAD + textwrap.dedent(
        """\
        losses = []
        for x, y in loader:
            loss = crit(model(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
            losses.append(loss)
        for value in losses:
            keep(value)
        """
    )
    (finding,) = [f for f in lint_source(src, "train.py") if f.code == "TL202"]
    assert finding.fix is None  # iterated and handed on: we cannot tell what reads it


@pytest.mark.slow
def test_fixed_script_runs_and_prints_the_same_numbers(tmp_path):
    src = textwrap.dedent(
        """\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        torch.manual_seed(0)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(4, 2).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        crit = nn.CrossEntropyLoss()
        loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=8)


        def train():
            total = 0.0
            outs = []
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                opt.zero_grad()
                out = model(x)
                loss = crit(out, y)
                loss.backward()
                opt.step()
                total += loss
                outs.append(out)
            return total / len(loader), outs


        mean, outs = train()
        print(round(float(mean), 6), len(outs), tuple(outs[0].shape))
        """
    )
    fixed, before, after = run_fixed_pair(tmp_path, src)
    assert "total += loss.detach()" in fixed and "outs.append(out.detach())" in fixed
    assert before == after
    again, _ = fix_source(fixed, "script.py", unsafe=True)
    assert again == fixed
    assert not [f for f in lint_source(fixed, "script.py") if f.code == "TL202"]


def test_an_append_under_a_periodic_guard_keeps_no_graph_per_step():
    src = """\
        kept = []
        for batch_idx, (x, y) in enumerate(loader):
            loss = crit(model(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
            {guard}kept.append(loss)
        print(kept)
        """
    assert rows(src.format(guard="if batch_idx % 500 == 0:\n                ")) == []
    # every step: every graph stays alive
    assert rows(src.format(guard="")) == [12]
    # a condition that is no period (a threshold on the loss) still keeps graphs most steps
    assert rows(src.format(guard="if loss > 0.1:\n                ")) == [13]


def test_a_window_trimmed_in_the_loop_does_not_grow():
    src = """\
        window = []
        for x, y in loader:
            loss = crit(model(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
            window.append(loss)
            {trim}
        print(window)
        """
    assert rows(src.format(trim="if len(window) > 10:\n                del window[0]")) == []
    assert rows(src.format(trim="if len(window) > 10:\n                window.pop(0)")) == []
    # trimming another list leaves this one growing
    assert rows(src.format(trim="del other[0]")) == [12]
