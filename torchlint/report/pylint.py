"""`pylint`: `path:row: [CODE] message`, one line per finding (Pylint's
parseable format, as Ruff and flake8 write it). A notebook finding's row
counts within its cell, and the message starts with the cell (`cell 3: `)."""

from __future__ import annotations

from torchlint.report import ReportData, cell_prefix


def render(data: ReportData) -> str:
    return "".join(f"{data.relpath(f.path)}:{f.row}: [{f.code}] {cell_prefix(f)}{f.message}\n" for f in data.findings)
