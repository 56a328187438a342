"""TL404 compile-in-loop: torch.compile called every iteration."""

import textwrap

from helpers import lint_source

HEAD = """\
import torch
import torch.nn as nn
model = nn.Linear(4, 2).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""


def rows(src, path="train.py"):
    return [f.row for f in lint_source(HEAD + textwrap.dedent(src), path) if f.code == "TL404"]


def test_compiled_every_iteration():
    assert rows(
        """\
        for x, y in loader:
            fast = torch.compile(model, mode="reduce-overhead")
            fast(x.cuda()).sum().backward()
            opt.step()
        """
    ) == [6]
    # a method's model, in a helper the training loop calls every step
    assert rows(
        """\
        class Trainer:
            def __init__(self, net):
                self.net = net
            def step(self, x):
                out = torch.compile(self.net)(x)
                out.sum().backward()
        def train_step(x):
            fast = torch.compile(model)
            fast(x).sum().backward()
            opt.step()
        for x, y in loader:
            train_step(x.cuda())
        """
    ) == [12]


def test_once_lazily_or_per_config_is_left_alone():
    # a lazy cache under a branch
    assert not rows(
        """\
        fast = None
        for x, y in loader:
            if fast is None:
                fast = torch.compile(model)
            fast(x.cuda()).sum().backward()
        """
    )
    # a benchmark-style loop over configs, models or options: different each iteration
    assert not rows(
        """\
        for cfg in configs:
            net = nn.Linear(cfg.width, 2).cuda()
            fast = torch.compile(net)
            print(fast(torch.randn(8, cfg.width, device="cuda")).shape)
        for backend in ("inductor", "aot_eager"):
            print(torch.compile(model, backend=backend)(x))
        for name, m in model.named_children():
            setattr(model, name, torch.compile(m))
        """
    )
    # a loop that stops after its first iteration
    assert not rows(
        """\
        for x, y in loader:
            fast = torch.compile(model)
            fast(x.cuda()).sum().backward()
            break
        """
    )
    # the helper is called once, not per step
    assert not rows("def setup():\n    return torch.compile(model)\nfast = setup()\nfor x, y in loader:\n    fast(x)\n")
    # decorators and tests
    assert not rows(
        "@torch.compile\ndef f(x):\n    return x * 2\nfor x, y in loader:\n    f(model(x)).sum().backward()\n"
    )
    assert not rows(
        "for x, y in loader:\n    fast = torch.compile(model)\n    fast(x).sum().backward()\n", "tests/test_compile.py"
    )


def test_no_fix():
    src = HEAD + "for x, y in loader:\n    torch.compile(model)(x).sum().backward()\n    opt.step()\n"
    found = [f for f in lint_source(src, "train.py") if f.code == "TL404"]
    assert len(found) == 1 and found[0].fix is None
