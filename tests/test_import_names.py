"""The importer search's second cheap test (import_names.py): the names a
file's import statements bind, a superset of the summary's, and the search
summarising only the files one of whose imports names a run file."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import List

from click.testing import CliRunner

from torchlint.analysis.project.import_names import imported_names
from torchlint.analysis.project.imports import imported_summaries
from torchlint.analysis.project.kinds import ModuleSummary
from torchlint.analysis.project.summary import summarize
from torchlint.doors.cli import main

from helpers import write_files as write

EVERYWHERE = textwrap.dedent(
    """
    import os, torch.nn as nn
    from . import sibling
    from ..pkg.model import Net as N
    from helpers import *
    try:
        import fast_io
    except ImportError:
        from slow import io as fast_io
    if True:
        from config import get_args
    class Trainer:
        from metrics import Meter
        def fit(self):
            import inner.deep
    def main():
        from data import load
    match os.name:
        case "nt":
            from windows import paths
    """
)


def test_every_import_statement_at_any_depth():
    assert imported_names(EVERYWHERE) == (
        "..pkg.model.Net",
        ".sibling",
        "config.get_args",
        "data.load",
        "fast_io",
        "helpers",
        "inner",
        "metrics.Meter",
        "os",
        "slow.io",
        "torch.nn",
        "windows.paths",
    )


def test_a_superset_of_what_the_summary_records():
    summary = summarize(EVERYWHERE + "import config as get_args\n")  # a local name bound twice
    recorded = {name for _, name in summary.imports} | set(summary.star_imports)
    assert recorded and recorded <= set(imported_names(EVERYWHERE + "import config as get_args\n"))


def test_an_unparseable_text_names_nothing():
    assert imported_names("from data import (\n") == ()
    assert imported_names("") == ()


FILES = {
    "data.py": "import torch\nclass Images(torch.utils.data.Dataset):\n    pass\n",
    "train.py": "from torch.utils.data import DataLoader\nfrom data import Images\n",
    "evaluate.py": "from torch.utils.data import DataLoader\nimport torch.utils.data as data\n",
    "plot.py": "def f():\n    from .data import Images\n",  # a relative import of it, in a function
}


def test_the_search_summarises_only_files_importing_a_run_file(tmp_path):
    write(tmp_path, FILES)
    root = str(tmp_path)
    data = str(tmp_path / "data.py")
    run = {data: summarize(Path(data).read_text())}
    read_paths: List[str] = []
    asked: List[str] = []

    def read(path: str) -> ModuleSummary:
        read_paths.append(os.path.basename(path))
        return summarize(Path(path).read_text())

    def names(path: str):
        asked.append(os.path.basename(path))
        return imported_names(Path(path).read_text())

    without = {os.path.basename(p) for p in imported_summaries(run, root, read)}
    assert "evaluate.py" in read_paths  # `data` is among its import words: summarised, then left out
    read_paths.clear()
    found = {os.path.basename(p) for p in imported_summaries(run, root, read, names=names)}
    assert found == without == {"train.py", "plot.py"}
    assert "evaluate.py" in asked and "evaluate.py" not in read_paths
    assert sorted(read_paths) == ["plot.py", "train.py"]


def test_a_cold_run_parses_no_file_that_only_mentions_a_run_files_name(tmp_path, monkeypatch, summarised):
    """`from torch.utils.data import DataLoader` beside a project `data.py`: not summarised."""
    write(tmp_path, dict(FILES, **{"setup.cfg": ""}))
    monkeypatch.chdir(tmp_path)
    args = ["check", "--preview", "--output-format", "concise", "data.py"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code in (0, 1), first.output
    assert sorted(summarised.names()) == ["data.py", "plot.py", "train.py"]
    summarised.clear()
    again = CliRunner().invoke(main, args + ["--no-cache"])
    assert again.stdout == first.stdout and "evaluate.py" not in summarised.names()
