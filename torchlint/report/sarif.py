"""`sarif`: SARIF 2.1.0, one run, rules listed for every code that appears.

SARIF has no notebook cells: a notebook finding's message starts with its
cell (`cell 3: ...`), its region's lines count within that cell, and the cell
number is in the region's and the result's `properties` (`{"cell": 3}`)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional
from urllib.parse import quote

from torchlint import __version__
from torchlint.findings import Finding
from torchlint.report import INFORMATION_URI, ReportData, cell_prefix
from torchlint.rules import severity

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"


def _section(doc: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\s*\n(.*?)(?=^## |\Z)", doc, re.M | re.S)
    return " ".join(m.group(1).split()) if m else ""


def _rule(code: str, data: Optional[ReportData] = None) -> Dict[str, Any]:
    from torchlint.rules import rule_by_code

    try:
        cls = rule_by_code(code)
    except KeyError:
        cls = None
    name = cls.NAME if cls else code
    # The rule's title, never its message template (`{name}`): GitHub code
    # scanning shows it to users as the rule's description.
    short = cls.title() if cls else code
    full = _section(cls.doc(), "What it does") if cls else ""
    level = severity(code)
    rule: Dict[str, Any] = {
        "id": code,
        "name": name,
        "shortDescription": {"text": short},
        "defaultConfiguration": {"level": level},
    }
    if full:
        rule["fullDescription"] = {"text": full}
    url = (data or ReportData(findings=())).rule_url(code)
    if url:
        rule["helpUri"] = url
    return rule


def _artifact(data: ReportData, path: str) -> Dict[str, str]:
    rel = data.relpath(path)
    if os.path.isabs(rel):
        return {"uri": Path(rel).as_uri()}
    return {"uri": quote(rel.replace(os.sep, "/")), "uriBaseId": SRCROOT}


def _region(row: int, col: int, end_row: int, end_col: int) -> Dict[str, int]:
    return {"startLine": row, "startColumn": col, "endLine": end_row, "endColumn": end_col}


def _result(data: ReportData, f: Finding, index: int) -> Dict[str, Any]:
    artifact = _artifact(data, f.path)
    region: Dict[str, Any] = dict(_region(f.row, f.column, f.end_row, f.end_column))
    if f.cell is not None:
        region["properties"] = {"cell": f.cell}
    result: Dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": severity(f.code),
        "message": {"text": cell_prefix(f) + f.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": artifact,
                    "region": region,
                }
            }
        ],
    }
    if f.cell is not None:
        result["properties"] = {"cell": f.cell}
    if f.fix is not None and f.cell is None:
        result["fixes"] = [
            {
                "description": {"text": f"{f.fix.message} ({f.fix.applicability})"},
                "artifactChanges": [
                    {
                        "artifactLocation": artifact,
                        "replacements": [
                            {
                                "deletedRegion": _region(e.row, e.column, e.end_row, e.end_column),
                                "insertedContent": {"text": e.content},
                            }
                            for e in f.fix.edits
                        ],
                    }
                ],
            }
        ]
    return result


def to_sarif(data: ReportData) -> Dict[str, Any]:
    codes = sorted({f.code for f in data.findings})
    index = {code: i for i, code in enumerate(codes)}
    results: List[Dict[str, Any]] = [_result(data, f, index[f.code]) for f in data.findings]
    root = Path(data.cwd).as_uri().rstrip("/") + "/"
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchlint",
                        "informationUri": INFORMATION_URI,
                        "version": __version__,
                        "rules": [_rule(c, data) for c in codes],
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": root}},
                "results": results,
            }
        ],
    }


def render(data: ReportData) -> str:
    return json.dumps(to_sarif(data), indent=2, sort_keys=False, ensure_ascii=False) + "\n"
