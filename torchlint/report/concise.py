"""`concise`: one line per finding, `[*]` marks a fix --fix would apply."""

from __future__ import annotations

from torchlint.report import ReportData


def location(data: ReportData, f) -> str:
    cell = f":cell {f.cell}" if f.cell is not None else ""
    return f"{data.relpath(f.path)}{cell}:{f.row}:{f.column}"


def line(data: ReportData, f) -> str:
    mark = " [*]" if data.applicable(f) else ""
    return f"{location(data, f)}: {f.code}{mark} {f.message}"


def render(data: ReportData) -> str:
    return "".join(line(data, f) + "\n" for f in data.findings)
