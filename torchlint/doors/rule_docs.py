"""Rule documentation rendered from the rule classes.

One source of truth: a rule's docstring (Ruff's sections), its code, name,
message and fix metadata. `scripts/gen_rule_docs.py` writes the rendered pages
to docs/rules/ and the rule catalog (torchlint/rules/catalog.py); `torchlint
rule CODE` / `torchlint rules` print the same text (or the JSON forms below),
and the JSON/SARIF reporters link to the pages via `torchlint.rules.rule_url`.
"""

from __future__ import annotations

import errno
import os
import re
from typing import Dict, List, Mapping, Optional, Tuple, Type, Union

from torchlint import rules as rules_registry
from torchlint.findings import Applicability
from torchlint.rules import all_rules, rule_by_code, status_of
from torchlint.rules.base import Rule
from torchlint.rules.stability import ALWAYS_REPORTED, RuleStatus

Statuses = Optional[Mapping[str, RuleStatus]]

# Where the generated pages live in the repository, and their public address.
DOCS_DIR = "docs/rules"

# Sections a rule's docstring may have, in the order they must appear.
SECTIONS = (
    "What it does",
    "Why is this bad?",
    "Known problems",
    "Example",
    "Use instead",
    "Fix safety",
    "Options",
    "References",
)
# Sections every rule must have; "Fix safety" is required too when the rule has a
# fix. "Options" and "References" are optional (rules/base.py's contract).
REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")

CATEGORIES = {
    "TL0": "the file itself",
    "TL1": "device placement",
    "TL2": "inference",
    "TL3": "batching and data loading",
    "TL4": "host/device synchronization",
    "TL5": "profiling",
}

RuleLike = Union[str, Type[Rule]]


def _resolve(rule: RuleLike) -> Type[Rule]:
    """A rule class from a class, a code or a name; KeyError if unknown."""
    if isinstance(rule, str):
        for r in all_rules():
            if r.NAME == rule:
                return r
        return rule_by_code(rule)
    return rule


def documented_rules() -> List[Type[Rule]]:
    """Every rule class, sorted by code (TL000 first)."""
    return list(all_rules())


def rule_url(rule: RuleLike) -> str:
    url = rules_registry.rule_url(_resolve(rule).CODE)
    assert url is not None  # every rule class is in the catalog (checked by a test)
    return url


def category(rule: RuleLike) -> str:
    r = _resolve(rule)
    return CATEGORIES.get(r.CODE[:3], "other")


# ---------------------------------------------------------------------------
# Docstring sections


def doc_sections(rule: RuleLike) -> List[Tuple[str, str]]:
    """The docstring's `## Title` sections as (title, body) pairs, in order."""
    r = _resolve(rule)
    text = r.doc()
    sections: List[Tuple[str, str]] = []
    title: Optional[str] = None
    body: List[str] = []
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith("## "):
            if title is not None:
                sections.append((title, "\n".join(body).strip("\n")))
            title, body = line[3:].strip(), []
        elif title is not None:
            body.append(line)
    if title is not None:
        sections.append((title, "\n".join(body).strip("\n")))
    return sections


def doc_problems(rule: RuleLike) -> List[str]:
    """What is wrong with a rule's docstring (empty when it is fine)."""
    r = _resolve(rule)
    sections = doc_sections(r)
    titles = [t for t, _ in sections]
    problems = []
    required = list(REQUIRED_SECTIONS)
    if r.APPLICABILITY is not None:
        required.append("Fix safety")
    for t in required:
        if t not in titles:
            problems.append(f"missing section '## {t}'")
    for t in titles:
        if t not in SECTIONS:
            problems.append(f"unknown section '## {t}' (allowed: {', '.join(SECTIONS)})")
    known = [t for t in titles if t in SECTIONS]
    if known != sorted(known, key=SECTIONS.index):
        problems.append(f"sections out of order: {', '.join(known)} (expected order: {', '.join(SECTIONS)})")
    if len(set(titles)) != len(titles):
        problems.append("a section appears twice")
    for t, body in sections:
        if not body.strip():
            problems.append(f"section '## {t}' is empty")
    text = r.doc()
    if text.strip() and not text.lstrip().startswith("## "):
        problems.append("text before the first '## ' section would be lost")
    return problems


