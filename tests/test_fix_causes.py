"""The causes of wrong and no-benefit fixes found on public repositories
(issue "Fixes that keep what the code does, worth applying, in notebooks as
in scripts"), each as a program of our own that is fixed with `--fix
--unsafe-fixes` and then run, before and after, on the CPU and on the
simulated accelerator (bench/sim_accel.py: `torch.cuda.is_available()` is
True and "cuda" is PyTorch's meta device, so a device mismatch raises as on
a GPU). Notebooks run cell by cell through IPython's
`InteractiveShell.run_cell`, and the values their cells display are compared.

A fix is right here when the fixed program does on the CPU what the original
did (same output, same displayed values) and does not fail on the simulated
accelerator where the original did not. Each test also checks that the
harness can tell: the wrong edit the issue describes, made by hand, fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Tuple

import pytest

from bench.sim_accel import normalize
from torchlint.analysis import _PLACEHOLDER_MARK
from torchlint.source import notebook as nbmod

from helpers import ROOT, api, code, fix_source, notebook

pytestmark = pytest.mark.slow

SIM = ROOT / "bench" / "sim_accel.py"
ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0", MPLBACKEND="Agg")

HEAD = (
    "import torch\n"
    "from torch import nn\n"
    "from torch.utils.data import DataLoader, TensorDataset\n"
    "\n"
    "torch.manual_seed(0)\n"
    'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
)


def execute(path: Path, accel: bool) -> Dict:
    """Run `path` (a script or a notebook) through bench/sim_accel.py: its result,
    with the script's printed output under "stdout" (normalized)."""
    out = path.parent / f"{path.name}.{'accel' if accel else 'cpu'}.json"
    argv = [sys.executable, str(SIM), *(["--accel"] if accel else []), "--out", str(out), str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=ENV, cwd=path.parent)
    assert out.exists(), f"{path.name} did not run:\n{proc.stderr[-3000:]}"
    result = json.loads(out.read_text())
    if result["kind"] == "script":
        result["stdout"] = normalize(proc.stdout, str(path.parent))
    return result


def runs(tmp_path: Path, name: str, before: bytes, after: bytes) -> Dict[Tuple[str, bool], Dict]:
    """Each version in a folder of its own, run on the CPU and on the simulated accelerator."""
    out = {}
    for label, data in (("before", before), ("after", after)):
        folder = tmp_path / label
        folder.mkdir(exist_ok=True)
        (folder / name).write_bytes(data)
        for accel in (False, True):
            out[(label, accel)] = execute(folder / name, accel)
    return out


def displays(result: Dict) -> Dict[int, str]:
    """Each notebook cell's displayed value (normalized), None where it shows nothing."""
    return {c["number"]: c["display"] and normalize(c["display"]) for c in result["cells"]}


def assert_same_behaviour(r: Dict[Tuple[str, bool], Dict]) -> None:
    """The fixed version does on the CPU what the original did, and fails on the
    simulated accelerator only where the original failed."""
    cpu_before, cpu_after = r[("before", False)], r[("after", False)]
    assert cpu_before["status"] == "ok", cpu_before["error"]
    assert cpu_after["status"] == "ok", cpu_after["error"]
    if cpu_before["kind"] == "script":
        assert cpu_after["stdout"] == cpu_before["stdout"]
    else:
        assert displays(cpu_after) == displays(cpu_before)
        assert [normalize(c["stdout"]) for c in cpu_after["cells"]] == [
            normalize(c["stdout"]) for c in cpu_before["cells"]
        ]
    accel_before, accel_after = r[("before", True)], r[("after", True)]
    if accel_before["status"] == "ok":
        assert accel_after["status"] == "ok", f"new crash on the accelerator: {accel_after['error']}"


def cells_of(data: bytes):
    return [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in json.loads(data)["cells"]]


# -- cause 1: a notebook cell's last expression is its output ---------------------------------

NB_SETUP = HEAD + (
    "torch.save(nn.Linear(4, 2).state_dict(), 'm.pt')\n"
    "model = nn.Linear(4, 2)\n"
    "model.load_state_dict(torch.load('m.pt'))\n"
    "model = model.to(device)\n"
    "model.eval()\n"
    "val_loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)\n"
)
NB_EVALUATE = (
    "def evaluate(loader):\n"
    "    total = 0\n"
    "    for (x,) in loader:\n"
    "        total += model(x.to(device)).sum()\n"
    "    return total\n"
)


