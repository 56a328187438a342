"""Verification reports: JSON (the record), a Markdown table, a PNG plot.

The JSON is the source of truth; Markdown and PNG are rendered from it.
matplotlib is imported only when a plot is written (the `verify` extra)."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from torchlint.verify import verdict as V

SCHEMA_VERSION = 2
COLUMNS = ("Rule", "Metric", "Bad", "Fixed", "Change", "Threshold", "Verdict", "Repeats")
MECHANISM_COLUMNS = ("Rule", "Bad", "Fixed", "Verdict")
MECHANISM_MODE = "mechanism"  # `verify --mechanism`: the pairs under `torchlint run`, no GPU
MEASURING_MODES = ("gpu", "dry-run")  # reports whose rules were measured (a dry run: on the CPU, at smoke sizes)
CONTEXT_COLUMNS = (
    "Rule",
    "Samples/s bad",
    "Samples/s fixed",
    "Speed-up",
    "Busy bad",
    "Busy fixed",
    "Busy (timed) bad",
    "Busy (timed) fixed",
    "SM clock",
    "Profiler slowdown",
)


class MergeError(Exception):
    pass


def build(
    rules: Sequence[Dict[str, Any]],
    *,
    mode: str,
    repeats: int,
    environment: Optional[Dict[str, Any]] = None,
    skipped_reason: Optional[str] = None,
    **extra: Any,
) -> Dict[str, Any]:
    """mode: "gpu" | "dry-run" | "skipped" | "smoke". A gpu report is `complete` when no
    rule is "not-run"; `rules_not_run` lists the others (a partial report:
    written as the run goes, or one part of a --rules/--time-budget split)."""
    counts: Dict[str, int] = {}
    for r in rules:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    try:
        from torchlint import __version__ as version
    except ImportError:  # pragma: no cover
        version = "unknown"
    env = {"python": platform.python_version(), "platform": sys.platform}
    env.update(environment or {})
    not_run = [r["rule"] for r in rules if r["verdict"] == V.NOT_RUN]
    report = {
        "schema_version": SCHEMA_VERSION,
        "tool": "torchlint verify",
        "torchlint_version": version,
        "mode": mode,
        "repeats": repeats,
        "skipped_reason": skipped_reason,
        "environment": env,
        "complete": not not_run,
        "rules_not_run": not_run,
        "summary": dict(sorted(counts.items())),
        "rules": list(rules),
    }
    report.update(extra)
    return report


def write_json(report: Dict[str, Any], path: Path) -> None:
    """Atomically: a reader (or a run stopped mid-write) never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=True, default=_default) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def load_json(path: Path) -> Dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MergeError(f"{path}: not a readable JSON report ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise MergeError(f"{path}: not a torchlint verify report (no rules list)")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise MergeError(f"{path}: schema_version {data.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    return data


NO_REPORT = "(no report)"


def merge(
    reports: Sequence[Tuple[str, Dict[str, Any]]], expected: Sequence[Dict[str, Any]] = ()
) -> Tuple[Dict[str, Any], List[str]]:
    """One report from several (e.g. the parts of a GPU session).

    Per rule, a measured verdict (pass/fail/inconclusive) wins over not-run or
    skipped; when several reports measured a rule, the later one (in the
    order given) wins and a warning says so. `expected` are not-run results
    for rules the merged report must list even when no report has them (a
    part that never started). Reports from different GPUs or torch versions
    are not merged. Returns the report and the warnings."""
    if not reports:
        raise MergeError("nothing to merge")
    warnings: List[str] = []
    measured = [(name, r) for name, r in reports if r.get("mode") in MEASURING_MODES]
    for key in ("device", "torch", "cuda"):
        seen = {str((r.get("environment") or {}).get(key)) for _, r in measured}
        if len(seen) > 1:
            raise MergeError(f"the reports were measured with different {key}: {', '.join(sorted(seen))}")
    modes = {str(r.get("mode")) for _, r in measured}
    if len(modes) > 1:
        raise MergeError(f"cannot merge a dry run with a GPU measurement ({', '.join(sorted(modes))})")
    chosen: Dict[str, Tuple[str, Dict[str, Any]]] = {r["rule"]: (NO_REPORT, r) for r in expected}
    for name, rep in reports:
        for rule in rep["rules"]:
            code = rule["rule"]
            prev = chosen.get(code)
            if prev is not None and prev[1]["verdict"] in V.MEASURED:
                if rule["verdict"] not in V.MEASURED:
                    continue
                warnings.append(f"{code} was measured in both {prev[0]} and {name}: keeping {name}'s")
            chosen[code] = (name, rule)
    rules = []
    for code in sorted(chosen):
        name, rule = chosen[code]
        rule = dict(rule)
        rule["source"] = name
        rules.append(rule)
    base = measured[-1][1] if measured else reports[-1][1]
    mode = str(base.get("mode", "skipped"))
    merged = build(
        rules,
        mode=mode,
        repeats=max(int(r.get("repeats") or 0) for _, r in reports),
        environment=base.get("environment"),
        skipped_reason=None if measured else base.get("skipped_reason"),
        merged_from=[name for name, _ in reports],
        elapsed_s=sum(float(r.get("elapsed_s") or 0.0) for _, r in reports),
    )
    return merged, warnings


def _default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def format_value(metric: str, value: Optional[float]) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if metric == "busy_fraction":
        return f"{value * 100:.1f}%"
    if metric == "peak_mem_bytes":
        return f"{value / 2**20:.1f} MiB"
    if metric == "wall_s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.3f} s"
    if metric == "samples_per_s":
        return f"{value:,.0f}/s"
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.2f}"


def _cell(metric: str, summary: Optional[Dict[str, Any]]) -> str:
    if not summary:
        return "-"
    text = format_value(metric, summary["median"])
    if summary.get("n", 0) > 1 and summary.get("spread"):
        text += " ± " + format_value(metric, summary["spread"]).replace("/s", "")
    return text


def _bad_cell(r: Dict[str, Any]) -> str:
    if r.get("bad_error") and r.get("verdict") in V.MEASURED:
        return "crashes" if r.get("bad_crash") else "no crash"
    return _cell(r["metric"], r.get("bad"))


def _threshold_cell(r: Dict[str, Any]) -> str:
    if r.get("bad_error"):
        return "bad crashes, fixed runs"
    return V.format_threshold(r["metric"], r["direction"], r["threshold"])


def rows(report: Dict[str, Any]) -> List[List[str]]:
    out = []
    for r in report["rules"]:
        metric = r["metric"]
        measured = r.get("verdict") in V.MEASURED
        out.append(
            [
                r["rule"],
                metric,
                _bad_cell(r),
                _cell(metric, r.get("fixed")),
                "-" if r.get("bad_error") else V.format_change(metric, r.get("change")),
                _threshold_cell(r),
                str(r["verdict"]).upper(),
                str(r["repeats"]) if measured and r.get("repeats") else "-",
            ]
        )
    return out


def _mechanism_cell(rule: str, record: Optional[Dict[str, Any]]) -> str:
    """What one script of a mechanism check showed of its rule's code."""
    if record is None:
        return "-"
    if record.get("error"):
        return "error"
    mine = [f for f in record.get("findings", ()) if f["code"] == rule]
    if not mine:
        return "none"
    f = mine[0]
    return f"{f['count']}x, {f['steps_seen']}/{f['steps']} {f['clock']}"


def mechanism_rows(report: Dict[str, Any]) -> List[List[str]]:
    """Rule, what bad.py and fixed.py showed of its code, verdict."""
    return [
        [
            r["rule"],
            _mechanism_cell(r["rule"], r.get("bad")),
            _mechanism_cell(r["rule"], r.get("fixed")),
            str(r["verdict"]).upper(),
        ]
        for r in report["rules"]
    ]


def _table(report: Dict[str, Any]) -> Tuple[Sequence[str], List[List[str]]]:
    if report.get("mode") == MECHANISM_MODE:
        return MECHANISM_COLUMNS, mechanism_rows(report)
    return COLUMNS, rows(report)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ctx(rule: Dict[str, Any], metric: str, which: str) -> Optional[float]:
    row = (rule.get("metrics") or {}).get(metric) or {}
    cell = row.get(which) or {}
    return cell.get("median")


def context_rows(report: Dict[str, Any]) -> List[List[str]]:
    """Per measured rule: samples/s from the uninstrumented timing window beside the
    profiled busy fraction and the busy fraction at timing speed, the SM clock, the
    profiler's slowdown."""
    out = []
    for r in report["rules"]:
        if r.get("verdict") not in V.MEASURED:
            continue
        sb, sf = _ctx(r, "samples_per_s", "bad"), _ctx(r, "samples_per_s", "fixed")
        speed = f"{sf / sb:.2f}x" if sb and sf else "-"
        clocks = [c for c in (_ctx(r, "sm_clock_mhz_start", w) for w in ("bad", "fixed")) if c]
        slow = [x for x in (_ctx(r, "profiler_slowdown", w) for w in ("bad", "fixed")) if x]
        out.append(
            [
                r["rule"],
                format_value("samples_per_s", sb),
                format_value("samples_per_s", sf),
                speed,
                format_value("busy_fraction", _ctx(r, "busy_fraction", "bad")),
                format_value("busy_fraction", _ctx(r, "busy_fraction", "fixed")),
                format_value("busy_fraction", _ctx(r, "busy_fraction_timed", "bad")),
                format_value("busy_fraction", _ctx(r, "busy_fraction_timed", "fixed")),
                "/".join(f"{c:.0f}" for c in clocks) + " MHz" if clocks else "-",
                "/".join(f"{x:.2f}x" for x in slow) if slow else "-",
            ]
        )
    return out


def to_markdown(report: Dict[str, Any]) -> str:
    lines = ["# torchlint verify --mechanism" if report.get("mode") == MECHANISM_MODE else "# torchlint verify", ""]
    env = report.get("environment", {})
    if report.get("mode") == MECHANISM_MODE:
        lines += [
            f"Mechanism check on the {env.get('device') or 'simulated GPU'}; torch {env.get('torch', '?')}: each "
            "fixture pair under `torchlint run` at smoke sizes. Bad, Fixed: the rule's finding in each script "
            "(occurrences, the steps it was seen in / the steps); observed = bad shows it, fixed does not.",
            "",
        ]
    elif report.get("skipped_reason"):
        lines += [f"GPU verification skipped: {report['skipped_reason']}", ""]
    else:
        device = env.get("device") or "CPU"
        lines += [
            f"Device: {device}; torch {env.get('torch', '?')}; CUDA {env.get('cuda', '-')}; "
            "bad/fixed medians ± interquartile range over each rule's repeats (the Repeats column).",
            "",
        ]
    if report.get("mode") == "dry-run":
        lines += [
            "**Dry run** on the CPU at smoke sizes: it exercises the measurement path (parts, time budget, "
            "partial reports, merge); its numbers and verdicts mean nothing.",
            "",
        ]
    if report.get("mode") in MEASURING_MODES and not report.get("complete", True):
        lines += [
            f"**Partial report**: not run: {', '.join(report.get('rules_not_run', []))} "
            "(merge the other parts with `torchlint verify --merge`).",
            "",
        ]
    columns, table = _table(report)
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "|".join("---" for _ in columns) + "|")
    for row in table:
        lines.append("| " + " | ".join(_escape(c) for c in row) + " |")
    ctx = context_rows(report)
    if ctx:
        lines += [
            "",
            "## Context",
            "",
            "Samples/s from the uninstrumented timing window; busy = GPU busy fraction in the profiled "
            "window; busy (timed) = GPU busy time per sample from the trace x samples/s of the timing "
            "window (what the loop shows without the profiler's overhead); SM clock at the timing "
            "window's start (bad/fixed); profiler slowdown = timing samples/s / profiled samples/s.",
            "",
        ]
        lines.append("| " + " | ".join(CONTEXT_COLUMNS) + " |")
        lines.append("|" + "|".join("---" for _ in CONTEXT_COLUMNS) + "|")
        for row in ctx:
            lines.append("| " + " | ".join(_escape(c) for c in row) + " |")
    notes = [(r["rule"], r.get("reason", "")) for r in report["rules"] if r.get("reason")]
    if notes and not report.get("skipped_reason"):
        lines += ["", "## Reasons", ""]
        lines += [f"- **{rule}**: {_escape(reason)}" for rule, reason in notes]
    return "\n".join(lines) + "\n"


