"""The doors: how a user reaches torchlint. The command line (cli.py, and
`python -m torchlint`), the language server (lsp/, started by server.py), the
flake8 plugin, and the rule documentation they print (rule_docs.py). Each
lints only through torchlint.api."""