def test_cause1_displayed_values_survive_the_fixes_when_cells_run_in_ipython(tmp_path):
    nb = notebook(
        code(NB_SETUP),
        code(NB_EVALUATE),
        code("evaluate(val_loader)"),
        code("y = model(torch.ones(1, 4).to(device))\ny.cpu()"),
        code("scores = []\nfor (x,) in val_loader:\n    scores.append(model(x.to(device)).argmax(1))\nlen(scores)"),
    )
    new, _ = api.fix_bytes(nb, "n.ipynb", unsafe=True)
    cells = cells_of(new)
    # The notebook is fixed (no graphs in the evaluation, batches pinned)...
    assert cells[1].startswith("@torch.no_grad()\ndef evaluate") and "with torch.no_grad():" in cells[4]
    # ...but a displayed expression is never wrapped, reassigned or removed.
    assert cells[2] == "evaluate(val_loader)" and cells[3].endswith("\ny.cpu()") and cells[4].endswith("len(scores)")
    r = runs(tmp_path, "n.ipynb", nb, new)
    assert_same_behaviour(r)
    shown = displays(r[("after", False)])
    assert shown[3] and shown[4] and shown[5] == "4"
    assert displays(r[("after", True)])[3] is not None

    # The harness sees the wrong edits of the issue: a wrapped or reassigned display shows nothing.
    wrong = notebook(
        code(NB_SETUP),
        code(NB_EVALUATE),
        code("with torch.no_grad():\n    evaluate(val_loader)"),
        code("y = model(torch.ones(1, 4).to(device))\ny = y.cpu()"),
    )
    (tmp_path / "wrong").mkdir()
    (tmp_path / "wrong" / "n.ipynb").write_bytes(wrong)
    shown = displays(execute(tmp_path / "wrong" / "n.ipynb", accel=False))
    assert shown[3] is None and shown[4] is None


# -- cause 2: a move without a look at who consumes the value (TL105) ------------------------------


def test_cause2_no_move_where_a_later_consumer_stays_on_the_cpu(tmp_path):
    src = HEAD + (
        "D = nn.Linear(3, 1)\n"  # built on the CPU, never moved
        "x = torch.randn(2, 3)\n"
        "if torch.cuda.is_available():\n"
        "    x.cuda()\n"
        "print(D(x).shape)\n"
        "t = torch.randn(3).to(device)\n"
        "y = torch.randn(3).to(device)\n"
        "y.cpu()\n"
        "print(bool((y == t).any()))\n"
    )
    fixed, remaining = fix_source(src, "a.py", unsafe=True)
    assert {f.row for f in remaining if f.code == "TL105"} == {10, 14}  # reported, not fixed
    assert "x = x.cuda()" not in fixed and "y = y.cpu()" not in fixed
    r = runs(tmp_path, "a.py", src.encode(), fixed.encode())
    assert_same_behaviour(r)
    assert r[("after", True)]["status"] == "ok"

    # The edit the issue found makes a working program crash on a GPU machine.
    wrong = src.replace("    x.cuda()\n", "    x = x.cuda()\n")
    (tmp_path / "wrong.py").write_text(wrong)
    crashed = execute(tmp_path / "wrong.py", accel=True)
    assert crashed["status"] == "error" and "device" in crashed["error"]["message"]


def test_cause2_the_move_is_fixed_where_every_consumer_is_on_the_device(tmp_path):
    src = HEAD + (
        "model = nn.Linear(3, 1).to(device)\n"
        "x = torch.randn(2, 3)\n"
        "x.to(device)\n"
        "out = model(x)\n"
        "print(out.shape, round(out.sum().item(), 4))\n"
    )
    fixed, remaining = fix_source(src, "a.py", unsafe=True)
    assert "x = x.to(device)\n" in fixed and not [f for f in remaining if f.code == "TL105"]
    r = runs(tmp_path, "a.py", src.encode(), fixed.encode())
    # The discarded move crashes on a GPU (the model is there, x is not); the fix mends it.
    assert r[("before", True)]["status"] == "error" and r[("after", True)]["status"] == "ok"
    assert r[("before", False)]["stdout"] == r[("after", False)]["stdout"]


