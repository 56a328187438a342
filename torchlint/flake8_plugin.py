"""flake8 plugin: `flake8 --select TL` reports torchlint's findings (lint only).

Registered as the `TL` entry point of the `flake8.extension` group. flake8 does
the selection (`--select`, `--extend-ignore`, `per-file-ignores`) and the
`# noqa: TL104` comments; torchlint's stable rules run (preview ones too with
`preview = true` in [tool.torchlint] or TORCHLINT_PREVIEW=1; through torchlint.api,
like every other door), and torchlint's own `# torchlint: ignore[...]`
comments are honoured too. Files torchlint cannot analyse (error-severity
findings: TL000) are left to flake8's own E999/E902. Fixes are not offered:
run `torchlint check --fix` for those.
"""

from __future__ import annotations

import os
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
        from torchlint.config import ConfigError, Settings, load_settings, preview_from_env
        from torchlint.rules import severity

        # flake8 selects the codes; `preview` (which rules exist to select) comes
        # from the project's [tool.torchlint] or TORCHLINT_PREVIEW, as for the CLI.
        try:
            settings = load_settings(start=os.path.dirname(os.path.abspath(self.filename)), preview=preview_from_env())
        except ConfigError:
            settings = Settings(preview=bool(preview_from_env()))
        result = check("".join(self.lines), self.filename, settings)
        for f in result.findings:
            if severity(f.code) == "error":
                continue
            yield f.row, f.column - 1, f"{f.code} {f.message}", type(self)
