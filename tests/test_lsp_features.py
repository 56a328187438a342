"""The language server's editor features beyond diagnostics: fix-all listed on
a plain code-action request (resolved when chosen), `workspace/executeCommand`
(fix-all, organize noqa, debug information), hover on `# noqa` codes,
diagnostic tags, and the `fixAll` setting. One server for the module (a client
that can resolve code actions); each test uses its own documents."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient

from lsp_client import DOC, apply_text_edits, caps, change_doc, edits_for, open_doc, server_config, uri_for, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(capabilities=caps(resolve=True), root_uri=None))
    yield
    await lsp_client.shutdown_session()


async def plain_actions(client: LanguageClient, uri: str, line: int):
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(types.Position(line, 0), types.Position(line, 0)),
        context=types.CodeActionContext(diagnostics=[]),
    )
    return await client.text_document_code_action_async(params) or []


async def test_plain_request_lists_fix_all_and_resolve_builds_its_edit(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    await open_doc(client, uri, DOC)
    found = await plain_actions(client, uri, 0)
    fix_all = [a for a in found if a.kind == "source.fixAll.torchlint"]
    assert len(fix_all) == 1 and fix_all[0].edit is None and fix_all[0].data == {"uri": uri, "version": 1}
    resolved = await client.code_action_resolve_async(fix_all[0])
    new_text = apply_text_edits(DOC, edits_for(resolved, uri))
    assert "torch.zeros(3, device=device)" in new_text and "torch.zeros(4, device=device)" in new_text
    # Resolving for a version the document moved past gives no edit.
    await change_doc(client, uri, DOC + "\n", 2)
    stale = await client.code_action_resolve_async(fix_all[0])
    assert stale.edit is None


async def test_execute_command_fix_all_applies_the_edit(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    await open_doc(client, uri, DOC)
    since = len(client.applied)
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchlint.applyAutofix", arguments=[{"uri": uri, "version": 1}])
    )
    await wait_for(lambda: len(client.applied) > since, "workspace/applyEdit")
    edit = client.applied[since].edit
    new_text = apply_text_edits(DOC, edit.changes[uri])
    diags = await change_doc(client, uri, new_text, 2)
    assert list(diags) == []  # every fix in DOC is safe


async def test_execute_command_organize_noqa_suppresses_every_finding(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    text = "import torch\ndevice = 'cuda'\nx = torch.zeros(3).to(device)  # noqa: E501\ny = torch.ones(2).to(device)\n"
    assert len(await open_doc(client, uri, text)) == 2
    since = len(client.applied)
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchlint.applyOrganizeNoqa", arguments=[uri])
    )
    await wait_for(lambda: len(client.applied) > since, "workspace/applyEdit")
    new_text = apply_text_edits(text, client.applied[since].edit.changes[uri])
    assert new_text.splitlines()[2].endswith("# noqa: E501, TL104")
    assert new_text.splitlines()[3].endswith("  # noqa: TL104")
    assert list(await change_doc(client, uri, new_text, 2)) == []


async def test_execute_command_needs_a_document(client: LanguageClient):
    with pytest.raises(JsonRpcInvalidParams):
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="torchlint.applyAutofix", arguments=[])
        )
    info = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchlint.printDebugInformation", arguments=[])
    )
    assert info.startswith("torchlint ")


async def test_hover_on_a_noqa_code_shows_the_rule(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    text = "import torch\nx = torch.zeros(3).to('cuda')  # noqa: E501, TL104\ny = 1  # torchlint: ignore[TL501]\n"
    await open_doc(client, uri, text)
    line = text.splitlines()[1]

    async def hover(row: int, character: int):
        return await client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(row, character))
        )

    found = await hover(1, line.index("TL104") + 2)
    assert found.contents.kind == types.MarkupKind.Markdown
    assert "create-then-move" in found.contents.value and "## What it does" in found.contents.value
    assert (found.range.start.character, found.range.end.character) == (line.index("TL104"), line.index("TL104") + 5)
    assert "legacy-profiler" in (await hover(2, text.splitlines()[2].index("TL501"))).contents.value
    assert await hover(1, line.index("E501")) is None  # not torchlint's
    assert await hover(1, 2) is None  # code, not a comment


async def test_diagnostic_tags(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    text = (
        "import torch\nx = torch.ones(3)\nx.cuda()\n"
        "with torch.autograd.profiler.profile() as p:\n    pass\nprint(p.key_averages())\n"
    )
    diags = {d.code: d for d in await open_doc(client, uri, text)}
    assert list(diags["TL105"].tags) == [types.DiagnosticTag.Unnecessary]
    assert list(diags["TL501"].tags) == [types.DiagnosticTag.Deprecated]


@pytest_lsp.fixture(config=server_config())
async def no_fix_all(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=caps(), root_uri=None, initialization_options={"settings": {"fixAll": False}}
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="function")
async def test_fix_all_setting_turns_it_off(no_fix_all: LanguageClient, tmp_path):
    uri = uri_for(tmp_path)
    await open_doc(no_fix_all, uri, DOC)
    assert not [a for a in await plain_actions(no_fix_all, uri, 3) if "Fix all" in a.title]
    only = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[], only=["source.fixAll.torchlint"]),
    )
    assert not await no_fix_all.text_document_code_action_async(only)


async def test_results_kept_on_disk_answer_a_reopened_file(client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    uri = uri_for(tmp_path)
    first = await open_doc(client, uri, DOC)
    cache = tmp_path / ".torchlint_cache"
    await wait_for(lambda: cache.is_dir() and any(p.is_file() and len(p.name) == 64 for p in cache.rglob("*")), "entry")
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    again = await open_doc(client, uri, DOC)
    assert [(d.code, d.range, d.data) for d in again] == [(d.code, d.range, d.data) for d in first]
    # and the document is then linted incrementally as usual
    diags = await change_doc(client, uri, DOC.replace("torch.zeros(4)", "torch.zeros(4, device=device)"), 2)
    assert [d.code for d in diags] == ["TL104", "TL501"]


async def test_fix_all_on_a_long_notebook(client: LanguageClient, tmp_path):
    """A notebook open as JSON: fix-all from the kept fixes of its cells; over
    400 lines the edit is one span, not a line diff; the same text as --fix."""
    from torchlint.api import fix_source
    from torchlint.config import Settings

    from helpers import code, notebook

    cells = [code("import torch\ndevice = torch.device('cuda')\n")]
    cells += [code(f"x{i} = torch.zeros({i + 1}).to(device)\nprint(x{i})\n") for i in range(60)]
    text = notebook(*cells).decode("utf-8")
    assert text.count("\n") > 400
    uri = uri_for(tmp_path, "nb.ipynb")
    assert len(await open_doc(client, uri, text)) == 60
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[], only=["source.fixAll.torchlint"]),
    )
    (action,) = await client.text_document_code_action_async(params)
    edits = edits_for(action, uri)
    assert len(edits) == 1
    assert apply_text_edits(text, edits) == fix_source(text, str(tmp_path / "nb.ipynb"), Settings(preview=True))[0]
