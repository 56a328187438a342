"""Every door gives the same findings: a .py file, a notebook and stdin through
the CLI, the library (torchlint.api), the language server and the flake8
plugin (flake8 reads no notebooks: the .py and stdin only)."""

from __future__ import annotations

import ast
import json

import pytest
import pytest_lsp
from click.testing import CliRunner
from lsprotocol import types
from pytest_lsp import LanguageClient

from torchlint.doors.cli import main
from torchlint.doors.flake8_plugin import TorchlintChecker
from torchlint.source.notebook import JsonPositions

from helpers import api, code, notebook
from lsp_client import caps, open_doc, server_config

LINES = [
    "import torch\n",
    "from torch.autograd import profiler\n",
    "from torch.utils.data import DataLoader\n",
    "device = torch.device('cuda')\n",
    "loader = DataLoader(ds, batch_size=8)\n",
    "x = torch.ones(3, device=device)\n",
    "x.cuda()\n",
    "n = len(ds)\n",
    "for xb in loader:\n",
    "    h = torch.zeros(3).to(device)\n",
    "    y = torch.zeros(2).cuda()  # noqa: TL104\n",
    "    print((xb.to(device) + h + y).sum())\n",
    "with profiler.profile(use_cuda=True) as prof:\n",
    "    pass\n",
    "print(prof.key_averages().table())\n",
]
PY = "".join(LINES)


def _notebook() -> bytes:
    return notebook(
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
        code(LINES[:4]),
        code(["%time\n"] + LINES[4:8]),  # an IPython line among them
        code(LINES[8:]),
    )


NOTEBOOK = _notebook()
# What every door must report (code, cell, row, column), besides the messages.
EXPECTED = {
    "train.py": [
        ("TL104", None, 10, 9),
        ("TL105", None, 7, 1),
        ("TL302", None, 5, 10),
        ("TL303", None, 5, 10),
        ("TL501", None, 13, 6),
    ],
    "train.ipynb": [
        ("TL104", 4, 2, 9),
        ("TL105", 3, 4, 1),
        ("TL302", 3, 2, 10),
        ("TL303", 3, 2, 10),
        ("TL501", 4, 5, 6),
    ],
}
CONTENTS = {"train.py": PY.encode(), "train.ipynb": NOTEBOOK}


def key(code, cell, row, column, end_row, end_column, message):
    return (code, cell, row, column, end_row, end_column, message)


def of_findings(findings):
    return sorted(key(f.code, f.cell, f.row, f.column, f.end_row, f.end_column, f.message) for f in findings)


def of_json(text):
    return sorted(
        key(
            d["code"],
            d["cell"],
            d["location"]["row"],
            d["location"]["column"],
            d["end_location"]["row"],
            d["end_location"]["column"],
            d["message"],
        )
        for d in json.loads(text)
    )


@pytest.fixture(scope="module")
def library():
    """The library's findings for each input: the reference for the other doors."""
    out = {name: of_findings(api.lint_bytes(data, name).findings) for name, data in CONTENTS.items()}
    for name, found in out.items():
        assert [f[:4] for f in found] == EXPECTED[name]
    return out


@pytest.mark.parametrize("name", sorted(CONTENTS))
def test_library_doors_agree(library, name, tmp_path):
    data = CONTENTS[name]
    assert of_findings(api.check(data.decode(), name).findings) == library[name]
    assert of_findings(api.lint_source(data.decode(), name)) == library[name]
    assert of_findings(api.process_bytes(data, name).findings) == library[name]
    (tmp_path / name).write_bytes(data)
    assert of_findings(api.run([str(tmp_path / name)]).findings) == library[name]


@pytest.mark.parametrize("name", sorted(CONTENTS))
def test_cli_file_and_stdin_agree_with_the_library(library, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(CONTENTS[name])
    runner = CliRunner()
    by_path = runner.invoke(main, ["check", "--no-cache", "--output-format", "json", name])
    assert by_path.exit_code == 1, by_path.output
    assert of_json(by_path.stdout) == library[name]
    by_stdin = runner.invoke(
        main, ["check", "--output-format", "json", "--stdin-filename", name, "-"], input=CONTENTS[name]
    )
    assert by_stdin.exit_code == 1, by_stdin.output
    assert of_json(by_stdin.stdout) == library[name]


@pytest.mark.parametrize("filename", ["train.py", "stdin"])
def test_flake8_plugin_agrees_with_the_library(library, filename):
    lines = PY.splitlines(keepends=True)
    got = sorted(TorchlintChecker(ast.parse(PY), filename, lines).run())
    want = sorted(
        (row, column - 1, f"{code} {message}", TorchlintChecker)
        for code, _, row, column, _, _, message in library["train.py"]
    )
    assert got == want


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(capabilities=caps(), root_uri=None))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_server_agrees_with_the_library(library, client: LanguageClient, tmp_path):
    # A .py document: diagnostics at the findings' rows and columns (ASCII text).
    diags = await open_doc(client, (tmp_path / "train.py").as_uri(), PY)
    got = sorted(
        key(
            d.code,
            d.data.get("cell"),
            d.range.start.line + 1,
            d.range.start.character + 1,
            d.range.end.line + 1,
            d.range.end.character + 1,
            d.message,
        )
        for d in diags
    )
    assert got == library["train.py"]
    # A notebook open as JSON text: each diagnostic sits on its cell's characters
    # in the JSON, and says which cell.
    text = NOTEBOOK.decode()
    diags = await open_doc(client, (tmp_path / "train.ipynb").as_uri(), text)
    lines = text.split("\n")
    positions = JsonPositions(text)
    got = []
    for d in diags:
        start = sum(len(line) + 1 for line in lines[: d.range.start.line]) + d.range.start.character
        got.append((d.code, d.data["cell"], start, d.message))
    want = [
        (code, cell, positions.offset(cell, row, column), message)
        for code, cell, row, column, _, _, message in library["train.ipynb"]
    ]
    assert sorted(got) == sorted(want)
    # and those places hold what the findings point at
    starts = {code: text[offset : offset + 12] for code, _, offset, _ in got}
    assert starts["TL104"] == "torch.zeros(" and starts["TL105"] == 'x.cuda()\\n",'
    assert starts["TL501"] == "profiler.pro"
