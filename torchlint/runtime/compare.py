"""A run set against the static findings of the files it ran (`run --compare`).

Every rule runs, preview rules included, on the user's files that ran. Each
static finding is then:

- **confirmed**: an observation of the same code at its place (its line, or
  a place the observation involves: where the CPU tensor or the model was
  made, the user's frames on the way); the loader rules (TL301-TL304) also
  match an observation of their code in the same file;
- **contradicted**: its line ran, but nothing of its kind was observed there,
  or it was observed but not per step where the rule is about every step
  (TL106, TL201, TL202, TL301 for a model call, TL401, TL403);
- **not reached**: its line never ran (the run stopped first, or the code is
  for another path);
- **not checked**: a code the run cannot observe (TL000, TL001, TL105, TL402).

Observations no static finding matches are **runtime-only**.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from torchlint.findings import Finding
from torchlint.runtime.observations import Observation, RunReport
from torchlint.runtime.report import count_text

UNOBSERVABLE = frozenset({"TL000", "TL001", "TL105", "TL402"})
_BY_FILE = frozenset({"TL301", "TL302", "TL303", "TL304"})


@dataclass(frozen=True)
class Link:
    finding: Finding
    observation: Optional[Observation]
    reason: str


@dataclass(frozen=True)
class Comparison:
    confirmed: Tuple[Link, ...]
    contradicted: Tuple[Link, ...]
    not_reached: Tuple[Link, ...]
    not_checked: Tuple[Finding, ...]
    runtime_only: Tuple[Observation, ...]


def static_findings(paths: Sequence[str]) -> List[Finding]:
    """Every rule's findings (preview included) on `paths`, the project read as one."""
    from torchlint import api
    from torchlint.config import Settings

    if not paths:
        return []
    settings = dataclasses.replace(Settings(), preview=True, respect_gitignore=False, force_exclude=False)
    return list(api.run(list(paths), settings, jobs=1).findings)


def _matches(f: Finding, o: Observation) -> bool:
    if o.code != f.code:
        return False
    if any(place.same_place(f.path, f.cell, f.row, f.end_row) for place in o.places()):
        return True
    return f.code in _BY_FILE and os.path.abspath(o.site.path) == os.path.abspath(f.path)


def compare(report: RunReport, static: Sequence[Finding]) -> Comparison:
    from torchlint.runtime.observers import PER_STEP_CODES

    confirmed: List[Link] = []
    contradicted: List[Link] = []
    not_reached: List[Link] = []
    not_checked: List[Finding] = []
    used: Set[int] = set()
    observations = list(report.observations)
    for f in sorted(static, key=Finding.sort_key):
        if f.code in UNOBSERVABLE:
            not_checked.append(f)
            continue
        matches = [o for o in observations if _matches(f, o)]
        reported = [o for o in matches if o.reported]
        if reported:
            used.update(id(o) for o in reported)
            confirmed.append(Link(f, reported[0], count_text(reported[0])))
        elif matches:
            o = matches[0]
            why = "not per step" if f.code in PER_STEP_CODES else "not reported"
            contradicted.append(Link(f, o, f"observed, but {why}: {count_text(o)}"))
        elif report.ran(f.path, f.cell, f.row, f.end_row) is False:
            not_reached.append(Link(f, None, "its line never ran"))
        else:
            contradicted.append(Link(f, None, "its line ran; nothing of the kind was observed there"))
    runtime_only = tuple(o for o in observations if o.reported and id(o) not in used)
    return Comparison(tuple(confirmed), tuple(contradicted), tuple(not_reached), tuple(not_checked), runtime_only)


def render_text(c: Comparison, cwd: Optional[str] = None) -> str:
    cwd = cwd or os.getcwd()

    def where(f: Finding) -> str:
        rel = os.path.relpath(f.path, cwd)
        path = f.path if rel.startswith("..") else rel
        cell = f":cell {f.cell}" if f.cell is not None else ""
        return f"{path}{cell}:{f.row}"

    out = ["Compared with the static findings (every rule, preview included):"]
    for title, links in (
        ("confirmed", c.confirmed),
        ("contradicted", c.contradicted),
        ("not reached", c.not_reached),
    ):
        out.append(f"  {title} ({len(links)}):")
        out.extend(
            f"    {where(link.finding)} {link.finding.code} {link.finding.name}: {link.reason}" for link in links
        )
    out.append(f"  runtime-only ({len(c.runtime_only)}):")
    out.extend(f"    {o.site.where(cwd)} {o.code}: {count_text(o)}" for o in c.runtime_only)
    if c.not_checked:
        out.append(f"  not checked by a run ({len(c.not_checked)}):")
        out.extend(f"    {where(f)} {f.code} {f.name}" for f in c.not_checked)
    return "\n".join(out) + "\n"


def to_json(c: Comparison, cwd: Optional[str] = None) -> Dict[str, Any]:
    def item(link: Link) -> Dict[str, Any]:
        f = link.finding
        return {"code": f.code, "path": f.path, "cell": f.cell, "row": f.row, "reason": link.reason}

    return {
        "confirmed": [item(x) for x in c.confirmed],
        "contradicted": [item(x) for x in c.contradicted],
        "not_reached": [item(x) for x in c.not_reached],
        "not_checked": [{"code": f.code, "path": f.path, "cell": f.cell, "row": f.row} for f in c.not_checked],
        "runtime_only": [
            {"code": o.code, "path": o.site.path, "cell": o.site.cell, "row": o.site.line, "count": o.count}
            for o in c.runtime_only
        ],
    }


def document(report: RunReport, c: Comparison, cwd: Optional[str] = None) -> Dict[str, Any]:
    """`run --compare-output`: how the run ended, every reported observation
    (`static`: whether a static finding matched it), and the comparison."""
    only = {id(o) for o in c.runtime_only}
    error = report.error
    run = {
        "target": report.target,
        "kind": report.kind,
        "status": report.status.value,
        "exit_code": report.exit_code,
        "steps": report.steps,
        "clock": report.clock.value,
        "device_used": report.device_used,
        "seconds": round(report.seconds, 3),
        "files": list(report.files),
        "error": None if error is None else {"type": error.type, "message": error.message},
    }
    observed = [
        {
            "code": o.code,
            "path": o.site.path,
            "cell": o.site.cell,
            "row": o.site.line,
            "count": o.count,
            "per_step": o.per_step,
            "static": id(o) not in only,
        }
        for o in report.findings
    ]
    return {"run": run, "observed": observed, **to_json(c, cwd)}
