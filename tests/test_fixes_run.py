"""Fixes are checked by running them: each script below works on the CPU, and
a careless fix would break it (a crash, other numbers, other output). Each
test applies `--fix --unsafe-fixes` (through `fix_source`), checks what the
fix did or did not touch, then runs the original and the fixed script with
torch on the CPU and compares what they print."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import fix_source, process_bytes

ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="")


def run(path: Path) -> str:
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, f"{path.name} failed:\n{proc.stderr[-3000:]}"
    return "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("USDT:"))


def fixed_run(tmp_path: Path, source: str, name: str = "script.py"):
    """(fixed text, stdout of the original, stdout of the fixed script)."""
    fixed, _ = fix_source(source, name, unsafe=True)
    before, after = tmp_path / "before" / name, tmp_path / "after" / name
    for path, text in ((before, source), (after, fixed)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return fixed, run(before), run(after)


HEAD = """import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl201_wraps_the_evaluation_loop_never_the_epoch_loop_that_trains(tmp_path):
    src = HEAD + (
        "model = nn.Linear(4, 2).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "train = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)\n"
        "val = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)\n"
        "for epoch in range(2):\n"
        "    model.train()\n"
        "    for x, y in train:\n"
        "        x, y = x.to(device), y.to(device)\n"
        "        loss = nn.functional.cross_entropy(model(x), y)\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    for x, y in val:\n"
        "        x, y = x.to(device), y.to(device)\n"
        "        correct += (model(x).argmax(1) == y).sum()\n"
        "    print('epoch', epoch, int(correct), round(loss.item(), 4))\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert "    with torch.no_grad():\n        for x, y in val:\n" in fixed
    assert fixed.count("no_grad") == 1 and "inference_mode" not in fixed
    assert before == after and before.count("epoch") == 2


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl201_evaluation_helper_shared_with_training(tmp_path):
    src = HEAD + (
        "model = nn.Linear(4, 2).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "x_train, y_train = torch.randn(16, 4).to(device), torch.randint(0, 2, (16,)).to(device)\n"
        "x_val, y_val = torch.randn(8, 4).to(device), torch.randint(0, 2, (8,)).to(device)\n"
        "def calc_loss(model, x, y):\n"
        "    return nn.functional.cross_entropy(model(x), y)\n"
        "for step in range(20):\n"
        "    loss = calc_loss(model, x_train, y_train)\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    if step % 10 == 0:\n"
        "        model.eval()\n"
        "        val_loss = calc_loss(model, x_val, y_val)\n"
        "        model.train()\n"
        "        print(step, round(float(val_loss), 4))\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    # The helper itself is never wrapped: its forward trains too.
    assert "@torch.no_grad()" not in fixed
    assert before == after


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl303_collate_that_returns_device_tensors_gets_no_pin_memory(tmp_path):
    src = (
        "import functools\n" + HEAD + "class Pairs(Dataset):\n"
        "    def __len__(self):\n        return 64\n"
        "    def __getitem__(self, i):\n        return [float(i), float(i + 1)]\n"
        "def collate(items, device):\n"
        "    return torch.tensor(items, device=device)\n"
        "model = nn.Linear(2, 1).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "loader = DataLoader(Pairs(), batch_size=4, collate_fn=functools.partial(collate, device=device))\n"
        "for batch in loader:\n"
        "    loss = model(batch).pow(2).mean()\n"
        "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
        "print(round(loss.item(), 3))\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert "pin_memory" not in fixed
    assert before == after


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl104_keeps_sampling_ops_explicit_cpu_and_generators(tmp_path):
    src = HEAD + (
        "g = torch.Generator().manual_seed(0)\n"
        "p = torch.full((4,), 0.5)\n"
        "mask = torch.bernoulli(p, generator=g).to(device)\n"
        "noise = torch.randn(4, generator=g, device='cpu').to(device)\n"
        "z = torch.zeros(3).to(device)\n"
        "print(mask.tolist(), noise.tolist(), z.tolist())\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert "torch.bernoulli(p, generator=g).to(device)" in fixed
    assert "torch.randn(4, generator=g, device='cpu').to(device)" in fixed
    assert "z = torch.zeros(3, device=device)\n" in fixed
    assert before == after


def test_tl104_random_factory_fix_is_unsafe_only():
    unseeded = HEAD.replace("torch.manual_seed(0)\n", "")
    src = unseeded + "for step in range(3):\n    z = torch.randn(3).to(device)\n    print(model(z))\n"
    safe, _ = fix_source(src, "a.py")
    assert safe == src
    unsafe, _ = fix_source(src, "a.py", unsafe=True)
    assert "torch.randn(3, device=device)" in unsafe
    once = unseeded + "z = torch.randn(3).to(device)\nprint(z)\n"  # a one-off draw: advice only
    seeded = HEAD + "for step in range(3):\n    z = torch.randn(3).to(device)\n    print(model(z))\n"
    assert fix_source(seeded, "a.py", unsafe=True)[0] == seeded  # reproducible numbers would change
    assert fix_source(once, "a.py", unsafe=True)[0] == once


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl102_does_not_move_inputs_of_a_model_still_on_the_cpu(tmp_path):
    src = HEAD + (
        "model = nn.Linear(4, 2)\nx = torch.randn(3, 4)\nout = model(x)\nmodel = model.to(device)\nprint(out.shape)\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert fixed == src and before == after


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl100_fix_moves_the_model_and_its_inputs_or_nothing(tmp_path):
    direct = (
        "import torch\n\nmodel = torch.nn.Linear(10, 2)\nx = torch.randn(1, 10)\nout = model(x)\nprint(out.device)\n"
    )
    fixed, before, after = fixed_run(tmp_path, direct)
    assert ".to(device)" in fixed and "torch.randn(1, 10, device=device)" in fixed
    assert before == after
    # The model is fed through an alias the fix would not move: no fix.
    alias = (
        "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 2)\nx = torch.randn(3, 4)\ny = x * 2\n"
        "for step in range(3):\n    out = model(y)\nprint(out.shape, torch.cuda.is_available())\n"
    )
    fixed, _ = fix_source(alias, "a.py", unsafe=True)
    assert fixed == alias


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl501_keeps_the_legacy_profiler_when_it_is_printed(tmp_path):
    printed = (
        "import torch\n\nwith torch.autograd.profiler.profile(use_cuda=True) as prof:\n"
        "    torch.ones(3) + 1\nprint(type(prof).__name__, 'FunctionEventAvg' in repr(prof.key_averages()))\n"
        "print(prof)\n"
    )
    fixed, _ = fix_source(printed, "a.py", unsafe=True)
    assert fixed == printed
    events = (
        "import torch\n\nwith torch.autograd.profiler.profile(use_cuda=True) as prof:\n"
        "    torch.ones(3) + 1\nprint(len(prof.function_events) > 0)\n"
    )
    fixed, before, after = fixed_run(tmp_path, events)
    assert "torch.profiler.profile(" in fixed
    assert before.strip().endswith("True") and after.strip().endswith("True")


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl302_no_workers_for_iterable_datasets_or_local_collate(tmp_path):
    src = HEAD + (
        "class Stream(IterableDataset):\n"
        "    def __iter__(self):\n"
        "        for i in range(16):\n"
        "            yield torch.randn(4)\n"
        "class Items(Dataset):\n"
        "    def __len__(self):\n        return 16\n"
        "    def __getitem__(self, i):\n        return torch.randn(4)\n"
        "def main():\n"
        "    def collate(items):\n"
        "        return torch.stack(items)\n"
        "    model = nn.Linear(4, 2).to(device)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    n = 0\n"
        "    for loader in (DataLoader(Stream(), batch_size=4), DataLoader(Items(), batch_size=4, collate_fn=collate)):\n"
        "        for x in loader:\n"
        "            loss = model(x.to(device)).sum()\n"
        "            opt.zero_grad()\n            loss.backward()\n            opt.step()\n"
        "            n += x.shape[0]\n"
        "    print('samples', n)\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert "num_workers" not in fixed
    assert before == after == "samples 32"


DATASET = HEAD + (
    "class Items(Dataset):\n"
    "    def __len__(self):\n        return 64\n"
    "    def __getitem__(self, i):\n"
    "        img = torch.full((3, 32, 32), float(i))\n"  # deterministic: a seeded run's random items keep no fix
    "        return nn.functional.avg_pool2d(img, 2).flatten()\n"
)
TRAIN = (
    "    model = nn.Linear(768, 2).to(device)\n"
    "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "    loader = DataLoader(Items(), batch_size=16, shuffle=True)\n"
    "    n = 0\n"
    "    for x in loader:\n"
    "        loss = model(x.to(device)).sum()\n"
    "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
    "        n += x.shape[0]\n"
    "    print('samples', n)\n"
)


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl302_imports_os_where_it_runs_before_the_loader(tmp_path):
    # `import os` sits below the code that runs the loader: the fix imports it at the top.
    src = DATASET + "def main():\n" + TRAIN + "if __name__ == '__main__':\n    main()\nimport os  # noqa: E402\n"
    fixed, before, after = fixed_run(tmp_path, src)
    assert "num_workers=min(8, os.cpu_count() or 1)" in fixed
    assert fixed.startswith("import os\nimport torch\n")
    assert before == after == "samples 64"


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl302_no_workers_for_a_loader_run_on_import(tmp_path):
    # Module-level training without a `__main__` guard: spawned workers would re-run it.
    src = DATASET + "if True:\n" + TRAIN
    fixed, before, after = fixed_run(tmp_path, src)
    assert "num_workers" not in fixed
    assert before == after == "samples 64"


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl401_accumulation_of_a_bf16_loss_prints_the_same_numbers(tmp_path):
    src = HEAD + (
        "model = nn.Linear(4, 1).to(device).to(torch.bfloat16)\n"
        "data = [torch.randn(8, 4) for _ in range(50)]\n"
        "total = 0\n"
        "for x in data:\n"
        "    out = model(x.to(device, torch.bfloat16))\n"
        "    loss = (out.float() * 0 + 12.42 + x[0, 0] * 1e-3).mean().to(torch.bfloat16)\n"
        "    loss.backward()\n"
        "    total += loss.item()\n"
        "print(repr(total / len(data)), type(total).__name__)\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    # Summed in float64 on the device, as the Python floats were: every digit stays the same.
    assert "total += loss.detach().double()" in fixed and "total = float(total)" in fixed
    assert before == after and before.endswith("float")


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl401_count_accumulation_stays_an_int(tmp_path):
    src = HEAD + (
        "model = nn.Linear(4, 1).to(device)\n"
        "data = [torch.randn(8, 4) for _ in range(20)]\n"
        "correct = 0\n"
        "for x in data:\n"
        "    out = model(x.to(device))\n"
        "    out.mean().backward()\n"
        "    correct += (out > 0).sum().item()\n"
        "print(correct, type(correct).__name__)\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert "correct = int(correct)" in fixed
    assert before == after and before.endswith("int")


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_keyword_insertion_keeps_the_call_layout(tmp_path):
    src = HEAD + (
        "h = torch.zeros(\n    (2, 3)  # rows, cols\n).to(device)\n"
        "w = torch.ones(\n    2,\n    3,\n).to(device)\n"
        "print(h.shape, w.shape)\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert "h = torch.zeros(\n    (2, 3),  # rows, cols\n    device=device\n)\n" in fixed
    assert "w = torch.ones(\n    2,\n    3,\n    device=device,\n)\n" in fixed
    assert not any(line != line.rstrip() for line in fixed.splitlines())
    assert before == after


def _notebook(*cells: str) -> bytes:
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                for c in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    ).encode()


def _run_cells(tmp_path: Path, data: bytes, name: str) -> str:
    cells = [c["source"] for c in json.loads(data)["cells"] if c["cell_type"] == "code"]
    path = tmp_path / name
    path.write_text("\n".join(cells) + "\n")
    return run(path)


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_notebook_fix_runs_when_the_cells_run_in_order(tmp_path):
    cells = (
        HEAD,
        "model = nn.Linear(4, 2).to(device)\n",
        "model.eval()\nfor i in range(3):\n    x = torch.zeros(8, 4).to(device)\n    out = model(x + i)\nprint(out.shape)\n",
    )
    data = _notebook(*cells)
    outcome = process_bytes(data, "nb.ipynb", mode="fix", unsafe=True)
    assert outcome.new_data is not None
    new_cells = [c["source"] for c in json.loads(outcome.new_data)["cells"]]
    assert "torch.zeros(8, 4, device=device)" in new_cells[2]
    assert len(new_cells) == 3 and new_cells[0] == HEAD
    assert _run_cells(tmp_path, data, "before.py") == _run_cells(tmp_path, outcome.new_data, "after.py")


def test_notebook_dataset_defined_in_the_notebook_gets_no_workers():
    # Spawned workers (macOS/Windows Jupyter) cannot unpickle a class defined in the notebook.
    cells = (DATASET, "def main():\n" + TRAIN + "main()\n", "import os\n")
    outcome = process_bytes(_notebook(*cells), "nb.ipynb", mode="fix", unsafe=True)
    assert any(f.code == "TL302" for f in outcome.findings)
    assert outcome.new_data is None or b"num_workers" not in outcome.new_data


@pytest.mark.parametrize("unsafe", [False, True])
def test_fixes_are_idempotent_on_these_scripts(unsafe):
    src = HEAD + "z = torch.zeros(3).to(device)\nw = torch.randn(2).to(device)\nx = torch.ones(1)\nx.to(device)\n"
    once, _ = fix_source(src, "a.py", unsafe=unsafe)
    twice, _ = fix_source(once, "a.py", unsafe=unsafe)
    assert once != src and twice == once


def test_tl103_no_fix_when_a_batch_value_is_later_read_on_the_host():
    src = HEAD + (
        "model = nn.Linear(1, 1).to(device)\n"
        "loader = DataLoader(TensorDataset(torch.randn(4, 1), torch.randn(4, 1)), batch_size=1)\n"
        "with torch.no_grad():\n"
        "    for x, gt in loader:\n"
        "        x = x.to(device)\n"
        "        pred = model(x)\n"
        "        print(gt.item())\n"
        "        err = torch.abs(pred.sum() - gt)\n"
    )
    fixed, remaining = fix_source(src, "a.py", unsafe=True)
    assert any(f.code == "TL103" for f in remaining)
    assert "gt = gt.to(device)" not in fixed


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl201_validation_first_in_the_epoch_loop_is_wrapped_alone(tmp_path):
    src = HEAD + (
        "model = nn.Linear(4, 2).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "train = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)\n"
        "val = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)\n"
        "for epoch in range(2):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    for x, y in val:\n"
        "        x, y = x.to(device), y.to(device)\n"
        "        correct += (model(x).argmax(1) == y).sum()\n"
        "    model.train()\n"
        "    for x, y in train:\n"
        "        x, y = x.to(device), y.to(device)\n"
        "        loss = nn.functional.cross_entropy(model(x), y)\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "    print('epoch', epoch, int(correct), round(loss.item(), 4))\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert "    with torch.no_grad():\n        for x, y in val:\n" in fixed and fixed.count("no_grad") == 1
    assert before == after and before.count("epoch") == 2


@pytest.mark.slow  # runs the original and the fixed script with torch
def test_tl102_registers_a_module_attribute_as_a_buffer_and_the_module_still_runs(tmp_path):
    src = HEAD + (
        "class Bins(nn.Module):\n"
        "    def __init__(self, n):\n"
        "        super().__init__()\n"
        "        self.centers = torch.linspace(0.0, 1.0, n)\n"
        "        self.proj = nn.Linear(4, n)\n"
        "    def forward(self, x, target):\n"
        "        probs = torch.softmax(self.proj(x), dim=-1)\n"
        "        return probs @ self.centers, (target.unsqueeze(-1) - self.centers).abs().argmin(-1)\n"
        "model = Bins(5).to(device)\n"
        "out, idx = model(torch.randn(3, 4).to(device), torch.rand(3).to(device))\n"
        "print(sorted(dict(model.named_buffers())), sorted(model.state_dict()))\n"
        "print(out.shape, idx.tolist())\n"
    )
    fixed, before, after = fixed_run(tmp_path, src)
    assert 'self.register_buffer("centers", torch.linspace(0.0, 1.0, n), persistent=False)' in fixed
    assert before.splitlines()[0].startswith("[]") and after.splitlines()[0].startswith("['centers']")
    assert before.splitlines()[1] == after.splitlines()[1]  # same numbers; state_dict unchanged
    assert before.split("] ", 1)[1].splitlines()[0] == after.split("] ", 1)[1].splitlines()[0]
