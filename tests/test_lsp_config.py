"""Language-server tests that change server-wide state (client settings,
pyproject.toml, a crashing rule): each starts its own server process."""

from __future__ import annotations

import textwrap

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_client import (
    DOC,
    UNSAFE_DOC,
    actions,
    caps,
    change_doc,
    next_publish,
    open_doc,
    server_config,
    uri_for,
    wait_for,
)

pytestmark = pytest.mark.asyncio(loop_scope="function")


@pytest_lsp.fixture(config=server_config(), scope="function")
async def fresh(lsp_client: LanguageClient):
    yield


async def test_client_settings_from_initialization_options_and_did_change_configuration(
    fresh: LanguageClient, tmp_path
):
    client = fresh
    await client.initialize_session(
        types.InitializeParams(
            capabilities=caps(document_changes=True), initialization_options={"settings": {"ignore": ["TL501"]}}
        )
    )
    uri = uri_for(tmp_path)
    assert [d.code for d in await open_doc(client, uri, DOC)] == ["TL104", "TL104"]
    found = await actions(client, uri, 3)
    assert found and found[0].edit.document_changes[0].text_document.version == 1  # versioned edits when supported
    # New settings: select only TL5, and no unsafe fixes.
    since = len(client.published)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"torchlint": {"select": "TL5", "unsafeFixes": False}})
    )
    published = await next_publish(client, uri, since)
    assert [d.code for d in published.diagnostics] == ["TL501"]
    unsafe_uri = uri_for(tmp_path, "unsafe.py")
    await open_doc(client, unsafe_uri, UNSAFE_DOC)
    titles = [a.title for a in await actions(client, unsafe_uri, 1)]
    assert titles == ["Ignore TL501 for this line"]  # the unsafe fix is omitted
    await client.shutdown_session()


async def test_pyproject_config_is_read_and_reread(fresh: LanguageClient, tmp_path):
    client = fresh
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.torchlint]\nignore = ["TL104"]\n')
    (tmp_path / "pkg").mkdir()
    await client.initialize_session(types.InitializeParams(capabilities=caps(), root_uri=tmp_path.as_uri()))
    uri = uri_for(tmp_path / "pkg")
    assert [d.code for d in await open_doc(client, uri, DOC)] == ["TL501"]
    pyproject.write_text('[tool.torchlint]\nignore = ["TL501"]\n# changed\n')
    since = len(client.published)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(pyproject.as_uri(), types.FileChangeType.Changed)])
    )
    published = await next_publish(client, uri, since)
    assert [d.code for d in published.diagnostics] == ["TL104", "TL104"]
    # A broken configuration: one message, and linting goes on with the defaults.
    pyproject.write_text('[tool.torchlint]\nselekt = ["TL1"]\n')
    since = len(client.published)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(pyproject.as_uri(), types.FileChangeType.Changed)])
    )
    published = await next_publish(client, uri, since)
    assert [d.code for d in published.diagnostics] == ["TL104", "TL104", "TL501"]
    await wait_for(lambda: client.messages, "window/showMessage")
    assert "selekt" in client.messages[0].message and client.messages[0].type == types.MessageType.Error
    await client.shutdown_session()


async def test_a_broken_configuration_is_shown_once_however_often_it_is_reread(fresh: LanguageClient, tmp_path):
    """Editors re-send their settings after start-up (Helix, Neovim) and report
    file events for files that did not change: the pop-up came twice. It
    comes again only when a configuration file changed."""
    client = fresh
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.torchlint]\nselekt = ["TL1"]\n')
    settings = {"settings": {"unsafeFixes": True}}
    await client.initialize_session(
        types.InitializeParams(capabilities=caps(), root_uri=tmp_path.as_uri(), initialization_options=settings)
    )
    uri = uri_for(tmp_path)
    await open_doc(client, uri, DOC)
    await wait_for(lambda: client.messages, "window/showMessage")
    # Each event re-reads the settings; the edit after it makes the server lint
    # (and so read them) before the test looks at the messages.
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"torchlint": settings}))
    await change_doc(client, uri, DOC + "\n", 2)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(pyproject.as_uri(), types.FileChangeType.Changed)])
    )
    await change_doc(client, uri, DOC + "\n\n", 3)
    await open_doc(client, uri_for(tmp_path, "other.py"), DOC)
    assert [m.message for m in client.messages if "selekt" in m.message] == [client.messages[0].message]
    # The file changed (still broken): shown again.
    pyproject.write_text('[tool.torchlint]\nselekt = ["TL1"]\n# edited\n')
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(pyproject.as_uri(), types.FileChangeType.Changed)])
    )
    await change_doc(client, uri, DOC, 4)
    await wait_for(lambda: len([m for m in client.messages if "selekt" in m.message]) == 2, "a second showMessage")
    await client.shutdown_session()


CRASH = textwrap.dedent(
    """
    from torchlint.rules.profiling.legacy_profiler import LegacyProfiler
    def _boom(self, ctx):
        raise RuntimeError("boom in TL501")
    LegacyProfiler.check = _boom
    """
)


@pytest_lsp.fixture(config=server_config(CRASH), scope="function")
async def crashing(lsp_client: LanguageClient):
    yield


async def test_rule_crash_is_logged_and_other_rules_still_report(crashing: LanguageClient, tmp_path):
    client = crashing
    await client.initialize_session(types.InitializeParams(capabilities=caps()))
    diags = await open_doc(client, uri_for(tmp_path), DOC)
    assert [d.code for d in diags] == ["TL104", "TL104"]
    await wait_for(lambda: any("boom in TL501" in m.message for m in client.log_messages), "window/logMessage")
    message = next(m for m in client.log_messages if "boom in TL501" in m.message)
    assert message.type == types.MessageType.Error and "TL501" in message.message
    await client.shutdown_session()


async def test_utf8_position_encoding_when_the_client_prefers_it(fresh: LanguageClient, tmp_path):
    client = fresh
    capabilities = caps()
    capabilities.general = types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16]
    )
    result = await client.initialize_session(types.InitializeParams(capabilities=capabilities))
    assert result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
    diags = await open_doc(client, uri_for(tmp_path), DOC)
    # `label = '😀 数据'; x = ` is 20 code points and 27 UTF-8 bytes.
    assert (diags[0].code, diags[0].range.start.character, diags[0].range.end.character) == ("TL104", 27, 41)
    await client.shutdown_session()
