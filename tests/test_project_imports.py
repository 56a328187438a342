"""A run over some files of a project reads the project files they import
(torchlint/analysis/project/imports.py): `torchlint train.py` finds what
`torchlint .` finds in train.py; nothing outside the project root is read."""

import os
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from click.testing import CliRunner

from torchlint.analysis.project.imports import imported_summaries
from torchlint.analysis.project.kinds import ModuleSummary
from torchlint.analysis.project.summary import summarize
from torchlint.doors.cli import main
from torchlint.files.project_pass import build_index

from helpers import write_files as write

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
    monkeypatch.chdir(tmp_path)  # no marker: the root is the linted file's folder, never the current one
    assert check("proj/heads.py") == []
    (tmp_path / "setup.cfg").write_text("")  # a marker above: the project is tmp_path, fit.py is read
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
    assert imports.listing(str(tmp_path), lambda p: True, limit=6) is None  # 123 entries > 6 * 20
    assert imports.listing(str(tmp_path), lambda p: True, limit=7) == [str(tmp_path / "model.py")]


# -- the project root and the budget (issue 42) ------------------------------------------------

MODEL_NET = "import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n"


def _spy(monkeypatch) -> List[str]:
    """The paths whose summaries the project pass asks for, cached or not."""
    from torchlint.files import project_pass

    asked: List[str] = []
    real = project_pass._cached_summary

    def spy(path, data, cache):
        asked.append(os.path.realpath(path))
        return real(path, data, cache)

    monkeypatch.setattr(project_pass, "_cached_summary", spy)
    return asked


def test_a_folder_inside_a_larger_tree_reads_nothing_outside_its_project(tmp_path, monkeypatch):
    """No marker above: the linted folder is the project, whatever the current
    folder holds around it (files that import its modules, a module it imports)."""
    project = {"proj/heads.py": HEAD, "proj/train.py": TRAIN, "proj/base.py": BASE}
    around = {f"other{i}/fit{j}.py": FIT.replace("from heads", "from proj.heads") for i in range(3) for j in range(4)}
    around.update({"model.py": MODEL_NET, "other0/model.py": MODEL_NET, "proj_fit.py": FIT})
    write(tmp_path / "alone", project)
    write(tmp_path / "tree", {**project, **around})
    monkeypatch.chdir(tmp_path / "alone")
    alone = check("proj")
    monkeypatch.chdir(tmp_path / "tree")
    asked = _spy(monkeypatch)
    assert check("proj") == alone
    assert check("proj/heads.py") == [f for f in alone if f[0].startswith("proj/heads.py")]
    assert check("proj/train.py") == [f for f in alone if f[0].startswith("proj/train.py")] == []
    inside = os.path.realpath(tmp_path / "tree" / "proj")
    assert asked and all(p.startswith(inside + os.sep) for p in asked)
    (tmp_path / "tree" / ".git").mkdir()  # now the tree is the project: its files count
    assert check("proj/heads.py") == [("proj/heads.py:7", "TL102")]
    assert check("proj/train.py") == [("proj/train.py:5", "TL101")]  # `from model import Net`: tree/model.py


def test_the_nearest_marker_is_the_root(tmp_path, monkeypatch):
    from torchlint.files.project_root import ProjectRoots

    write(tmp_path, {"a/setup.py": "", "a/src/pkg/__init__.py": "", "a/src/pkg/m.py": "", "b/pkg/__init__.py": ""})
    write(tmp_path, {"b/pkg/sub/__init__.py": "", "b/pkg/sub/m.py": "", "c/d/m.py": "", "e/.git": "gitdir: x\n"})
    write(tmp_path, {"e/m.py": ""})
    real = os.path.realpath(tmp_path)
    roots = ProjectRoots([str(tmp_path / "a" / "src"), str(tmp_path / "b" / "pkg" / "sub"), str(tmp_path / "c")])
    assert roots.of(str(tmp_path / "a" / "src" / "pkg" / "m.py")) == os.path.join(real, "a")  # a marker above
    assert roots.of(str(tmp_path / "b" / "pkg" / "sub" / "m.py")) == os.path.join(real, "b")  # its top package's folder
    assert roots.of(str(tmp_path / "c" / "d" / "m.py")) == os.path.join(real, "c")  # the linted folder itself
    assert ProjectRoots([str(tmp_path / "c" / "d" / "m.py")]).of(str(tmp_path / "c" / "d" / "m.py")) == os.path.join(
        real, "c", "d"
    )  # a file: its folder
    assert ProjectRoots([str(tmp_path)]).of(str(tmp_path / "e" / "m.py")) == os.path.join(real, "e")  # .git, a file
    configured = ProjectRoots([str(tmp_path / "a")], str(tmp_path))  # a configuration holding the file wins
    assert configured.of(str(tmp_path / "a" / "src" / "pkg" / "m.py")) == real


def _budget_project(tmp_path: Path, importers: int) -> None:
    files = {"setup.cfg": "", "heads.py": HEAD}
    files.update({f"fit{i:02d}.py": FIT for i in range(importers)})
    write(tmp_path, files)


