"""torchlint's language server (LSP over stdio on pygls 2.x).

`torchlint.doors.lsp.convert` is plain Python (positions, settings, fix data);
`torchlint.doors.lsp.server` needs the `server` extra (pygls, lsprotocol). The CLI
entry point is `torchlint.doors.server.server_command`.
"""