def to_text(report: Dict[str, Any]) -> str:
    """A plain aligned table for the terminal."""
    columns, body = _table(report)
    table = [list(columns)] + body
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    out = []
    for n, row in enumerate(table):
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


VERDICT_COLORS = {
    "pass": "#2e7d32",
    "fail": "#c62828",
    "inconclusive": "#f9a825",
    "skipped": "#9e9e9e",
    "not-run": "#9e9e9e",
}


def write_plot(report: Dict[str, Any], path: Path) -> None:
    """One panel per rule: bad vs fixed median of its metric, spread as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = report["rules"] or [{"rule": "(no fixtures)", "metric": "", "verdict": "skipped"}]
    cols = min(4, len(rules))
    nrows = (len(rules) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.8 * nrows), squeeze=False)
    for ax in axes.flat[len(rules) :]:
        ax.axis("off")
    for ax, r in zip(axes.flat, rules):
        verdict = str(r.get("verdict", ""))
        ax.set_title(
            f"{r['rule']} {r.get('metric', '')}\n{verdict.upper()}",
            fontsize=9,
            color=VERDICT_COLORS.get(verdict, "black"),
        )
        bad, fixed = r.get("bad"), r.get("fixed")
        if not bad or not fixed:
            if r.get("bad_crash"):
                label = "bad crashes,\nfixed runs"
            else:
                label = verdict if verdict in ("skipped", "not-run") else "not measured"
            ax.text(
                0.5,
                0.5,
                label,
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=9,
                color="#616161",
            )
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        scale = 100.0 if r["metric"] == "busy_fraction" else 1.0
        heights = [bad["median"] * scale, fixed["median"] * scale]
        errors = [bad.get("spread", 0) * scale, fixed.get("spread", 0) * scale]
        ax.bar(["bad", "fixed"], heights, yerr=errors, color=["#ef9a9a", "#a5d6a7"], capsize=4)
        ax.tick_params(labelsize=8)
        if r["metric"] == "busy_fraction":
            ax.set_ylabel("GPU busy %", fontsize=8)
    fig.suptitle("torchlint verify: bad vs fixed (median ± IQR)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(str(path), dpi=100)
    plt.close(fig)