def summary_parts(rule: RuleLike) -> List[str]:
    """The first sentence of "What it does", as its lead and, when the lead
    introduces a list (`Flags, ...:` then `- ...` items), the list's items up
    to the one that ends the sentence: [lead, item, item, ...]."""
    r = _resolve(rule)
    for title, body in doc_sections(r):
        if title != "What it does":
            continue
        paragraphs = re.split(r"\n\s*\n", body.strip())
        lead = " ".join(paragraphs[0].split())
        if lead.endswith(":") and len(paragraphs) > 1 and paragraphs[1].lstrip().startswith("- "):
            parts = [lead]
            for item in re.split(r"^\s*- ", paragraphs[1], flags=re.M):
                item = " ".join(item.split())
                if item:
                    parts.append(item)
                    if item.endswith((".", "!", "?")):
                        break
            return parts
        flat = " ".join(body.split())
        m = re.match(r"(.+?[.!?])(\s|$)", flat)
        return [m.group(1) if m else flat]
    return [r.MESSAGE]


def summary(rule: RuleLike) -> str:
    """One line: the first sentence of "What it does" (a list in it read as
    prose: its items one after the other, without their dashes)."""
    return " ".join(summary_parts(rule))


# ---------------------------------------------------------------------------
# Fix availability (Ruff's wording)


def fix_availability(rule: RuleLike) -> str:
    """ "always", "sometimes" or "none".

    A rule with a fix title/applicability offers a fix; it is "always" available
    when every INVALID example has an expected fix, "sometimes" otherwise."""
    r = _resolve(rule)
    if r.APPLICABILITY is None and r.FIX_TITLE is None:
        return "none"
    examples = list(r.INVALID)
    if examples and all(ex.fixed is not None for ex in examples):
        return "always"
    return "sometimes"


def fix_applicabilities(rule: RuleLike) -> List[str]:
    """The applicabilities the rule's fixes can have, safe first."""
    r = _resolve(rule)
    if fix_availability(r) == "none":
        return []
    found = set()
    if r.APPLICABILITY is not None:
        found.add(str(r.APPLICABILITY))
    for ex in r.INVALID:
        if ex.fixed is not None:
            found.add("unsafe" if ex.unsafe else "safe")
    if not found:
        found.add(str(Applicability.SAFE))
    return [a for a in ("safe", "unsafe") if a in found]


def fix_line(rule: RuleLike) -> Optional[str]:
    """ "Fix is always available (safe)." / "Fix is sometimes available (safe or unsafe)." / None."""
    avail = fix_availability(rule)
    if avail == "none":
        return None
    return f"Fix is {avail} available ({' or '.join(fix_applicabilities(rule))})."


def fix_column(rule: RuleLike) -> str:
    """Short text for tables: "", "safe", "unsafe", "safe/unsafe", with "sometimes" when so."""
    avail = fix_availability(rule)
    if avail == "none":
        return ""
    text = "/".join(fix_applicabilities(rule))
    return text if avail == "always" else f"sometimes {text}"


# ---------------------------------------------------------------------------
# Rendering


def status(rule: RuleLike, statuses: Statuses = None) -> RuleStatus:
    """The rule's recorded status (from `statuses` when given, else the catalog's)."""
    code = _resolve(rule).CODE
    return statuses[code] if statuses is not None else status_of(code)


def status_line(rule: RuleLike, statuses: Statuses = None) -> str:
    """`Status: stable. First-sight precision: 0.92 (23/25, rounds 1, 2).`"""
    st = status(rule, statuses)
    if _resolve(rule).CODE in ALWAYS_REPORTED:
        return "Status: stable (always reported)."
    how = "stable" if not st.is_preview else "preview (on with `--preview` or `preview = true`)"
    return f"Status: {how}. First-sight precision: {st.measured()}."


def render_rule_markdown(rule: RuleLike, statuses: Statuses = None) -> str:
    """The page `docs/rules/<name>.md` (and `torchlint rule CODE`)."""
    r = _resolve(rule)
    lines = [f"# {r.NAME} ({r.CODE})", ""]
    lines.append(f"Category: {category(r)} ({r.CODE[:3]}xx).")
    lines.append("")
    lines.append(status_line(r, statuses))
    lines.append("")
    fl = fix_line(r)
    if fl:
        lines.append(fl)
        lines.append("")
    if r.REQUIRES_DEVICE:
        lines.append("Fires only where a device is in play (the file selects or uses an accelerator).")
        lines.append("")
    if r.ACCELERATOR_COST:
        lines.append(
            'Silent in a file that chooses the CPU (`device = "cpu"`, a literal config whose '
            '`"device"` is `"cpu"`): what it reports costs only on an accelerator.'
        )
        lines.append("")
    if r.FIX_TITLE:
        lines.append(f"Fix title: {r.FIX_TITLE}")
        lines.append("")
    for title, body in doc_sections(r):
        lines.append(f"## {title}")
        lines.append(body)
        lines.append("")
        if title == "Example":
            output = example_output(r, statuses)
            if output is not None:
                flag = "--preview " if status(r, statuses).is_preview else ""
                lines.append(f"`torchlint check {flag}{EXAMPLE_PATH}` on it prints:")
                lines.append("")
                lines.append("```console")
                lines.append(output.rstrip("\n"))
                lines.append("```")
                lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# The name the rule pages give their example file.
