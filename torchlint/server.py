"""`python -m torchlint.server`: the language server over stdio, the entry
docs/editors.md gives editors; the command itself is torchlint/doors/server.py."""

from torchlint.doors.server import server_command

if __name__ == "__main__":
    server_command()
