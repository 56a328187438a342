"""flake8 plugin: `flake8 --select TL` reports torchlint's findings (lint only).

Registered as the `TL` entry point of the `flake8.extension` group. The
configuration is read as the CLI reads it (the nearest torchlint.toml or
pyproject.toml [tool.torchlint]: `select`, `ignore`, `per-file-ignores`,
`preview`; TORCHLINT_PREVIEW=1 too), so the rules it enables run (through
torchlint.api, like every other door); flake8 then selects among what they
report (`--select`, `--extend-ignore`, `per-file-ignores`) and honours the
`# noqa: TL104` comments, and torchlint's own `# torchlint: ignore[...]`
comments are honoured too. A configuration that cannot be read is warned
about once on stderr (`torchlint: warning: ...`), and the defaults are used. Files torchlint cannot analyse (error-severity
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
import sys
from typing import Any, Iterator, Optional, Sequence, Set, Tuple

from torchlint import __version__

# Configuration errors already warned about in this process (flake8 forks its
# workers after `parse_options`, so one warned about there is not repeated).
_WARNED: Set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"torchlint: warning: {message}; the flake8 plugin uses the default settings", file=sys.stderr)


def _settings(start: str) -> Any:
    from torchlint.config import ConfigError, Settings, load_settings, preview_from_env

    try:
        return load_settings(start=start, preview=preview_from_env())
    except ConfigError as exc:
        _warn_once(str(exc))
        return Settings(preview=bool(preview_from_env()))


class TorchlintChecker:
    name = "torchlint"
    version = __version__

    @classmethod
    def parse_options(cls, options: object) -> None:
        """Called once, in flake8's main process before it forks its workers:
        a broken configuration of the current folder is warned about here, once."""
        _settings(os.getcwd())

    # flake8 picks the parameters by name; `tree` makes this a "tree" plugin,
    # but the source comes from `lines` (torchlint parses with LibCST).
    def __init__(self, tree: object, filename: str, lines: Sequence[str]):
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        from torchlint.api import check
        from torchlint.rules import severity

        # The project's configuration enables the rules (as for the CLI); flake8
        # then selects among their findings.
        settings = _settings(os.path.dirname(os.path.abspath(self.filename)))
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
