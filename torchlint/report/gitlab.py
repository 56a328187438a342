"""`gitlab`: a GitLab Code Quality report (a JSON array of issues).

Each issue: `check_name` (the code), `description` (code, cell for a
notebook, message), `fingerprint`, `severity` (`major`; `critical` for
TL000, a file that could not be analysed) and `location` (`path` relative to
`$CI_PROJECT_DIR` when set, else to the current folder; `lines.begin` and
`lines.end`). https://docs.gitlab.com/ee/ci/testing/code_quality.html

The fingerprint identifies an issue across runs, so that GitLab can tell new
issues from fixed ones: a hash of the path, the code, the message and the
reported line's text (stripped), not of its row, so that editing lines above
it does not make it a new issue. Identical issues get distinct fingerprints
by their order in the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, List, Set

from torchlint.report import ReportData, cell_prefix
from torchlint.rules import severity


def _path(data: ReportData, path: str) -> str:
    project = os.environ.get("CI_PROJECT_DIR")
    if project:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(project))
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    return data.relpath(path).replace(os.sep, "/")


def fingerprint(path: str, code: str, message: str, line: str, cell: Any = None) -> str:
    key = "\0".join((path, "" if cell is None else str(cell), code, message, line.strip()))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def issues(data: ReportData) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    seen: Set[str] = set()
    for f in data.findings:
        path = _path(data, f.path)
        base = fingerprint(path, f.code, f.message, data.line(f) or "", f.cell)
        value, n = base, 0
        while value in seen:  # the same issue twice in a file: tell them apart by order
            n += 1
            value = hashlib.sha256(f"{base}\0{n}".encode()).hexdigest()
        seen.add(value)
        out.append(
            {
                "check_name": f.code,
                "description": f"{f.code}: {cell_prefix(f)}{f.message}",
                "fingerprint": value,
                "location": {"lines": {"begin": f.row, "end": max(f.row, f.end_row)}, "path": path},
                "severity": "critical" if severity(f.code) == "error" else "major",
            }
        )
    return out


def render(data: ReportData) -> str:
    return json.dumps(issues(data), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