def test_cause2_a_displayed_move_stays_and_a_later_cell_still_compares_on_the_device(tmp_path):
    nb = notebook(
        code(HEAD + "t = torch.randn(3).to(device)\ny = torch.randn(3).to(device)\n"),
        code("y.cpu()"),
        code("y.cpu()\nz = 1"),
        code("bool((y == t).any())"),
    )
    new, remaining = api.fix_bytes(nb, "n.ipynb", unsafe=True)
    assert new == nb  # nothing to fix: the displayed move is output, the other one meets `t` later
    assert [(f.code, f.cell) for f in remaining if f.code == "TL105"] == [("TL105", 3)]
    wrong = notebook(*[code(c) for c in cells_of(nb)[:2]], code("y = y.cpu()\nz = 1"), code(cells_of(nb)[3]))
    r = runs(tmp_path, "n.ipynb", nb, wrong)
    assert r[("before", True)]["status"] == "ok"
    assert r[("after", True)]["status"] == "error"  # the harness sees the wrong edit


# -- cause 3: a dataset already on the device, reached through intermediate values (TL303) --------

DATASET_ON_DEVICE = HEAD + (
    "model = nn.Linear(3, 1).to(device)\n"
    "x = torch.randn(4, 3)\n"
    "x = x.to(device)\n"
    "ds = TensorDataset(torch.stack([x] * 8))\n"
    "loader = DataLoader(ds, batch_size=4)\n"
    "for (xb,) in loader:\n"
    "    model(xb.to(device, non_blocking=True)).sum().backward()\n"
    "print(len(loader))\n"
)


def test_cause3_no_pinning_for_a_dataset_on_the_device(tmp_path):
    fixed, remaining = fix_source(DATASET_ON_DEVICE, "a.py", unsafe=True)
    assert "pin_memory" not in fixed
    r = runs(tmp_path, "a.py", DATASET_ON_DEVICE.encode(), fixed.encode())
    assert_same_behaviour(r)
    assert r[("after", True)]["status"] == "ok"
    wrong = DATASET_ON_DEVICE.replace("batch_size=4)", "batch_size=4, pin_memory=torch.cuda.is_available())")
    (tmp_path / "wrong.py").write_text(wrong)
    crashed = execute(tmp_path / "wrong.py", accel=True)
    assert crashed["status"] == "error" and "cannot pin" in crashed["error"]["message"]


def test_cause3_pinning_only_where_the_datasets_tensors_are_known_to_be_on_the_host(tmp_path):
    host = DATASET_ON_DEVICE.replace("x = x.to(device)\n", "x = x.float()\n")
    fixed, remaining = fix_source(host, "a.py", unsafe=True)
    assert "pin_memory=torch.cuda.is_available()" in fixed
    assert_same_behaviour(runs(tmp_path, "a.py", host.encode(), fixed.encode()))
    # A tensor from elsewhere: reported, not pinned (its place is not known).
    loaded = host.replace("x = torch.randn(4, 3)\n", "x = torch.load('x.pt')\n")
    (finding,) = [f for f in api.lint_source(loaded, "a.py") if f.code == "TL303"]
    assert finding.fix is None


# -- cause 4: edits with no benefit --------------------------------------------------------------------

NO_BENEFIT = HEAD + (
    "class Encoding(dict):\n"
    "    def to(self, device):\n"  # a tokenizer's BatchEncoding moves in place
    "        for k in self:\n"
    "            self[k] = self[k].to(device)\n"
    "        return self\n"
    "def tokenizer(text, return_tensors=None):\n"
    "    return Encoding(input_ids=torch.ones(1, 3))\n"
    "model = nn.Linear(3, 2).to(device)\n"
    "model.eval()\n"
    "inputs = tokenizer('a b c', return_tensors='pt')\n"
    "inputs.to(device)\n"
    "model.to(device)\n"
    "print(model(inputs['input_ids']).shape)\n"  # a single demo forward
    "def scale(n):\n"
    "    ldj = torch.zeros(n).to(device)\n"  # a one-off allocation in a function
    "    return ldj.sum()\n"
    "print(float(scale(3)))\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loader = DataLoader(TensorDataset(torch.randn(16, 3), torch.randint(0, 2, (16,))), batch_size=4)\n"
    "total = 0.0\n"
    "model.train()\n"
    "for xb, yb in loader:\n"
    "    xb, yb = xb.to(device), yb.to(device)\n"
    "    out = model(xb)\n"
    "    loss = nn.functional.cross_entropy(out, yb)\n"
    "    opt.zero_grad()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    total += loss.item()\n"
    "    print(out.argmax(1).tolist())\n"  # the iteration syncs here anyway
    "print(round(total, 4))\n"
)


