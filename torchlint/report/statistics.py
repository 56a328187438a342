"""`--statistics`: one row per code, sorted by count (desc) then code."""

from __future__ import annotations

import json
from collections import Counter
from typing import Dict, List

from torchlint.report import ReportData


def rows(data: ReportData) -> List[Dict[str, object]]:
    counts = Counter(f.code for f in data.findings)
    names = {f.code: f.name for f in data.findings}
    fixable = {f.code for f in data.findings if data.applicable(f)}
    return [
        {"code": code, "name": names[code], "count": n, "fixable": code in fixable}
        for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def render(data: ReportData, as_json: bool = False) -> str:
    table = rows(data)
    if as_json:
        return json.dumps(table, indent=2) + "\n"
    if not table:
        return ""
    width = max(len(str(r["count"])) for r in table)
    return "".join(
        f"{str(r['count']).rjust(width)}\t{r['code']}\t{'[*]' if r['fixable'] else '[ ]'} {r['name']}\n" for r in table
    )
