"""Output formats: one module per format, each with `render(data) -> str`.

Every reporter receives findings already sorted by path and position and must
produce deterministic output (no sets, no timestamps).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence, Tuple

from torchlint.findings import Applicability, Finding

FORMATS = ("full", "concise", "json", "json-lines", "github", "gitlab", "junit", "pylint", "rdjson", "sarif")
_MODULES = {
    "full": "full",
    "concise": "concise",
    "json": "json_",
    "json-lines": "json_",
    "github": "github",
    "gitlab": "gitlab",
    "junit": "junit",
    "pylint": "pylint",
    "rdjson": "rdjson",
    "sarif": "sarif",
}
INFORMATION_URI = "https://github.com/torchlint/torchlint"


@dataclass
class ReportData:
    """Everything a reporter may need; plain data."""

    findings: Sequence[Finding]
    # (path, cell or None, row) -> the text of that line (rows findings and
    # their fixes touch), for code frames, fingerprints and UTF-8 columns.
    lines: Mapping[Tuple[str, Optional[int], int], str] = field(default_factory=dict)
    mode: str = "lint"  # lint | fix
    unsafe_fixes: bool = False
    fixes_applied: int = 0
    # path -> fixes applied there (for --show-fixes)
    fixed_per_file: Mapping[str, int] = field(default_factory=dict)
    show_fixes: bool = False
    json_lines: bool = False
    cwd: str = field(default_factory=os.getcwd)
    # Whether to mention unsafe fixes that --unsafe-fixes would enable
    # (off with `unsafe-fixes = false`, as in Ruff).
    unsafe_hint: bool = True
    # Problems of the run (unreadable paths...): a run with problems, or one
    # that linted no file, never says "All checks passed!".
    problems: int = 0
    linted_nothing: bool = False
    # The rule pages' base URL (`docs-url`, TORCHLINT_DOCS_URL); None: the default.
    docs_url: Optional[str] = None

    def rule_url(self, code: str) -> Optional[str]:
        """The URL of `code`'s page, under `docs_url` (None for an unknown code)."""
        from torchlint.config import Settings

        return Settings(docs_url=self.docs_url).rule_url(code)

    def applicable(self, finding: Finding) -> bool:
        """Whether --fix (with the current --unsafe-fixes) would apply this fix."""
        if finding.fix is None:
            return False
        return finding.fix.applicability == Applicability.SAFE or self.unsafe_fixes

    def line(self, f: Finding, row: Optional[int] = None) -> Optional[str]:
        """The text of `row` (default: the finding's) in the finding's file or
        cell; None when the report was not given it."""
        return self.lines.get((f.path, f.cell, f.row if row is None else row))

    def utf8_column(self, f: Finding, row: int, column: int) -> int:
        """A 1-based column counted in characters, as a 1-based column counted
        in UTF-8 bytes (reviewdog's unit); unchanged when the line is unknown."""
        text = self.line(f, row)
        if text is None:
            return column
        return len(text[: column - 1].encode("utf-8", "surrogatepass")) + 1 + max(0, column - 1 - len(text))

    def relpath(self, path: str) -> str:
        try:
            rel = os.path.relpath(os.path.abspath(path), self.cwd)
        except ValueError:  # another drive on Windows
            return path
        return path if rel.startswith("..") else rel


def render(fmt: str, data: ReportData) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}")
    module = importlib.import_module(f"torchlint.report.{_MODULES[fmt]}")
    if fmt == "json-lines":
        data.json_lines = True
    return module.render(data)


def cell_prefix(f: Finding) -> str:
    """ "cell 3: " for a notebook finding (whose rows count from its cell's
    first line), "" otherwise: formats without a place for the cell say it
    in the message."""
    return f"cell {f.cell}: " if f.cell is not None else ""


def plural(n: int, word: str) -> str:
    """ "1 error", "2 errors", "2 hidden fixes"."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}{'es' if word.endswith(('x', 's', 'ch', 'sh')) else 's'}"


def summary(data: ReportData) -> str:
    """Ruff-style closing lines for the human formats."""
    findings = data.findings
    n = len(findings)
    lines = []
    passed = "All checks passed!\n" if not (data.problems or data.linted_nothing) else ""
    if data.mode == "fix":
        if n == 0 and data.fixes_applied == 0:
            return passed
        total = n + data.fixes_applied
        lines.append(f"Found {plural(total, 'error')} ({data.fixes_applied} fixed, {n} remaining).")
    elif n == 0:
        return passed
    else:
        lines.append(f"Found {plural(n, 'error')}.")
    fixable = sum(1 for f in findings if data.applicable(f))
    hidden = sum(1 for f in findings if f.fix is not None and not data.applicable(f)) if data.unsafe_hint else 0
    hint = f"{plural(hidden, 'hidden fix')} can be enabled with the `--unsafe-fixes` option"
    if fixable:
        extra = f" ({hint})" if hidden else ""
        lines.append(f"[*] {fixable} fixable with the `--fix` option{extra}.")
    elif hidden:
        lines.append(f"No fixes available ({hint}).")
    return "\n".join(lines) + "\n"


def fixes_summary(data: ReportData) -> str:
    """--show-fixes: which files got how many fixes."""
    if not data.fixed_per_file:
        return ""
    out = [f"\nFixed {plural(data.fixes_applied, 'error')}:"]
    for path in sorted(data.fixed_per_file):
        out.append(f"- {data.relpath(path)}: {plural(data.fixed_per_file[path], 'fix')}")
    return "\n".join(out) + "\n"


__all__ = ["FORMATS", "ReportData", "cell_prefix", "render", "summary", "fixes_summary"]