def test_cause4_no_edit_without_a_benefit(tmp_path):
    fixed, remaining = fix_source(NO_BENEFIT, "a.py", unsafe=True)
    codes = {(f.code, f.row) for f in remaining}
    assert not any(code == "TL105" for code, _ in codes)  # tokenizer output and modules move in place
    for line in (
        "inputs.to(device)\n",
        "    ldj = torch.zeros(n).to(device)\n",
        "    total += loss.item()\n",
        "print(model(inputs['input_ids']).shape)\n",
    ):
        assert line in fixed, line
    assert "no_grad" not in fixed and "inference_mode" not in fixed
    assert_same_behaviour(runs(tmp_path, "a.py", NO_BENEFIT.encode(), fixed.encode()))


# -- cause 5: numerics ----------------------------------------------------------------------------------

ACCUMULATE = HEAD + (
    "model = nn.Linear(4, 1).to(device)\n"
    "data = [torch.randn(8, 4) for _ in range(50)]\n"
    "total = 0\n"
    "for x in data:\n"
    "    out = model(x.to(device))\n"
    "    loss = (out * 0 + 12.42 + x[0, 0] * 1e-3).mean()\n"
    "    loss.backward()\n"
    "    total += loss.item()\n"
    "print(repr(total / len(data)), type(total).__name__)\n"
)


def test_cause5_accumulation_in_float64_prints_the_same_numbers(tmp_path):
    fixed, _ = fix_source(ACCUMULATE, "a.py", unsafe=True)
    assert "total += loss.detach().double()" in fixed
    r = runs(tmp_path, "a.py", ACCUMULATE.encode(), fixed.encode())
    assert_same_behaviour(r)
    assert r[("after", True)]["status"] == "ok"
    # In float32 the last digits change: the harness would see it.
    wrong = fixed.replace(".detach().double()", ".detach().float()")
    (tmp_path / "wrong.py").write_text(wrong)
    assert execute(tmp_path / "wrong.py", accel=False)["stdout"] != r[("before", False)]["stdout"]


# -- cause 6: layout ------------------------------------------------------------------------------------

