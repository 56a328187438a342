"""A run over some files of a project reads the project files they import
(torchlint/analysis/project/imports.py): `torchlint train.py` finds what
`torchlint .` finds in train.py; nothing outside the project root is read."""

import os
import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from click.testing import CliRunner

from torchlint.analysis.project.imports import imported_summaries
from torchlint.analysis.project.kinds import ModuleSummary
from torchlint.analysis.project.summary import summarize
from torchlint.doors.cli import main
from torchlint.files.project_pass import build_index

BASE = """
import torch.nn as nn

class Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
"""
PLAIN = "class Trunk:\n    pass\n"
MODEL = """
from base import Trunk

class Net(Trunk):
    def forward(self, x):
        return self.fc(x)
"""
TRAIN = """
import torch
from model import Net

device = torch.device("cuda")
net = Net()
for x, y in loader:
    x = x.to(device)
    out = net(x)
    out.sum().backward()
"""


def write(root: Path, files: Dict[str, str]) -> None:
    for name, src in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(src).lstrip("\n"), encoding="utf-8")


def check(*args: str) -> List[Tuple[str, str]]:
    """(file:row, code) of `torchlint check --preview` in the current folder."""
    result = CliRunner().invoke(main, ["check", "--preview", "--no-cache", "--output-format", "concise", *args])
    assert result.exit_code in (0, 1), result.output
    out = []
    for line in result.output.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[3].strip().startswith("TL"):
            out.append((f"{parts[0]}:{parts[1]}", parts[3].split()[0]))
    return out


def test_one_file_sees_the_modules_it_imports(tmp_path, monkeypatch):
    write(tmp_path, {"base.py": BASE, "model.py": MODEL, "train.py": TRAIN})
    monkeypatch.chdir(tmp_path)
    whole = [f for f in check(".") if f[0].startswith("train.py")]
    assert whole == [("train.py:5", "TL101")]  # `net = Net()`: a module (through base.py) never moved
    assert check("train.py") == whole


def test_a_plain_base_stays_silent(tmp_path, monkeypatch):
    write(tmp_path, {"base.py": PLAIN, "model.py": MODEL, "train.py": TRAIN})
    monkeypatch.chdir(tmp_path)
    assert check("train.py") == []


def test_a_module_outside_the_project_root_is_not_read(tmp_path, monkeypatch):
    write(tmp_path, {"base.py": BASE, "model.py": MODEL, "proj/train.py": TRAIN, "proj/pyproject.toml": ""})
    monkeypatch.chdir(tmp_path / "proj")
    assert check("train.py") == []  # model.py lies above the project root


