"""Helpers for the language-server tests: a pytest-lsp client that records every
publishDiagnostics (with its version), waiting on publishes, applying edits."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

PUBLISH = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
WAIT_S = 120.0  # a hang guard, not a speed bound: tests wait for events, never sleep


def _record_publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)  # type: ignore[attr-defined]


def _record_apply_edit(client: LanguageClient, params: types.ApplyWorkspaceEditParams):
    client.applied.append(params)  # type: ignore[attr-defined]
    return types.ApplyWorkspaceEditResult(applied=True)


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # type: ignore[attr-defined]
    client.applied = []  # type: ignore[attr-defined]  # workspace/applyEdit requests, in order
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[PUBLISH] = _record_publish
    features[types.WORKSPACE_APPLY_EDIT] = _record_apply_edit
    register_lsp_features(client, features)
    return client


def server_config(prelude: str = "") -> ClientServerConfig:
    """Start `torchlint server` (via torchlint.doors.server.main, as `torchlint server`
    does once the CLI registers it) after running `prelude` in the server process."""
    # Every rule, preview ones included, as in the rest of the tests (the server reads
    # TORCHLINT_PREVIEW, as the command line does).
    code = f"import os\nos.environ.setdefault('TORCHLINT_PREVIEW', '1')\n{prelude}\nfrom torchlint.doors.server import main\nmain()\n"
    return ClientServerConfig(server_command=[sys.executable, "-c", code], client_factory=make_client)


async def wait_for(predicate: Callable[[], object], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def next_publish(client: LanguageClient, uri: str, since: int, version: Optional[int] = None):
    """The first publish for `uri` (at `version`, if given) after index `since`."""
    found: List[types.PublishDiagnosticsParams] = []

    def check() -> bool:
        for p in client.published[since:]:  # type: ignore[attr-defined]
            if p.uri == uri and (version is None or p.version == version):
                found.append(p)
                return True
        return False

    await wait_for(check, f"diagnostics for {uri} (version {version})")
    return found[0]


def offset_of(text: str, pos: types.Position) -> int:
    """Offset into `text` of an LSP position in UTF-16 code units."""
    lines = text.split("\n")
    offset = sum(len(line) + 1 for line in lines[: pos.line])
    line = lines[pos.line] if pos.line < len(lines) else ""
    units = 0
    for i, ch in enumerate(line):
        if units >= pos.character:
            return offset + i
        units += 2 if ord(ch) > 0xFFFF else 1
    return offset + len(line)


def apply_text_edits(text: str, edits: Sequence[types.TextEdit]) -> str:
    spans = sorted(
        ((offset_of(text, e.range.start), offset_of(text, e.range.end), e.new_text) for e in edits), reverse=True
    )
    for start, end, new in spans:
        assert end >= start
        text = text[:start] + new + text[end:]
    return text


def edits_for(action: types.CodeAction, uri: str) -> List[types.TextEdit]:
    assert action.edit is not None
    if action.edit.document_changes:
        return [e for change in action.edit.document_changes if change.text_document.uri == uri for e in change.edits]
    assert action.edit.changes is not None
    return list(action.edit.changes[uri])


# Line 4 has an emoji (2 UTF-16 units, 1 code point) and CJK text before the finding.
DOC = (
    "import torch\n"
    "from torch.autograd import profiler\n"
    "device = torch.device('cuda')\n"
    "label = '😀 数据'; x = torch.zeros(3).to(device)\n"
    "y = torch.zeros(4).to(device)\n"
    "with profiler.profile(use_cuda=True) as prof:\n"
    "    pass\n"
    "print(prof.key_averages().table())\n"
)
# TL501 whose fix is unsafe: `function_events` changes meaning under torch.profiler.
UNSAFE_DOC = "import torch\nwith torch.autograd.profiler.profile(use_cuda=True) as prof:\n    run()\nevents = prof.function_events\n"


def caps(document_changes: bool = False, resolve: bool = False) -> types.ClientCapabilities:
    return types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=document_changes),
        ),
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]) if resolve else None
            )
        ),
    )


async def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1):
    since = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", version, text)))
    return (await next_publish(client, uri, since, version)).diagnostics


async def change_doc(client: LanguageClient, uri: str, text: str, version: int):
    since = len(client.published)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    return (await next_publish(client, uri, since, version)).diagnostics


async def actions(client: LanguageClient, uri: str, line: int, only=None, diagnostics=(), trigger=None):
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(types.Position(line, 0), types.Position(line, 0)),
        context=types.CodeActionContext(diagnostics=list(diagnostics), only=only, trigger_kind=trigger),
    )
    return await client.text_document_code_action_async(params) or []


def uri_for(tmp_path: Path, name: str = "train.py") -> str:
    return (tmp_path / name).as_uri()