LAYOUT = HEAD + (
    "model = nn.Linear(4, 1).to(device)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loader = DataLoader(\n"
    "    TensorDataset(torch.randn(16, 4), torch.randn(16, 1)),\n"
    "    batch_size=4,\n"
    "    shuffle=True)  # shuffle?\n"
    "for x, y in loader:\n"
    "    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
    "    loss = nn.functional.mse_loss(model(x), y)\n"
    "    opt.zero_grad()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "with torch.autograd.profiler.profile(\n"
    "    use_cuda=False,\n"
    "    record_shapes=True,\n"
    "    profile_memory=True,\n"
    ") as prof:\n"
    "    model(torch.ones(2, 4, device=device))\n"
    "prof.export_chrome_trace('trace.json')\n"
    "print(model.weight.shape)\n"
)
NO_DEVICE = (
    "import torch\n"
    "from torch import nn\n"
    "print(torch.cuda.is_available())\n"
    "model = nn.Linear(4, 1)\n"
    "out = model(torch.ones(2, 4))\n"
    "print(out.shape)\n"
)


def test_cause6_fixes_keep_the_layout_of_a_script(tmp_path):
    fixed, _ = fix_source(LAYOUT, "a.py", unsafe=True)
    # TL303: the comment stays on the line it annotates.
    assert "    batch_size=4,\n    pin_memory=torch.cuda.is_available(),\n    shuffle=True)  # shuffle?\n" in fixed
    # TL501: the three-line call keeps its lines.
    assert (
        "with torch.profiler.profile(\n    record_shapes=True,\n    profile_memory=True,\n"
        "    activities=[torch.profiler.ProfilerActivity.CPU],\n) as prof:\n"
    ) in fixed
    assert max(len(line) for line in fixed.splitlines()) <= 100
    assert_same_behaviour(runs(tmp_path, "a.py", LAYOUT.encode(), fixed.encode()))


def test_cause6_the_device_line_follows_a_blank_line_after_the_imports(tmp_path):
    fixed, _ = fix_source(NO_DEVICE, "a.py", unsafe=True)
    assert fixed.startswith(
        "import torch\nfrom torch import nn\n\n"
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nprint('
    )
    r = runs(tmp_path, "a.py", NO_DEVICE.encode(), fixed.encode())
    assert_same_behaviour(r)
    assert r[("after", True)]["status"] == "ok"


def test_cause6_one_import_per_notebook_cell(tmp_path):
    nb = notebook(
        code(
            "from torch import nn, cuda, randn\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "device = 'cuda' if cuda.is_available() else 'cpu'\nmodel = nn.Linear(4, 1).to(device)\n"
        ),
        code(
            "%matplotlib inline\n"
            "a = DataLoader(TensorDataset(randn(8, 4)), batch_size=2)\n"
            "b = DataLoader(TensorDataset(randn(8, 4)), batch_size=4)\n"
            "for (x,) in a:\n    model(x.to(device, non_blocking=True)).sum().backward()\n"
            "for (x,) in b:\n    model(x.to(device, non_blocking=True)).sum().backward()\n"
            "len(a), len(b)"
        ),
        code("import torch\ntorch.cuda.is_available()"),
    )
    new, remaining = api.fix_bytes(nb, "n.ipynb", unsafe=True)
    cell = cells_of(new)[1]
    assert cell.count("import torch\n") == 1 and cell.count("pin_memory=torch.cuda.is_available()") == 2
    assert cell.startswith("%matplotlib inline\nimport torch\n")  # after the IPython line, at the cell's top
    r = runs(tmp_path, "n.ipynb", nb, new)
    assert_same_behaviour(r)
    assert displays(r[("after", False)])[2] == "(4, 2)"


def test_placeholder_mark_matches_the_notebook_reader():
    assert _PLACEHOLDER_MARK == nbmod._MAGIC_MARK


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "torchlint", *args], capture_output=True, text=True, cwd=cwd, env=ENV, timeout=300
    )


def test_cause6_diff_headers_name_files_with_spaces(tmp_path):
    folder = tmp_path / "my project"
    folder.mkdir()
    src = "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3).to(device)\n"
    (folder / "train step.py").write_text(src)
    proc = _cli("check", "--preview", "--no-cache", "--diff", "my project/train step.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("--- my project/train step.py\t\n+++ my project/train step.py\t\n@@ ")
    plain = tmp_path / "plain.py"
    plain.write_text(src)
    proc = _cli("check", "--preview", "--no-cache", "--diff", "plain.py", cwd=tmp_path)
    assert proc.stdout.startswith("--- plain.py\n+++ plain.py\n@@ ")  # as Ruff prints it


def test_cause6_diff_with_spaces_applies_with_patch(tmp_path):
    patch = shutil.which("patch")
    if patch is None:
        pytest.skip("GNU patch is not installed: the header format is checked by the test above")
    folder = tmp_path / "my project"
    folder.mkdir()
    src = "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3).to(device)\n"
    target = folder / "train step.py"
    target.write_text(src)
    diff = _cli("check", "--preview", "--no-cache", "--diff", "my project/train step.py", cwd=tmp_path).stdout
    applied = subprocess.run([patch, "-p0"], input=diff, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert target.read_text() == fix_source(src, "a.py")[0]


def test_cause6_notebook_diff_is_per_cell_source(tmp_path):
    nb = notebook(
        code("# intro"),
        {"cell_type": "markdown", "metadata": {}, "source": "Some text"},
        code("import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3).to(device)"),
        code("y = 1"),
    )
    (tmp_path / "nb.ipynb").write_bytes(nb)
    proc = _cli("check", "--preview", "--no-cache", "--diff", "nb.ipynb", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == (
        "--- nb.ipynb:cell 3\n+++ nb.ipynb:cell 3\n@@ -1,3 +1,3 @@\n"
        " import torch\n device = torch.device('cuda')\n-x = torch.zeros(3).to(device)\n"
        "+x = torch.zeros(3, device=device)\n\n"
    )
