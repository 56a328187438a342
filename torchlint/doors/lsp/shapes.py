"""Findings as lsprotocol shapes: ranges, text edits, diagnostics and the
edit that adds an ignore comment.
"""

from __future__ import annotations

from typing import Optional

from lsprotocol import types

from torchlint.doors.lsp.convert import TextLines, diagnostic_tags, fix_data
from torchlint.findings import Finding
from torchlint.rules import severity as rule_severity
from torchlint.source.suppression import suppression_comment


def to_range(lines: TextLines, row: int, column: int, end_row: int, end_column: int) -> types.Range:
    (l0, c0), (l1, c1) = lines.span(row, column, end_row, end_column)
    return types.Range(start=types.Position(line=l0, character=c0), end=types.Position(line=l1, character=c1))


def to_text_edit(
    lines: TextLines, row: int, column: int, end_row: int, end_column: int, content: str
) -> types.TextEdit:
    return types.TextEdit(range=to_range(lines, row, column, end_row, end_column), new_text=content)


def to_diagnostic(f: Finding, lines: TextLines, docs_url: Optional[str] = None) -> types.Diagnostic:
    """A finding as an LSP diagnostic; its code links to the rule's page
    under `docs_url` (the settings' `docs-url`; None: the default)."""
    from torchlint.config import Settings

    url = Settings(docs_url=docs_url).rule_url(f.code)
    (l0, c0), (l1, c1) = lines.finding_span(f)
    return types.Diagnostic(
        range=types.Range(start=types.Position(line=l0, character=c0), end=types.Position(line=l1, character=c1)),
        message=f.message,
        severity=types.DiagnosticSeverity.Error
        if rule_severity(f.code) == "error"
        else types.DiagnosticSeverity.Warning,
        code=f.code,
        code_description=types.CodeDescription(href=url) if url else None,
        source="torchlint",
        data=fix_data(f),
        tags=[types.DiagnosticTag(int(t)) for t in diagnostic_tags(f.code)] or None,
    )


def ignore_comment_edit(lines: TextLines, code: str, row: int) -> Optional[types.TextEdit]:
    """Append (or extend) `# torchlint: ignore[CODE]` on `row`; None where a
    comment cannot go (after a line continuation, or in a multi-line string)."""
    line = lines.line(row)
    body = line.rstrip("\r")
    if body.rstrip().endswith("\\") or '"""' in body or "'''" in body:
        return None
    new_line = suppression_comment(code, body)
    return to_text_edit(lines, row, 1, row, len(body) + 1, new_line)
