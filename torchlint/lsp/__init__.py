"""torchlint's language server (LSP over stdio on pygls 2.x).

`torchlint.lsp.convert` is plain Python (positions, settings, fix data);
`torchlint.lsp.server` needs the `server` extra (pygls, lsprotocol). The CLI
entry point is `torchlint.server.server_command`.
"""
