"""flake8 plugin: `flake8 --select TL` reports torchlint's findings (lint only).

Registered as the `TL` entry point of the `flake8.extension` group. flake8 does
the selection (`--select`, `--extend-ignore`, `per-file-ignores`) and the
`# noqa: TL104` comments; every torchlint rule runs, and torchlint's own
`# torchlint: ignore[...]` comments are honoured too. Syntax errors are left to
flake8 (E999). Fixes are not offered: run `torchlint check --fix` for those.
"""
from __future__ import annotations

from typing import Iterator, Sequence, Tuple


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("torchlint")
    except Exception:  # not installed (running from a checkout)
        return "0.1.0"


class TorchlintChecker:
    name = "torchlint"
    version = _version()

    # flake8 picks the parameters by name; `tree` makes this a "tree" plugin,
    # but the source comes from `lines` (torchlint parses with LibCST).
    def __init__(self, tree: object, filename: str, lines: Sequence[str]):
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        from torchlint.engine import check_source
        from torchlint.rules import all_codes

        source = "".join(self.lines)
        result = check_source(source, self.filename, frozenset(all_codes()))
        for f in result.findings:
            if f.code == "TL000":
                continue
            yield f.row, f.column - 1, f"{f.code} {f.message}", type(self)
