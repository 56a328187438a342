"""A run's observations as findings, in `check`'s output formats.

Each reported observation becomes a `Finding` (the rule code `check` uses,
the site's line and columns, the notebook cell) whose message ends with how
often it happened, e.g. "[8 times, every step: 8 of 8 optimizer steps]", so
every format carries it. `json`, `json-lines` and `sarif` (in its result's
`properties`) also get a `runtime` object per finding:

    {"count": 8, "steps_seen": 8, "steps": 8, "clock": "optimizer steps",
     "per_step": true, "rate": 1.0, "crash": false,
     "related": ["train.py:12"], "timings": {"wait_s": 0.01}}

`text` (the default) is `full`'s code frames between a line saying what ran
and a summary (on a real GPU, its timings in one line; the script's error, if
any, with a short traceback).
"""

from __future__ import annotations

import json
import linecache
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from torchlint.findings import Finding
from torchlint.report import FORMATS as CHECK_FORMATS
from torchlint.report import ReportData, plural, render
from torchlint.rules.catalog import CATALOG
from torchlint.runtime.observations import Clock, Observation, RunReport, Site, Status

FORMATS = ("text", *CHECK_FORMATS)


def count_text(o: Observation) -> str:
    """ "8 times, every step: 8 of 8 optimizer steps", "once", "3 times, in 3 of 40 batches"."""
    times = "once" if o.count == 1 else f"{o.count} times"
    if o.clock is Clock.PASSES:
        return f"{'1 restart' if o.count == 1 else f'{o.count} restarts'} in {o.steps} passes"
    if o.steps <= 1:
        return times
    share = f"{o.steps_seen} of {o.steps} {o.clock}"
    if o.per_step:
        return f"{times}, every step: {share}" if o.steps_seen >= o.steps else f"{times}, per step: {share}"
    return f"{times}, in {share}"


def _end(site: Site) -> Tuple[int, int]:
    end_line = site.end_line or site.line
    if site.end_column:
        return end_line, site.end_column
    text = _line_text(site.path, site.cell, end_line) or ""
    return end_line, max(site.column + 1, len(text.rstrip()) + 1)


_CELLS: Dict[str, Dict[int, List[str]]] = {}


def _line_text(path: str, cell: Optional[int], row: int) -> Optional[str]:
    if cell is not None:
        cells = _CELLS.get(path)
        if cells is None:
            from torchlint.runtime.launch import notebook_cells

            try:
                cells = {n: s.splitlines() for n, s in notebook_cells(path)}
            except (OSError, ValueError):
                cells = {}
            _CELLS[path] = cells
        lines = cells.get(cell, [])
        return lines[row - 1] if 0 < row <= len(lines) else None
    text = linecache.getline(path, row)
    return text.rstrip("\n") if text else None


def finding_of(o: Observation) -> Finding:
    end_row, end_column = _end(o.site)
    return Finding(
        code=o.code,
        name=CATALOG.get(o.code, o.code.lower()),
        message=f"{o.message} [{count_text(o)}]",
        path=o.site.path,
        row=o.site.line,
        column=o.site.column,
        end_row=end_row,
        end_column=end_column,
        cell=o.site.cell,
    )


def findings(report: RunReport) -> List[Tuple[Finding, Observation]]:
    """The reported observations as findings, sorted as `check` sorts them."""
    pairs = [(finding_of(o), o) for o in report.findings]
    pairs.sort(key=lambda p: p[0].sort_key())
    return pairs


def runtime_object(o: Observation, cwd: Optional[str] = None) -> Dict[str, Any]:
    return {
        "count": o.count,
        "steps_seen": o.steps_seen,
        "steps": o.steps,
        "clock": str(o.clock),
        "per_step": o.per_step,
        "rate": round(o.rate, 6),
        "crash": o.crash,
        "related": [s.where(cwd) for s in o.related],
        "timings": {k: round(v, 6) for k, v in o.timings},
    }


