"""The features the server registers (documents, code actions, hover,
commands, configuration, watched files), each handing the request to
`TorchlintServer`; and serving them over stdio.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from lsprotocol import types

from torchlint.config import CONFIG_FILES
from torchlint.doors.lsp.commands import Command
from torchlint.doors.lsp.convert import FIX_ALL_KIND
from torchlint.doors.lsp.server import TorchlintServer
from torchlint.doors.lsp.transport import FramedStdin


def create_server() -> TorchlintServer:
    server = TorchlintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: TorchlintServer, params: types.InitializeParams) -> None:
        ls.apply_client_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: TorchlintServer, params: types.InitializedParams) -> None:
        ls.warm()
        await ls.register_watchers()
        await ls.pull_configuration()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchlintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0.0, force=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: TorchlintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0.0, force=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchlintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.clear(params.text_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND],
            resolve_provider=True,
        ),
    )
    async def code_action(ls: TorchlintServer, params: types.CodeActionParams):
        return await ls.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls: TorchlintServer, action: types.CodeAction) -> types.CodeAction:
        return await ls.resolve_code_action(action)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: TorchlintServer, params: types.HoverParams) -> Optional[types.Hover]:
        return ls.hover(params)

    for command in Command:

        def register(command: Command = command) -> None:
            @server.command(command.value)
            async def run(ls: TorchlintServer, *arguments: Any) -> Any:
                return await ls.execute(command, arguments)

        register()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: TorchlintServer, params: types.DidChangeConfigurationParams) -> None:
        if params.settings:
            ls.apply_client_settings(params.settings)
            ls.config_changed()
        else:  # the client wants us to pull
            await ls.pull_configuration()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: TorchlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(change.uri.endswith(CONFIG_FILES) for change in params.changes):
            ls.config_changed()

    return server


def serve_stdio() -> None:
    create_server().start_io(stdin=FramedStdin(sys.stdin.buffer))  # type: ignore[arg-type]  # readline/read suffice
