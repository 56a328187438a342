"""flake8 plugin: `flake8 --select TL` reports torchlint's findings (lint only).

Registered as the `TL` entry point of the `flake8.extension` group. flake8 does
the selection (`--select`, `--extend-ignore`, `per-file-ignores`) and the
`# noqa: TL104` comments; torchlint's stable rules run (preview ones too with
`preview = true` in [tool.torchlint] or TORCHLINT_PREVIEW=1; through torchlint.api,
like every other door), and torchlint's own `# torchlint: ignore[...]`
comments are honoured too. Files torchlint cannot analyse (error-severity
findings: TL000) are left to flake8's own E999/E902. Fixes are not offered:
run `torchlint check --fix` for those.

A notebook (`flake8 nb.ipynb`, or `--filename '*.py,*.ipynb'`): flake8 reads
the `.ipynb` file's JSON text, so a finding is placed where its cell's code
lies in that text (the line and column of the character in the cell's
`"source"` string), and its message starts with the cell and the position in
the cell as torchlint prints them (`TL104 cell 3:2:5: Tensor is ...`).
"""

from __future__ import annotations

import os
from typing import Iterator, Optional, Sequence, Tuple

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
        text = "".join(self.lines)
        result = check(text, self.filename, settings)
        positions = None
        for f in result.findings:
            if severity(f.code) == "error":
                continue
            if f.cell is None:
                yield f.row, f.column - 1, f"{f.code} {f.message}", type(self)
                continue
            if positions is None:
                positions = _JsonLines(text)
            row, col = positions.place(f.cell, f.row, f.column)
            yield row, col, f"{f.code} cell {f.cell}:{f.row}:{f.column}: {f.message}", type(self)


class _JsonLines:
    """Cell positions as (line, 0-based column) in a notebook's JSON text."""

    def __init__(self, text: str) -> None:
        from torchlint.source.notebook import JsonPositions, NotebookError

        self.text = text
        try:
            self.positions: Optional[JsonPositions] = JsonPositions(text)
        except NotebookError:
            self.positions = None

    def place(self, cell: int, row: int, column: int) -> Tuple[int, int]:
        offset = self.positions.offset(cell, row, column) if self.positions is not None else None
        if offset is None:
            return 1, 0
        line_start = self.text.rfind("\n", 0, offset) + 1
        return self.text.count("\n", 0, offset) + 1, offset - line_start
