"""Verification reports: JSON (the record), a Markdown table, a PNG plot.

The JSON is the source of truth; Markdown and PNG are rendered from it.
matplotlib is imported only when a plot is written (the `verify` extra)."""
from __future__ import annotations

import json
import math
import platform
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from torchlint.verify import verdict as V

SCHEMA_VERSION = 1
COLUMNS = ("Rule", "Metric", "Bad", "Fixed", "Change", "Threshold", "Verdict")


def build(rules: Sequence[Dict[str, Any]], *, mode: str, repeats: int, environment: Optional[Dict[str, Any]] = None,
          skipped_reason: Optional[str] = None) -> Dict[str, Any]:
    """mode: "gpu" | "skipped" | "smoke"."""
    counts: Dict[str, int] = {}
    for r in rules:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    try:
        from torchlint import __version__ as version
    except ImportError:  # pragma: no cover
        version = "unknown"
    env = {"python": platform.python_version(), "platform": sys.platform}
    env.update(environment or {})
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "torchlint verify",
        "torchlint_version": version,
        "mode": mode,
        "repeats": repeats,
        "skipped_reason": skipped_reason,
        "environment": env,
        "summary": dict(sorted(counts.items())),
        "rules": list(rules),
    }


def write_json(report: Dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True, default=_default) + "\n", encoding="utf-8")


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
        return f"{value / 2 ** 20:.1f} MiB"
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


def rows(report: Dict[str, Any]) -> List[List[str]]:
    out = []
    for r in report["rules"]:
        metric = r["metric"]
        out.append([
            r["rule"], metric, _cell(metric, r.get("bad")), _cell(metric, r.get("fixed")),
            V.format_change(metric, r.get("change")),
            V.format_threshold(metric, r["direction"], r["threshold"]),
            str(r["verdict"]).upper(),
        ])
    return out


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: Dict[str, Any]) -> str:
    lines = ["# torchlint verify", ""]
    env = report.get("environment", {})
    if report.get("skipped_reason"):
        lines += [f"GPU verification skipped: {report['skipped_reason']}", ""]
    else:
        device = env.get("device") or "CPU"
        lines += [f"Device: {device}; torch {env.get('torch', '?')}; CUDA {env.get('cuda', '-')}; "
                  f"{report['repeats']} repeat(s); bad/fixed medians ± interquartile range.", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in rows(report):
        lines.append("| " + " | ".join(_escape(c) for c in row) + " |")
    notes = [(r["rule"], r.get("reason", "")) for r in report["rules"] if r.get("reason")]
    if notes and not report.get("skipped_reason"):
        lines += ["", "## Reasons", ""]
        lines += [f"- **{rule}**: {_escape(reason)}" for rule, reason in notes]
    return "\n".join(lines) + "\n"


def to_text(report: Dict[str, Any]) -> str:
    """A plain aligned table for the terminal."""
    table = [list(COLUMNS)] + rows(report)
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    out = []
    for n, row in enumerate(table):
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


VERDICT_COLORS = {"pass": "#2e7d32", "fail": "#c62828", "inconclusive": "#f9a825", "skipped": "#9e9e9e"}


def write_plot(report: Dict[str, Any], path: Path) -> None:
    """One panel per rule: bad vs fixed median of its metric, spread as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = report["rules"] or [{"rule": "(no fixtures)", "metric": "", "verdict": "skipped"}]
    cols = min(4, len(rules))
    nrows = (len(rules) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.8 * nrows), squeeze=False)
    for ax in axes.flat[len(rules):]:
        ax.axis("off")
    for ax, r in zip(axes.flat, rules):
        verdict = str(r.get("verdict", ""))
        ax.set_title(f"{r['rule']} {r.get('metric', '')}\n{verdict.upper()}", fontsize=9,
                     color=VERDICT_COLORS.get(verdict, "black"))
        bad, fixed = r.get("bad"), r.get("fixed")
        if not bad or not fixed:
            ax.text(0.5, 0.5, "not measured" if verdict != "skipped" else "skipped", ha="center", va="center",
                    transform=ax.transAxes, fontsize=9, color="#616161")
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
