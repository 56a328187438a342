"""End-to-end tests of the language server over stdio (pytest-lsp).

One server process serves this module's tests (each test uses its own
document URIs); tests that change server-wide settings start their own.
Every wait is for an event (a publish, a response), bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import Future

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcMethodNotFound
from pytest_lsp import LanguageClient

from lsp_client import (
    DOC,
    UNSAFE_DOC,
    actions,
    apply_text_edits,
    caps,
    change_doc,
    edits_for,
    next_publish,
    open_doc,
    server_config,
    uri_for,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(capabilities=caps(), root_uri=None))
    yield
    await lsp_client.shutdown_session()


async def test_diagnostics_codes_utf16_ranges_and_data(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    diags = await open_doc(client, uri, DOC)
    assert [(d.code, d.range.start.line) for d in diags] == [("TL104", 3), ("TL104", 4), ("TL501", 5)]
    first = diags[0]
    # `torch.zeros(3)` starts at code point 20 of line 4; the emoji counts 2 UTF-16 units.
    line = DOC.splitlines()[3]
    assert line.index("torch.zeros") == 20
    assert (first.range.start.character, first.range.end.character) == (21, 35)
    assert first.source == "torchlint"
    assert first.severity == types.DiagnosticSeverity.Warning
    assert first.code_description.href.endswith("/docs/rules/create-then-move.md")
    assert first.data["code"] == "TL104"
    assert first.data["fix"]["applicability"] == "safe"
    assert first.data["fix"]["edits"][0]["location"] == {"row": 4, "column": 34}  # code points, 1-based
    # ASCII line: characters are plain offsets.
    assert (diags[1].range.start.character, diags[1].range.end.character) == (4, 18)
    json.dumps([d.data for d in diags])  # plain JSON


async def test_quick_fix_applies_and_clears_finding(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    diags = await open_doc(client, uri, DOC)
    found = await actions(client, uri, 3, diagnostics=[diags[0]])
    quick = [a for a in found if a.title.startswith("torchlint (TL104)")]
    assert len(quick) == 1
    fix = quick[0]
    assert fix.title == "torchlint (TL104): Pass `device=` to the factory"
    assert fix.kind == types.CodeActionKind.QuickFix
    assert fix.is_preferred is True
    # A plain request (no `only`) also lists fix-all, last, as Ruff's server does;
    # its edit is built when chosen: this client cannot resolve, so it is a command.
    # (lsprotocol's client reads a CodeAction that carries a command as a Command.)
    assert found[-1].title == "torchlint: Fix all auto-fixable problems"
    assert getattr(found[-1], "edit", None) is None
    new_text = apply_text_edits(DOC, edits_for(fix, uri))
    assert new_text.splitlines()[3] == "label = '😀 数据'; x = torch.zeros(3, device=device)"
    diags = await change_doc(client, uri, new_text, 2)
    assert [(d.code, d.range.start.line) for d in diags] == [("TL104", 4), ("TL501", 5)]


async def test_fix_all_applies_every_safe_fix_in_one_edit(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    text = DOC + "with torch.autograd.profiler.profile(use_cuda=True) as p2:\n    run()\nevents = p2.function_events\n"
    await open_doc(client, uri, text)
    for only in (["source.fixAll.torchlint"], ["source.fixAll"], ["source"]):
        found = await actions(client, uri, 0, only=only)
        assert [a.kind for a in found] == ["source.fixAll.torchlint"], only
    assert not [a for a in await actions(client, uri, 3, only=["quickfix"]) if a.kind != "quickfix"]
    fix_all = found[0]
    new_text = apply_text_edits(text, edits_for(fix_all, uri))
    diags = await change_doc(client, uri, new_text, 2)
    # Every safe fix applied; the unsafe TL501 stays.
    assert [(d.code, d.data["fix"]["applicability"]) for d in diags] == [("TL501", "unsafe")]
    assert "torch.zeros(3, device=device)" in new_text and "torch.zeros(4, device=device)" in new_text
    # Nothing left to fix safely: no fixAll action.
    assert await actions(client, uri, 0, only=["source.fixAll.torchlint"]) == []


async def test_ignore_action_suppresses_the_finding(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    diags = await open_doc(client, uri, DOC)
    found = await actions(client, uri, 3)
    ignore = [a for a in found if a.title == "Ignore TL104 for this line"]
    assert len(ignore) == 1 and ignore[0].kind == types.CodeActionKind.QuickFix and not ignore[0].is_preferred
    new_text = apply_text_edits(DOC, edits_for(ignore[0], uri))
    assert new_text.splitlines()[3].endswith("torch.zeros(3).to(device)  # torchlint: ignore[TL104]")
    diags = await change_doc(client, uri, new_text, 2)
    assert [(d.code, d.range.start.line) for d in diags] == [("TL104", 4), ("TL501", 5)]


async def test_unsafe_fix_offered_but_not_preferred(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    diags = await open_doc(client, uri, UNSAFE_DOC)
    assert [d.code for d in diags] == ["TL501"]
    found = await actions(client, uri, 1)
    fixes = [a for a in found if a.title.startswith("torchlint (TL501)")]
    assert len(fixes) == 1 and fixes[0].is_preferred is False and "unsafe" in fixes[0].title
    # fixAll applies safe fixes only: nothing to do here.
    assert await actions(client, uri, 0, only=["source.fixAll.torchlint"]) == []


async def test_syntax_error_gives_tl000_and_server_keeps_answering(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    diags = await open_doc(client, uri, "import torch\nx = torch.zeros(3).to(\n")
    assert [d.code for d in diags] == ["TL000"]
    assert diags[0].severity == types.DiagnosticSeverity.Error
    found = await actions(client, uri, 1)
    assert [a.title for a in found] == []  # no fix, no ignore for a syntax error
    diags = await change_doc(client, uri, "import torch\nx = torch.zeros(3).to('cuda')\n", 2)
    assert [d.code for d in diags] == ["TL104"]


async def test_did_close_clears_diagnostics(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    assert await open_doc(client, uri, DOC)
    since = len(client.published)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    published = await next_publish(client, uri, since)
    assert list(published.diagnostics) == []


async def test_did_save_relints(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    await open_doc(client, uri, DOC)
    since = len(client.published)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
    published = await next_publish(client, uri, since, 1)
    assert [d.code for d in published.diagnostics] == ["TL104", "TL104", "TL501"]


async def test_incremental_changes_latest_version_wins(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    text = "import torch\nx = 1\n"
    assert list(await open_doc(client, uri, text)) == []
    since = len(client.published)
    # Three quick incremental edits on line 2: only the final text matters.
    for version, new in (
        (2, "torch.zeros(3)"),
        (3, "torch.zeros(3).to('cuda')"),
        (4, "torch.zeros(3).to('cuda')  # a"),
    ):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [
                    types.TextDocumentContentChangePartial(
                        range=types.Range(types.Position(1, 4), types.Position(1, 1 << 20)), text=new
                    )
                ],
            )
        )
    final = await next_publish(client, uri, since, 4)
    assert [d.code for d in final.diagnostics] == ["TL104"]
    assert all(p.version in (None, 3, 4) for p in client.published[since:] if p.uri == uri)


async def send_raw_request(client: LanguageClient, msg_id: int, method: str, params):
    """Send a request as raw JSON (the typed API would refuse malformed params)."""
    future: Future = Future()
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(asyncio.wrap_future(future), 30)


async def test_unknown_and_malformed_requests_get_errors(client: LanguageClient, tmp_path):
    with pytest.raises(JsonRpcMethodNotFound):
        await client.protocol.send_request_async("torchlint/noSuchMethod", {})
    with pytest.raises(JsonRpcInvalidParams):
        await send_raw_request(client, 9001, types.TEXT_DOCUMENT_CODE_ACTION, {"textDocument": 42})
    # Code actions for a document that is not open: nothing, not an error.
    assert await actions(client, uri_for(tmp_path, "never_opened.py"), 0) == []
    # Still alive and linting.
    assert [d.code for d in await open_doc(client, uri_for(tmp_path), UNSAFE_DOC)] == ["TL501"]
