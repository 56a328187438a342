"""Fixes keep the user's layout: one import per notebook cell, comments stay
on the line they annotate, calls keep their lines, a blank line ends the
imports before TL100's device line; `--diff` names files with spaces so that
`patch` finds them and shows notebooks cell by cell. (The same programs run
before and after are in tests/test_fix_causes.py.)"""

import json

import libcst as cst

from torchlint.rules.nodes import with_keyword
from torchlint.source import notebook as nbmod
from torchlint.source.edits import diff_label, unified_diff

from helpers import api, code, fix_source, notebook

PIN = cst.parse_expression("torch.cuda.is_available()")


def _kw(src: str, comment_after: bool) -> str:
    call = cst.parse_expression(src)
    assert isinstance(call, cst.Call)
    return cst.Module([]).code_for_node(with_keyword(call, "pin_memory", PIN, comment_after))


def test_a_keyword_goes_before_the_last_one_when_a_comment_follows_the_call():
    src = "DataLoader(\n    ds,\n    batch_size=8,\n    shuffle=True)"
    assert _kw(src, False) == (
        "DataLoader(\n    ds,\n    batch_size=8,\n    shuffle=True,\n    pin_memory=torch.cuda.is_available())"
    )
    assert _kw(src, True) == (
        "DataLoader(\n    ds,\n    batch_size=8,\n    pin_memory=torch.cuda.is_available(),\n    shuffle=True)"
    )
    # After a positional last argument: on its line.
    assert _kw("DataLoader(\n    ds,\n    data)", True) == (
        "DataLoader(\n    ds,\n    data, pin_memory=torch.cuda.is_available())"
    )
    # One line, or `)` on its own line: as before, the comment is not in the way.
    assert (
        _kw("DataLoader(ds, shuffle=True)", True)
        == "DataLoader(ds, shuffle=True, pin_memory=torch.cuda.is_available())"
    )
    own_line = "DataLoader(\n    ds,\n    shuffle=True,\n)"
    assert _kw(own_line, True) == _kw(own_line, False)


GPU = "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\ndevice = torch.device('cuda')\n"
LOOP = "for (x,) in loader:\n    model(x.to(device, non_blocking=True)).sum().backward()\n"


def test_the_comment_after_a_loader_stays_with_its_argument():
    src = GPU + "model = nn.Linear(3, 1).to(device)\nloader = DataLoader(\n    ds,\n    shuffle=True)  # why?\n" + LOOP
    fixed, _ = fix_source(src, "a.py")
    assert "    ds,\n    pin_memory=torch.cuda.is_available(),\n    shuffle=True)  # why?\n" in fixed


def test_the_legacy_profiler_keeps_its_lines():
    src = (
        "import torch\nwith torch.autograd.profiler.profile(\n    use_cuda=True,\n    record_shapes=True,\n"
        "    profile_memory=True) as prof:\n    run()\nprof.export_chrome_trace('t.json')\n"
    )
    fixed, _ = fix_source(src, "a.py", unsafe=True)
    assert fixed.startswith(
        "import torch\nwith torch.profiler.profile(\n    record_shapes=True,\n    profile_memory=True,\n"
        "    activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:\n"
    )
    last = "import torch\nwith torch.autograd.profiler.profile(record_shapes=True, use_cuda=True) as p:\n    run()\n"
    fixed, _ = fix_source(last + "p.export_chrome_trace('t.json')\n", "a.py", unsafe=True)
    assert "torch.profiler.profile(record_shapes=True, activities=[" in fixed and ", )" not in fixed


def test_the_device_line_follows_a_blank_line_after_the_imports():
    src = "import torch\nmodel = torch.nn.Linear(10, 2)\nout = model(torch.randn(1, 10))\nprint(out.device)\n"
    fixed, _ = fix_source(src, "a.py", unsafe=True)
    assert fixed.startswith('import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n')
    spaced = src.replace("import torch\n", "import torch\n\n\n")
    fixed, _ = fix_source(spaced, "a.py", unsafe=True)
    assert fixed.startswith('import torch\n\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n')


def _cells(data: bytes):
    return [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in json.loads(data)["cells"]]


def test_an_import_a_fix_needs_is_added_once_per_notebook_cell():
    loaders = (
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds1, batch_size=2)\nb = DataLoader(ds2, batch_size=2)\nc = DataLoader(ds3)\n"
        "for (x,) in a:\n    model(x.to(device, non_blocking=True)).sum().backward()\n"
        "for (x,) in b:\n    model(x.to(device, non_blocking=True)).sum().backward()\n"
        "for (x,) in c:\n    model(x.to(device, non_blocking=True)).sum().backward()\n"
    )
    later = "import torch\ndevice = torch.device('cuda')\nmodel = torch.nn.Linear(3, 1).to(device)\n"
    nb = notebook(code("# data\n%load_ext autoreload\n" + loaders), code(later))
    new, _ = api.fix_bytes(nb, "n.ipynb")
    cell = _cells(new)[0]
    assert cell.count("import torch\n") == 1 and cell.count("pin_memory=torch.cuda.is_available()") == 3
    assert cell.startswith("# data\n%load_ext autoreload\nimport torch\n")  # at the top, after the IPython line


def test_diff_headers_and_notebook_cell_diffs():
    assert diff_label("a.py") == "a.py" and diff_label("my dir/a b.py") == "my dir/a b.py\t"
    assert unified_diff("a b.py", "x\n", "y\n").startswith("--- a b.py\t\n+++ a b.py\t\n")
    old = notebook(code("import os"), {"cell_type": "markdown", "metadata": {}, "source": "t"}, code("a = 1\nb = 2"))
    new = notebook(code("import os"), {"cell_type": "markdown", "metadata": {}, "source": "t"}, code("a = 1\nb = 3"))
    assert nbmod.cell_diff("n.ipynb", old, new) == (
        "--- n.ipynb:cell 3\n+++ n.ipynb:cell 3\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n\n"
    )
    assert nbmod.cell_diff("n.ipynb", old, old) == ""
    # Two changed cells of one notebook: a blank line between their diffs, as Ruff prints them.
    two_old = notebook(code("x = 1"), code("a = 1"))
    two_new = notebook(code("x = 2"), code("a = 2"))
    assert nbmod.cell_diff("n.ipynb", two_old, two_new) == (
        "--- n.ipynb:cell 1\n+++ n.ipynb:cell 1\n@@ -1 +1 @@\n-x = 1\n+x = 2\n\n"
        "--- n.ipynb:cell 2\n+++ n.ipynb:cell 2\n@@ -1 +1 @@\n-a = 1\n+a = 2\n\n"
    )