EXAMPLE_PATH = "example.py"


def section_code(rule: RuleLike, title: str) -> Optional[str]:
    """The Python code of a docstring section's first ```python block, or None."""
    body = dict(doc_sections(rule)).get(title)
    if body is None:
        return None
    m = re.search(r"^```python\n(.*?)^```", body, re.S | re.M)
    return m.group(1) if m else None


def example_output(rule: RuleLike, statuses: Statuses = None) -> Optional[str]:
    """What `torchlint check example.py` prints (the default `full` format;
    `--preview` for a preview rule) for the rule's "Example" code: the pages
    show the tool's real output, never a hand-written one. None without an
    example."""
    from torchlint.api import process_bytes
    from torchlint.config import Settings
    from torchlint.files import runner
    from torchlint.report import ReportData, render, summary

    r = _resolve(rule)
    preview = status(r, statuses).is_preview
    if r.CODE == runner.IO_ERROR:
        # Not about contents: what the runner reports for a file whose read
        # fails with EACCES (`chmod a-r`; the page's Example).
        job = runner.FileJob(EXAMPLE_PATH, frozenset(), "lint")
        outcome = runner._unreadable(job, f"Cannot read the file: {os.strerror(errno.EACCES)}")
    else:
        code = section_code(r, "Example")
        if code is None:
            return None
        outcome = process_bytes(code.encode("utf-8"), EXAMPLE_PATH, Settings(preview=preview))
    data = ReportData(
        findings=outcome.findings,
        lines={(outcome.path, cell, row): text for cell, row, text in outcome.lines},
    )
    flag = "--preview " if preview else ""
    return f"$ torchlint check {flag}{EXAMPLE_PATH}\n" + render("full", data) + summary(data)


def render_rule_json(rule: RuleLike) -> Dict[str, object]:
    """`torchlint rule CODE --output-format json` (modelled on Ruff's)."""
    r = _resolve(rule)
    explanation = "\n\n".join(f"## {t}\n{b}" for t, b in doc_sections(r)) + "\n"
    # Ruff's keys (name, code, linter, summary, message_formats, fix, explanation,
    # preview) plus torchlint's own.
    return {
        "code": r.CODE,
        "name": r.NAME,
        "linter": "torchlint",
        "category": category(r),
        "message_formats": [r.MESSAGE],
        "preview": status(r).is_preview,
        "first_sight_precision": status(r).precision,
        "summary": summary(r),
        "message": r.MESSAGE,
        "fix": fix_line(r) or "Fix is not available.",
        "fix_availability": fix_availability(r),
        "fix_applicability": fix_applicabilities(r),
        "fix_title": r.FIX_TITLE,
        "requires_device": r.REQUIRES_DEVICE,
        "accelerator_cost": r.ACCELERATOR_COST,
        "explanation": explanation,
        "url": rule_url(r),
    }


