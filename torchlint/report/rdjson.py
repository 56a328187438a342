"""`rdjson`: reviewdog's Diagnostic Result JSON (rdjson), for `reviewdog -f=rdjson`.

`{"source": {"name", "url"}, "severity": "WARNING", "diagnostics": [...]}`;
each diagnostic has `message`, `location` (`path`, `range` with 1-based
`start` and exclusive `end`, columns in UTF-8 bytes as reviewdog counts
them), `severity` (`WARNING`; `ERROR` for TL000), `code` (`value`, `url`)
and, for a finding with a fix, `suggestions` (the fix's edits). A notebook
finding's message starts with its cell and its lines count within it; its
fix is not offered as a suggestion (its edits are not in the file's lines).
https://github.com/reviewdog/reviewdog/tree/master/proto/rdf
"""

from __future__ import annotations

import json
from typing import Any, Dict

from torchlint.findings import Finding
from torchlint.report import INFORMATION_URI, ReportData, cell_prefix
from torchlint.rules import severity


def _range(data: ReportData, f: Finding, row: int, column: int, end_row: int, end_column: int) -> Dict[str, Any]:
    return {
        "end": {"column": data.utf8_column(f, end_row, end_column), "line": end_row},
        "start": {"column": data.utf8_column(f, row, column), "line": row},
    }


def diagnostic(data: ReportData, f: Finding) -> Dict[str, Any]:
    out: Dict[str, Any] = {
        "code": {"value": f.code},
        "location": {
            "path": data.relpath(f.path).replace("\\", "/"),
            "range": _range(data, f, f.row, f.column, f.end_row, f.end_column),
        },
        "message": cell_prefix(f) + f.message,
        "severity": "ERROR" if severity(f.code) == "error" else "WARNING",
    }
    url = data.rule_url(f.code)
    if url:
        out["code"]["url"] = url
    if f.fix is not None and f.cell is None:
        out["suggestions"] = [
            {"range": _range(data, f, e.row, e.column, e.end_row, e.end_column), "text": e.content} for e in f.fix.edits
        ]
    return out


def render(data: ReportData) -> str:
    doc = {
        "diagnostics": [diagnostic(data, f) for f in data.findings],
        "severity": "WARNING",
        "source": {"name": "torchlint", "url": INFORMATION_URI},
    }
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
