"""flake8 plugin: `flake8 --select TL` reports torchlint's findings (lint only).

Registered as the `TL` entry point of the `flake8.extension` group. flake8 does
the selection (`--select`, `--extend-ignore`, `per-file-ignores`) and the
`# noqa: TL104` comments; every torchlint rule runs (through torchlint.api,
like every other door), and torchlint's own `# torchlint: ignore[...]`
comments are honoured too. Files torchlint cannot analyse (error-severity
findings: TL000) are left to flake8's own E999/E902. Fixes are not offered:
run `torchlint check --fix` for those.
"""

from __future__ import annotations

from typing import Iterator, Sequence, Tuple

from torchlint import __version__


class TorchlintChecker:
    name = "torchlint"
    version = __version__

    # flake8 picks the parameters by name; `tree` makes this a "tree" plugin,
    # but the source comes from `lines` (torchlint parses with LibCST).
    def __init__(self, tree: object, filename: str, lines: Sequence[str]):
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        from torchlint.api import check
        from torchlint.config import Settings
        from torchlint.rules import severity

        result = check("".join(self.lines), self.filename, Settings())
        for f in result.findings:
            if severity(f.code) == "error":
                continue
            yield f.row, f.column - 1, f"{f.code} {f.message}", type(self)
