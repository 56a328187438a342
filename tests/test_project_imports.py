"""A run over some files of a project reads the project files they import
(torchlint/analysis/project/imports.py): `torchlint train.py` finds what
`torchlint .` finds in train.py; nothing outside the project root is read."""

import os
import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

from click.testing import CliRunner

from torchlint.analysis.project.build import build_index
from torchlint.analysis.project.imports import imported_summaries
from torchlint.analysis.project.kinds import ModuleSummary
from torchlint.analysis.project.summary import summarize
from torchlint.cli import main

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
    from torchlint.analysis.project.build import summary_cache

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