def _lines(pairs: Sequence[Tuple[Finding, Observation]]) -> Dict[Tuple[str, Optional[int], int], str]:
    lines = {}
    for f, _ in pairs:
        for row in range(f.row, f.end_row + 1):
            text = _line_text(f.path, f.cell, row)
            if text is not None:
                lines[(f.path, f.cell, row)] = text
    return lines


def render_report(report: RunReport, fmt: str = "text", cwd: Optional[str] = None) -> str:
    """The report in `fmt` (FORMATS)."""
    cwd = cwd or os.getcwd()
    pairs = findings(report)
    data = ReportData(findings=[f for f, _ in pairs], lines=_lines(pairs), cwd=cwd, unsafe_hint=False)
    if fmt == "text":
        return header(report, cwd) + render("full", data) + footer(report, cwd)
    text = render(fmt, data)
    if fmt in ("json", "json-lines"):
        return _with_runtime_json(text, pairs, fmt == "json-lines", cwd)
    if fmt == "sarif":
        sarif = json.loads(text)
        for result, (_, o) in zip(sarif["runs"][0]["results"], pairs):
            result.setdefault("properties", {})["runtime"] = runtime_object(o, cwd)
        return json.dumps(sarif, indent=2, ensure_ascii=False) + "\n"
    return text


def _with_runtime_json(text: str, pairs: Sequence[Tuple[Finding, Observation]], lines: bool, cwd: str) -> str:
    if lines:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        items = json.loads(text)
    for item, (_, o) in zip(items, pairs):
        item["runtime"] = runtime_object(o, cwd)
    if lines:
        return "".join(json.dumps(i, sort_keys=True, ensure_ascii=False) + "\n" for i in items)
    return json.dumps(items, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _target(report: RunReport, cwd: str) -> str:
    if report.kind == "module":
        return f"-m {report.target}"
    rel = os.path.relpath(report.target, cwd)
    return report.target if rel.startswith("..") else rel


_SINGULAR = {
    Clock.OPTIMIZER: "optimizer step",
    Clock.BATCHES: "batch",
    Clock.FORWARDS: "forward call",
    Clock.PASSES: "pass",
}


def status_line(report: RunReport, cwd: Optional[str] = None) -> str:
    """What ran and how it ended, in one line."""
    cwd = cwd or os.getcwd()
    steps = plural(report.steps, _SINGULAR[report.clock])
    ends = {
        Status.OK: "ran to its end",
        Status.EXITED: f"exited with code {report.exit_code}",
        Status.FAILED: "raised " + (report.error.type if report.error else "an exception"),
        Status.STOPPED: "stopped by --steps",
        Status.INTERRUPTED: "interrupted (Ctrl-C)",
        Status.TIMED_OUT: "stopped by --timeout",
    }
    gpu = f"the GPU ({report.device})" if report.device else "the simulated GPU"
    device = f"on {gpu}" if report.device_used else f"(nothing was sent to {gpu})"
    return (
        f"torchlint run: {_target(report, cwd)} {ends[report.status]} after {steps} {device}, in {report.seconds:.1f} s"
    )


def timings_line(report: RunReport) -> Optional[str]:
    """The real GPU's timings in one line (`--device cuda`), or None on the simulated GPU."""
    if report.timings is None:
        return None
    from torchlint.runtime.timing import timings_line as line

    return line(report.timings)


def header(report: RunReport, cwd: str) -> str:
    return "\n" + status_line(report, cwd) + "\n\n"


def footer(report: RunReport, cwd: str) -> str:
    out = []
    pairs = report.findings
    crashes = sum(1 for o in pairs if o.crash)
    if pairs:
        extra = f" ({crashes} would raise on a GPU)" if crashes else ""
        out.append(f"Found {plural(len(pairs), 'finding')}{extra}.")
    else:
        out.append("Nothing to report: nothing a GPU run would trip on was observed.")
    timings = timings_line(report)
    if timings is not None:
        out.append(timings)
    if report.error is not None and report.status is Status.FAILED:
        where = f" at {report.error.site.where(cwd)}" if report.error.site else ""
        out.append(f"\nThe script raised {report.error.type}{where}; what was observed up to there is above.")
        out.append(report.error.traceback.rstrip())
    return "\n".join(out) + "\n"