def test_a_run_over_its_budget_says_so_once(tmp_path, monkeypatch):
    from torchlint.analysis.project import imports

    _budget_project(tmp_path, 8)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(imports, "MAX_READ", 3)  # files, not seconds: deterministic
    monkeypatch.setattr(imports, "MAX_SECONDS", 3600.0)
    asked = _spy(monkeypatch)
    args = ["check", "--preview", "--no-cache", "--output-format", "concise", "heads.py"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "heads.py:7:" in result.stdout  # fit00.py, read within the budget, moves the head
    lines = [line for line in result.stderr.splitlines() if "project pass" in line]
    assert len(lines) == 1, result.stderr
    assert f"under {os.path.realpath(tmp_path)} after 3 (at most 3 files" in lines[0]
    assert lines[0].startswith("torchlint: warning: ")
    assert len([p for p in asked if os.path.basename(p).startswith("fit")]) == 3
    quiet = CliRunner().invoke(main, args + ["-q"])
    assert "project pass" not in quiet.stderr
    monkeypatch.setattr(imports, "MAX_READ", 9)  # within the budget: nothing said
    assert "project pass" not in CliRunner().invoke(main, args).stderr


def test_each_project_root_has_its_own_budget(tmp_path, monkeypatch):
    """A run over two projects: the first spending its allowance leaves the second searched."""
    from torchlint.analysis.project import imports

    big, small = tmp_path / "big", tmp_path / "small"
    _budget_project(big, 8)
    _budget_project(small, 1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(imports, "MAX_READ", 3)
    monkeypatch.setattr(imports, "MAX_SECONDS", 3600.0)
    args = ["check", "--preview", "--no-cache", "--output-format", "concise", "big/heads.py", "small/heads.py"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert os.path.join("small", "heads.py") + ":7:" in result.stdout  # its importer was read
    (line,) = [line for line in result.stderr.splitlines() if "project pass" in line]
    assert f"under {os.path.realpath(big)} after 3 (at most 3 files" in line


def test_a_root_too_big_to_list_says_so(tmp_path, monkeypatch):
    from torchlint.analysis.project import imports

    _budget_project(tmp_path, 8)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(imports, "MAX_LISTED", 4)
    result = CliRunner().invoke(main, ["check", "--preview", "--no-cache", "--output-format", "concise", "heads.py"])
    assert result.exit_code == 0, result.output  # no importer read: nothing moves the head
    (line,) = [line for line in result.stderr.splitlines() if "project pass" in line]
    assert f"{os.path.realpath(tmp_path)} is too big to search" in line


def test_the_time_budget_stops_the_search(tmp_path):
    from torchlint.analysis.project.imports import SECONDS, Budget

    _budget_project(tmp_path, 8)
    ticks = iter(range(100))
    budget = Budget(files=100, seconds=2.5, clock=lambda: float(next(ticks)))
    heads = str(tmp_path / "heads.py")
    build_index([(heads, Path(heads).read_bytes())], [heads], None, {heads: str(tmp_path)}, budget=budget)
    assert budget.crossed == [(str(tmp_path), SECONDS)] and budget.read < 8


def test_a_second_cold_run_parses_no_file_outside_it_again(tmp_path, monkeypatch, summarised):
    """Summaries of the files outside the run are cached by contents like the run's."""
    write(tmp_path, {"setup.cfg": "", "heads.py": HEAD, "fit.py": FIT, "base.py": BASE, "model.py": MODEL})
    monkeypatch.chdir(tmp_path)
    args = ["check", "--preview", "--output-format", "concise", "heads.py"]
    first = CliRunner().invoke(main, args)
    assert "fit.py" in summarised.names()
    summarised.clear()
    (tmp_path / "heads.py").write_text((tmp_path / "heads.py").read_text() + "# edited\n")  # the run's file misses
    again = CliRunner().invoke(main, args)
    assert summarised.names() == ["heads.py"] and again.stdout == first.stdout


def test_the_workspace_index_obeys_the_same_bound(tmp_path, monkeypatch, summarised):
    """A workspace folder too big to index whole: an open file reads what
    `torchlint check FILE` reads (its imports, its importers, in its project)."""
    from torchlint.doors.lsp.project import WorkspaceProject
    from torchlint.files import project_pass

    from helpers import api

    write(tmp_path, {"ws/.git": "", "ws/heads.py": HEAD, "ws/fit.py": FIT, "ws/base.py": BASE, "ws/model.py": MODEL})
    write(tmp_path, {"ws/train.py": TRAIN, "outside.py": FIT.replace("from heads", "from ws.heads")})
    write(tmp_path, {f"ws/pad/m{i}.py": "x = 1\n" for i in range(10)})
    monkeypatch.setattr(project_pass, "MAX_WORKSPACE_FILES", 5)
    server = WorkspaceProject()
    server.warm([str(tmp_path / "ws")])
    assert summarised == []  # nothing indexed: too many files
    train = str(tmp_path / "ws" / "train.py")
    text = (tmp_path / "ws" / "train.py").read_text()
    index = server.index_for(train, text)
    assert [f.code for f in api.lint_source(text, train, project=index)] == ["TL101"]
    assert set(summarised.relative(tmp_path)) == {"ws/train.py", "ws/model.py", "ws/base.py"}  # nothing imports it
    summarised.clear()
    heads = str(tmp_path / "ws" / "heads.py")
    head_text = (tmp_path / "ws" / "heads.py").read_text()
    index = server.index_for(heads, head_text)
    assert [f.code for f in api.lint_source(head_text, heads, project=index)] == ["TL102"]
    assert "outside.py" not in summarised.relative(tmp_path) and "ws/fit.py" in summarised.relative(tmp_path)
    assert server.index_for(heads, head_text) is index  # searched once
    notes = server._workspace.notes if server._workspace is not None else []
    assert len(notes) == 1 and "not indexed whole" in notes[0]