def rules_table_json() -> List[Dict[str, object]]:
    """`torchlint rules --output-format json`: one entry per rule (TL000 first)."""
    return [render_rule_json(r) for r in documented_rules()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def status_column(rule: RuleLike, statuses: Statuses = None) -> str:
    """`stable 0.95` / `preview 0.60` / `preview –` for the rule tables."""
    st = status(rule, statuses)
    if _resolve(rule).CODE in ALWAYS_REPORTED:
        return "stable"
    figure = f"{st.precision:.2f}" if st.precision is not None else "–"
    return f"{st.stability.value} {figure}"


def rules_table_markdown(link: bool = True, statuses: Statuses = None) -> str:
    """The rules index as a markdown table (docs/rules/README.md)."""
    lines = ["| Code | Name | Status (first-sight precision) | Fix | Summary |", "|---|---|---|---|---|"]
    for r in documented_rules():
        code = f"[{r.CODE}]({r.NAME}.md)" if link else r.CODE
        lines.append(f"| {code} | {r.NAME} | {status_column(r, statuses)} | {fix_column(r)} | {_cell(summary(r))} |")
    return "\n".join(lines) + "\n"


def rules_table_text(width: Optional[int] = None) -> str:
    """`torchlint rules`: a plain aligned table for terminals. With `width`,
    no line is longer: the summary column is wrapped, its continuation lines
    starting under it; when that column would be narrower than 40 characters
    (an 80-column terminal), each summary goes under its row instead, indented
    by 4, wrapped to the width. A summary that holds a list keeps it one
    item per line (`- item`, continuation lines under the item's text)."""
    import textwrap

    rules = documented_rules()
    rows = [("CODE", "NAME", "STATUS", "FIX")]
    rows += [(r.CODE, r.NAME, status_column(r), fix_column(r) or "-") for r in rules]
    summaries = [["SUMMARY"]] + [summary_parts(r) for r in rules]
    columns = 4
    widths = [max(len(row[i]) for row in rows) for i in range(columns)]
    indent = sum(widths) + 2 * columns
    beside = width is None or width - indent >= 40

    def wrapped(parts: List[str], room: Optional[int]) -> List[str]:
        if room is None:
            return [" ".join(parts)] if len(parts) == 1 else [parts[0]] + ["- " + item for item in parts[1:]]
        lines = textwrap.wrap(parts[0], room, break_on_hyphens=False)
        for item in parts[1:]:
            chunk = textwrap.wrap(item, max(10, room - 2), break_on_hyphens=False)
            lines += ["- " + chunk[0]] + ["  " + c for c in chunk[1:]]
        return lines

    out = []
    for k, row in enumerate(rows):
        head = "  ".join(row[i].ljust(widths[i]) for i in range(columns))
        if beside:
            parts = wrapped(summaries[k], None if width is None else width - indent)
            out.append(head + "  " + (parts[0] if parts else ""))
            out.extend(" " * indent + part for part in parts[1:])
        elif k:  # the header row has no summary of its own in this layout
            out.append(head)
            out.extend("    " + part for part in wrapped(summaries[k], max(20, (width or 80) - 4)))
        else:
            out.append(head)
    return "\n".join(line.rstrip() for line in out) + "\n"


README_PATH = "README.md"
_README_ROW = re.compile(r"^\| (TL\d{3}) \| ([a-z0-9-]+) \| [^|]* \|", re.M)


def readme_with_statuses(text: str, statuses: Statuses = None) -> str:
    """The README with the status column of its rules table (`| TL104 | name |
    status | ...`) set from the recorded statuses."""

    def cell(match: "re.Match[str]") -> str:
        code = match.group(1)
        try:
            value = status_column(code, statuses)
        except KeyError:
            return match.group(0)
        return f"| {code} | {match.group(2)} | {value} |"

    return _README_ROW.sub(cell, text)


def render_index(statuses: Statuses = None) -> str:
    """docs/rules/README.md."""
    return (
        "# Rules\n\n"
        "<!-- Generated by scripts/gen_rule_docs.py from the rule classes; do not edit. -->\n\n"
        "Status: `stable` rules are on by default; `preview` rules only with `--preview` (or `preview = true`). "
        "The figure is the rule's first-sight precision: findings judged on public repositories it was never "
        "tuned on ([docs/accuracy.md](../accuracy.md)).\n\n"
        "Fix: `safe` fixes are applied by `--fix`; `unsafe` ones only with `--fix --unsafe-fixes`; "
        "`sometimes` means some findings of the rule carry no fix.\n\n" + rules_table_markdown(statuses=statuses)
    )


CATALOG_PATH = "torchlint/rules/catalog.py"


def _status_source(st: RuleStatus) -> str:
    return (
        f"RuleStatus(Stability.{st.stability.name}, judged={st.judged}, tp={st.tp}, "
        f"fixes_wrong={st.fixes_wrong}, rounds={st.rounds!r})"
    )


def render_catalog(statuses: Statuses = None) -> str:
    """torchlint/rules/catalog.py: what configuration, reporters and the cache
    need to know about every rule (code, name, severity, status), readable
    without importing the rules."""
    rules = documented_rules()
    names = "".join(f'    "{r.CODE}": "{r.NAME}",\n' for r in rules)
    severities = "".join(f'    "{r.CODE}": "{r.SEVERITY}",\n' for r in rules)
    status_rows = "".join(f'    "{r.CODE}": {_status_source(status(r, statuses))},\n' for r in rules)
    return (
        '"""Every rule\'s code, name, severity and status, readable without importing the rules.\n\n'
        "Generated from the rule classes and the judged first-sight rounds (docs/accuracy/rounds)\n"
        "by `python scripts/gen_rule_docs.py`; do not edit. tests/test_rule_docs.py checks that it is current.\n"
        '"""\n\n'
        "from torchlint.rules.stability import RuleStatus, Stability\n\n"
        f"CATALOG = {{\n{names}}}\n\n"
        f"SEVERITIES = {{\n{severities}}}\n\n"
        f"STATUS = {{\n{status_rows}}}\n"
    )


def generated_docs(statuses: Statuses = None) -> Dict[str, str]:
    """Every generated file: relative path under docs/rules -> contents."""
    files = {"README.md": render_index(statuses)}
    for r in documented_rules():
        files[f"{r.NAME}.md"] = render_rule_markdown(r, statuses)
    return files
