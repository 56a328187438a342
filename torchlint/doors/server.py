"""`torchlint server`: the language server over stdio.

This module stays cheap to import (click only): pygls and lsprotocol are
imported when the server starts, so `import torchlint.doors.cli` never pulls them
in. The implementation lives in torchlint/doors/lsp/.

Run it as `torchlint server` (once the CLI registers `server_command`),
`python -m torchlint.server` (torchlint/server.py, the entry docs/editors.md
names), or `python -c "from torchlint.doors.server import main; main()"`.
"""

from __future__ import annotations

import logging
import sys

import click


def install_hint() -> str:
    """How to install the `server` extra here, in a form that works whatever
    way torchlint was installed: the extra's own requirements (from the
    installed metadata), and from a clone, the clone's path with the extra."""
    import shlex
    from pathlib import Path

    requirements = ["pygls>=2.0", "lsprotocol>=2024.0.0"]  # pyproject.toml's `server` extra
    try:
        from importlib.metadata import requires

        found = []
        for line in requires("torchlint") or ():
            spec, _, marker = line.partition(";")
            if marker.replace("'", '"').replace(" ", "") == 'extra=="server"':
                found.append(spec.strip().replace(" ", ""))
        requirements = found or requirements
    except Exception:  # no metadata: a bare checkout on the path
        pass
    hint = "pip install " + " ".join(shlex.quote(r) for r in requirements)
    clone = Path(__file__).resolve().parents[2]
    if (clone / "pyproject.toml").is_file() and (clone / "torchlint" / "doors" / "server.py").is_file():
        hint += f" (or, in this clone: pip install {shlex.quote(str(clone) + '[server]')})"
    return hint


def main(log_level: str = "WARNING") -> None:
    """Serve LSP on stdin/stdout until the client says exit."""
    try:
        from torchlint.doors.lsp.features import serve_stdio
    except ImportError as exc:  # pygls/lsprotocol missing
        click.echo(f"torchlint server needs the `server` extra ({exc}): {install_hint()}", err=True)
        raise SystemExit(2) from None
    # Logs go to stderr; stdout carries the protocol.
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, log_level.upper(), logging.WARNING),
        format="torchlint-server %(levelname)s %(name)s: %(message)s",
    )
    serve_stdio()


@click.command("server")
@click.option(
    "--stdio",
    "stdio",
    is_flag=True,
    default=True,
    show_default=True,
    help="Speak LSP over stdin/stdout (the only transport).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="WARNING",
    show_default=True,
    help="What the server logs to stderr.",
)
def server_command(stdio: bool, log_level: str) -> None:
    """Run the language server (LSP over stdio) for editors.

    Diagnostics carry their fix; code actions apply it, add an ignore comment,
    or fix everything safe at once (source.fixAll.torchlint). Setup for VS Code,
    Neovim, Helix and Emacs: docs/editors.md.
    """
    main(log_level)


if __name__ == "__main__":
    server_command()
