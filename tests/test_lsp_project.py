"""The language server reads a workspace as one project (torchlint/analysis/
project/): a document's findings depend on the other files of the workspace,
and on their unsaved text in the editor. One server per test, started on a
workspace in tmp_path; every wait is for an event, bounded by a timeout."""

from __future__ import annotations

import textwrap

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_client import caps, change_doc, open_doc, server_config

pytestmark = pytest.mark.asyncio

BACKBONE_MODULE = """
import torch.nn as nn

class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
"""
BACKBONE_PLAIN = "class Backbone:\n    pass\n"
TRAIN = """
import torch
from models.base import Backbone

class Net(Backbone):
    def forward(self, x):
        return self.fc(x)

device = torch.device("cuda")
net = Net()
for x, y in loader:
    x = x.to(device)
    out = net(x)
    out.sum().backward()
"""


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient):
    yield


async def test_workspace_files_and_unsaved_edits_count(client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\npreview = true\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "base.py").write_text(textwrap.dedent(BACKBONE_MODULE))
    train = textwrap.dedent(TRAIN).lstrip("\n")
    (tmp_path / "train.py").write_text(train)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=caps(),
            root_uri=tmp_path.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="proj")],
        )
    )
    train_uri = (tmp_path / "train.py").as_uri()
    diags = await open_doc(client, train_uri, train)
    assert [(d.code, d.range.start.line) for d in diags] == [
        ("TL101", 8)
    ]  # `net = Net()`: a module (the base's file on disk)
    # The base edited in the editor, not saved: no module any more.
    await open_doc(client, (tmp_path / "models" / "base.py").as_uri(), BACKBONE_PLAIN)
    diags = await change_doc(client, train_uri, train + "\n", 2)
    assert list(diags) == []
    await client.shutdown_session()
