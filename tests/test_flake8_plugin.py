"""`flake8 --select TL` reports torchlint's findings through the plugin's entry point."""

import ast
import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from torchlint.doors.flake8_plugin import TorchlintChecker

from helpers import TL104_FIXED, TL104_SRC, code, notebook

ENTRY = "torchlint.doors.flake8_plugin:TorchlintChecker"
BAD, CLEAN = TL104_SRC, TL104_FIXED


def _run(source):
    lines = source.splitlines(keepends=True)
    return list(TorchlintChecker(ast.parse(source), "bad.py", lines).run())


def test_checker_yields_flake8_tuples():
    [(row, col, text, kind)] = _run(BAD)
    assert (row, col) == (3, 4)  # flake8 columns are 0-based
    assert text.startswith("TL104 ") and kind is TorchlintChecker
    assert _run(CLEAN) == []


def test_checker_honours_torchlint_suppressions():
    assert _run(BAD.replace("(device)\n", "(device)  # torchlint: ignore[TL104]\n")) == []


NOTEBOOK = notebook(
    code(["import torch\n", "device = torch.device('cuda')\n"]),
    {"cell_type": "markdown", "metadata": {}, "source": ["# Training"]},
    code(["x = 1\n", "y = torch.zeros(3).to(device)\n"]),
).decode()


def test_a_notebook_finding_keeps_its_cell():
    """Issue 27: flake8 on an .ipynb reported `nb.ipynb:2:5` (the row in the
    cell) without the cell. The finding is placed on the JSON line that holds
    that cell's code, and the message names the cell and the row in it."""
    lines = NOTEBOOK.splitlines(keepends=True)
    [(row, col, text, _)] = list(TorchlintChecker(None, "nb.ipynb", lines).run())
    assert text == "TL104 cell 3:2:5: Tensor is created on the CPU and then moved; create it on the device directly"
    assert lines[row - 1][col:].startswith('torch.zeros(3).to(device)\\n"'), (row, col, lines[row - 1])


def test_the_plugin_reads_the_configuration_and_warns_once_when_it_is_broken(tmp_path, monkeypatch, capsys):
    """The table's selection applies (flake8 selects among what is left), and
    a broken table is one warning on stderr, not silence, and not one per file."""
    from torchlint.doors import flake8_plugin

    monkeypatch.setattr(flake8_plugin, "_WARNED", set())
    monkeypatch.chdir(tmp_path)
    lines = BAD.splitlines(keepends=True)
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL104"]\n')
    assert list(TorchlintChecker(None, str(tmp_path / "bad.py"), lines).run()) == []
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nselekt = ["TL1"]\n')
    TorchlintChecker.parse_options(None)  # flake8's main process, before its workers
    for name in ("a.py", "b.py"):
        [(_, _, text, _)] = list(TorchlintChecker(None, str(tmp_path / name), lines).run())
        assert text.startswith("TL104 ")  # the defaults (preview from TORCHLINT_PREVIEW, as the tests set it)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"torchlint: warning: {tmp_path / 'pyproject.toml'}: unknown key 'selekt' in [tool.torchlint] (known: "
        + err[0].split("(known: ")[1]
    ]
    assert err[0].endswith("; the flake8 plugin uses the default settings")


def _registered() -> bool:
    eps = entry_points()
    group = eps.select(group="flake8.extension") if hasattr(eps, "select") else eps.get("flake8.extension", [])
    return any(ep.value == ENTRY for ep in group)


@pytest.fixture
def plugin_path(tmp_path, root):
    """PYTHONPATH under which flake8 finds the plugin. An installed torchlint
    (`pip install -e .`) already registers it; otherwise a throwaway dist-info
    carries the same entry point."""
    paths = [str(root)]
    if not _registered():
        site = tmp_path / "site"
        dist = site / "torchlint_flake8_test-0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torchlint-flake8-test\nVersion: 0\n")
        (dist / "entry_points.txt").write_text(f"[flake8.extension]\nTL = {ENTRY}\n")
        paths.append(str(site))
    return os.pathsep.join(paths)


@pytest.mark.slow
def test_flake8_select_tl_reports_findings(tmp_path, plugin_path):
    work = tmp_path / "proj"
    work.mkdir()
    (work / "bad.py").write_text(BAD)
    (work / "clean.py").write_text(CLEAN)
    env = dict(os.environ, PYTHONPATH=plugin_path)
    cmd = [sys.executable, "-m", "flake8", "--isolated", "--select", "TL"]
    bad = subprocess.run(cmd + ["bad.py"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stderr
    assert bad.stdout.startswith("bad.py:3:5: TL104 "), bad.stdout + bad.stderr
    assert bad.stdout.count("\n") == 1
    clean = subprocess.run(cmd + ["clean.py"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert (clean.returncode, clean.stdout) == (0, ""), clean.stderr
    # flake8's own noqa works on TL codes.
    (work / "bad.py").write_text(BAD.replace("(device)\n", "(device)  # noqa: TL104\n"))
    quiet = subprocess.run(cmd + ["bad.py"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert (quiet.returncode, quiet.stdout) == (0, ""), quiet.stderr


@pytest.mark.slow
def test_flake8_on_a_notebook_names_the_cell(tmp_path, plugin_path):
    (tmp_path / "nb.ipynb").write_text(NOTEBOOK)
    env = dict(os.environ, PYTHONPATH=plugin_path)
    cmd = [sys.executable, "-m", "flake8", "--isolated", "--select", "TL", "nb.ipynb"]
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    row = NOTEBOOK.splitlines().index('    "y = torch.zeros(3).to(device)\\n"') + 1
    assert out.stdout == f"nb.ipynb:{row}:10: TL104 cell 3:2:5: Tensor is created on the CPU and then moved; " + (
        "create it on the device directly\n"
    ), out.stdout + out.stderr
