"""`full` (default): each finding, a code frame with a caret under it, and the fix hint.
A notebook finding's frame shows its cell's line, numbered within the cell."""

from __future__ import annotations

from typing import List

from torchlint.findings import Applicability, Finding
from torchlint.report import ReportData
from torchlint.report.concise import line as headline


def _frame(data: ReportData, f: Finding) -> List[str]:
    text = data.line(f)  # for a notebook, the line of its cell (rows count from the cell's first line)
    if text is None:
        return []
    gutter = " " * len(str(f.row))
    start = max(0, f.column - 1)
    end = f.end_column - 1 if f.end_row == f.row else len(text.rstrip())
    end = max(end, start + 1)
    # keep tabs so the caret lines up however the terminal expands them
    pad = "".join("\t" if ch == "\t" else " " for ch in text[:start])
    return [
        f"{gutter} |",
        f"{f.row} | {text.rstrip()}",
        f"{gutter} | {pad}{'^' * (end - start)} {f.code}",
        f"{gutter} |",
    ]


def _help(data: ReportData, f: Finding) -> List[str]:
    if f.fix is None:
        return []
    note = ""
    if f.fix.applicability == Applicability.UNSAFE and not data.unsafe_fixes:
        note = " (unsafe: needs --unsafe-fixes)"
    return [f"{' ' * len(str(f.row))} = help: {f.fix.message}{note}"]


def render(data: ReportData) -> str:
    out: List[str] = []
    for f in data.findings:
        out.append(headline(data, f))
        out.extend(_frame(data, f))
        out.extend(_help(data, f))
        out.append("")
    return "\n".join(out) + ("\n" if out else "")