def test_an_import_found_nowhere_stays_unknown(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": TRAIN})
    monkeypatch.chdir(tmp_path)
    assert check("train.py") == []


def _summaries(root: Path, names: List[str]) -> Dict[str, ModuleSummary]:
    return {str(root / n): summarize((root / n).read_text()) for n in names}


def test_transitive_bounded_and_admitted(tmp_path):
    files = {f"m{i}.py": f"from m{i + 1} import x\n" for i in range(5)}
    files["m5.py"] = "x = 1\n"
    files["pkg/__init__.py"] = ""
    files["pkg/sub.py"] = "from . import other\n"
    files["pkg/other.py"] = ""
    files["main.py"] = "from m1 import x\nfrom pkg import sub\nimport torch\n"
    write(tmp_path, files)
    root = str(tmp_path)
    run = _summaries(tmp_path, ["main.py"])

    def read(path: str) -> ModuleSummary:
        return summarize(Path(path).read_text())

    found = {os.path.relpath(p, root) for p in imported_summaries(run, root, read)}
    assert found == {"m1.py", "m2.py", "m3.py", "m4.py", "m5.py", "pkg/__init__.py", "pkg/sub.py", "pkg/other.py"}
    assert len(imported_summaries(run, root, read, limit=2)) == 2
    skipped = imported_summaries(run, root, read, admit=lambda p: not p.endswith("m2.py"))
    assert {os.path.relpath(p, root) for p in skipped} == {"m1.py", "pkg/__init__.py", "pkg/sub.py", "pkg/other.py"}


def test_imported_files_share_the_summary_cache(tmp_path):
    from torchlint.files.project_pass import summary_cache

    write(tmp_path, {"base.py": BASE, "model.py": MODEL, "train.py": TRAIN})
    train = str(tmp_path / "train.py")
    cache = summary_cache(str(tmp_path))
    first = build_index([(train, Path(train).read_bytes())], [train], cache, str(tmp_path))
    assert {os.path.basename(p) for p in first.paths} == {"train.py", "model.py", "base.py"}
    data = (tmp_path / "model.py").read_bytes()
    assert isinstance(cache.get(data, str(tmp_path / "model.py")), ModuleSummary)
    again = build_index([(train, Path(train).read_bytes())], [train], cache, str(tmp_path))
    assert again.summaries() == first.summaries()


def test_a_file_outside_the_current_folder_reads_its_package(tmp_path, monkeypatch):
    """A run's file outside the project root is read with the folder its top-level
    package sits in as its root: `from src.model import Net` in `src/train.py`."""
    model = MODEL.replace("from base import", "from src.base import")
    train = TRAIN.replace("from model import", "from src.model import")
    write(tmp_path, {"repo/src/__init__.py": "", "repo/src/base.py": BASE, "repo/src/model.py": model})
    write(tmp_path, {"repo/src/train.py": train, "elsewhere/pyproject.toml": ""})
    monkeypatch.chdir(tmp_path / "elsewhere")
    target = str(tmp_path / "repo" / "src" / "train.py")
    assert [code for _, code in check(target)] == ["TL101"]
    (tmp_path / "repo" / "src" / "__init__.py").unlink()  # not a package: `src.model` is found nowhere
    assert check(target) == []


# -- the files that import a run's files -------------------------------------------------------

HEAD = """
import torch
from torch import nn

class RadialHead(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.centres = torch.arange(0.0, 8.0)
        self.mix = nn.Linear(width, 8)

    def forward(self, h, r):
        gate = self.mix(h).sigmoid()
        return gate * (r.unsqueeze(-1) - self.centres).pow(2)
"""
FIT = """
import torch
from heads import RadialHead

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
head = RadialHead(32).to(dev)
"""


def test_one_file_sees_the_files_that_import_it(tmp_path, monkeypatch):
    write(tmp_path, {"heads.py": HEAD, "fit.py": FIT})
    monkeypatch.chdir(tmp_path)
    whole = [f for f in check(".") if f[0].startswith("heads.py")]
    assert whole == [("heads.py:7", "TL102")]  # fit.py moves the module to the accelerator
    assert check("heads.py") == whole
    write(tmp_path, {"fit.py": FIT.replace(".to(dev)", "")})  # nothing moves it: silent either way
    assert check("heads.py") == [] == [f for f in check(".") if f[0].startswith("heads.py")]


@pytest.mark.parametrize(
    "files",
    [
        {"pkg/__init__.py": "", "pkg/heads.py": HEAD, "pkg/fit.py": FIT.replace("from heads", "from .heads")},
        {"pkg/__init__.py": "", "pkg/heads.py": HEAD, "fit.py": FIT.replace("from heads", "from pkg.heads")},
        {
            "pkg/__init__.py": "",
            "pkg/heads.py": HEAD,
            "fit.py": FIT.replace("from heads import RadialHead", "from pkg import heads").replace(
                "RadialHead(", "heads.RadialHead("
            ),
        },
        # re-exported by the package: an importer of an importer
        {
            "pkg/__init__.py": "from .heads import RadialHead\n",
            "pkg/heads.py": HEAD,
            "fit.py": FIT.replace("from heads", "from pkg"),
        },
    ],
)
def test_an_importer_is_found_whatever_its_import_reads(tmp_path, monkeypatch, files):
    write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    assert check("pkg/heads.py") == [("pkg/heads.py:7", "TL102")]


def test_an_importer_outside_the_project_root_is_not_read(tmp_path, monkeypatch):
    write(
        tmp_path,
        {"proj/heads.py": HEAD, "proj/pyproject.toml": "", "fit.py": FIT.replace("from heads", "from proj.heads")},
    )
    monkeypatch.chdir(tmp_path / "proj")
    assert check("heads.py") == []  # fit.py lies above the project root
    (tmp_path / "proj" / "pyproject.toml").unlink()
    monkeypatch.chdir(tmp_path)  # the root is the current folder: fit.py is read
    assert check("proj/heads.py") == [("proj/heads.py:7", "TL102")]


@pytest.mark.parametrize("folder", ["sub", ".hidden", "venv", "site-packages", "node_modules", "build"])
def test_an_importer_in_a_skipped_folder_is_not_read(tmp_path, monkeypatch, folder):
    write(tmp_path, {"heads.py": HEAD, f"{folder}/fit.py": FIT, "pyproject.toml": ""})
    if folder == "venv":
        (tmp_path / folder / "pyvenv.cfg").write_text("")
    monkeypatch.chdir(tmp_path)
    assert check("heads.py") == ([("heads.py:7", "TL102")] if folder == "sub" else [])


def test_importers_are_bounded_listed_once_and_confirmed(tmp_path):
    files = {"core.py": "x = 1\n", "helper.py": "y = 2\n"}
    files.update({f"user{i}.py": "from core import x\nfrom helper import y\n" for i in range(6)})
    files["pkg/__init__.py"] = "from core import x\n"  # an importer: its users are importers too
    files["late.py"] = "from pkg import x\n"
    files["mention.py"] = "import os\n# core\ncore = 1\n"  # names `core`, imports nothing of it
    files["other.py"] = "from elsewhere import core\n"  # an import of another module named so
    write(tmp_path, files)
    root = str(tmp_path)
    run = _summaries(tmp_path, ["core.py"])
    read_paths: List[str] = []

    def read(path: str) -> ModuleSummary:
        read_paths.append(os.path.relpath(path, root))
        return summarize(Path(path).read_text())

    found = {os.path.relpath(p, root) for p in imported_summaries(run, root, read)}
    users = {f"user{i}.py" for i in range(6)}
    assert found == users | {"pkg/__init__.py", "late.py", "helper.py"}  # and what the importers import
    assert "mention.py" not in read_paths  # the cheap test: `core` is never imported there
    assert "other.py" in read_paths and len(read_paths) == len(set(read_paths))  # read once, then left out
    assert len(imported_summaries(run, root, read, importers=3)) == 3
    assert imported_summaries(run, root, read, importers=0) == {}
    assert imported_summaries(run, root, read, listed=5) == {}  # too many files to list: no search
    skipped = imported_summaries(run, root, read, admit=lambda p: "user" not in p)
    assert {os.path.relpath(p, root) for p in skipped} == {"pkg/__init__.py", "late.py"}


def test_importers_share_the_summary_cache(tmp_path):
    from torchlint.files.project_pass import summary_cache

    write(tmp_path, {"heads.py": HEAD, "fit.py": FIT})
    heads = str(tmp_path / "heads.py")
    cache = summary_cache(str(tmp_path))
    first = build_index([(heads, Path(heads).read_bytes())], [heads], cache, str(tmp_path))
    assert {os.path.basename(p) for p in first.paths} == {"heads.py", "fit.py"}
    assert isinstance(cache.get((tmp_path / "fit.py").read_bytes(), str(tmp_path / "fit.py")), ModuleSummary)
    again = build_index([(heads, Path(heads).read_bytes())], [heads], cache, str(tmp_path))
    assert again.summaries() == first.summaries()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_under_the_root_is_never_opened(tmp_path, monkeypatch):
    write(tmp_path, {"heads.py": HEAD, "fit.py": FIT})
    os.mkfifo(tmp_path / "pipe.py")  # opening it would block
    monkeypatch.chdir(tmp_path)
    assert check("heads.py") == [("heads.py:7", "TL102")]


def test_a_file_passed_over_as_an_importer_is_read_when_an_importer_imports_it(tmp_path):
    """`trainer.py` mentions `model` without importing it: passed over as an
    importer of model.py, it is still read when `train.py` (an importer) imports it."""
    write(
        tmp_path,
        {
            "model.py": "import torch\nclass Net(torch.nn.Module):\n    pass\n",
            "train.py": "from model import Net\nfrom trainer import fit\nfit(Net(), 'cuda')\n",
            "trainer.py": "import torch\n\ndef fit(model, device):\n    model.to(device)\n",
        },
    )
    model = str(tmp_path / "model.py")
    index = build_index([(model, Path(model).read_bytes())], [model], None, str(tmp_path))
    assert {os.path.basename(p) for p in index.paths} == {"model.py", "train.py", "trainer.py"}


def test_a_root_holding_a_data_folder_of_many_files_is_not_listed(tmp_path):
    from torchlint.analysis.project import imports

    write(tmp_path, {"model.py": "x = 1\n", "data/README": "images\n"})
    for i in range(120):
        (tmp_path / "data" / f"img{i}.png").write_bytes(b"")
    assert imports._listing(str(tmp_path), lambda p: True, limit=6) is None  # 123 entries > 6 * 20
    assert imports._listing(str(tmp_path), lambda p: True, limit=7) == [str(tmp_path / "model.py")]
