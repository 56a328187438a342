"""`json` and `json-lines`, in Ruff's JSON schema.

Each finding: cell, code, end_location{column,row}, filename (absolute), fix
(null or {applicability, edits:[{content, end_location, location}], message}),
location{column,row}, message, name, noqa_row, url. Keys sorted, as Ruff does.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from torchlint.findings import Finding
from torchlint.report import ReportData
from torchlint.rules import rule_url as default_rule_url


def _loc(row: int, column: int) -> Dict[str, int]:
    return {"column": column, "row": row}


def to_dict(f: Finding, url: Optional[str] = None) -> Dict[str, Any]:
    """A finding in Ruff's JSON schema; `url` is its rule's page (default: under the default docs URL)."""
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": str(f.fix.applicability),
            "edits": [
                {"content": e.content, "end_location": _loc(e.end_row, e.end_column), "location": _loc(e.row, e.column)}
                for e in f.fix.edits
            ],
            "message": f.fix.message,
        }
    return {
        "cell": f.cell,
        "code": f.code,
        "end_location": _loc(f.end_row, f.end_column),
        "filename": os.path.abspath(f.path),
        "fix": fix,
        "location": _loc(f.row, f.column),
        "message": f.message,
        "name": f.name,
        "noqa_row": f.noqa_row if f.noqa_row is not None else f.row,
        "url": url if url is not None else default_rule_url(f.code),
    }


def render(data: ReportData) -> str:
    items = [to_dict(f, data.rule_url(f.code)) for f in data.findings]
    if data.json_lines:
        return "".join(json.dumps(i, sort_keys=True, ensure_ascii=False) + "\n" for i in items)
    return json.dumps(items, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
