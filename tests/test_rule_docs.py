"""The rule docs under docs/rules/ are generated from the rule classes and must be current."""

import json
import os
import subprocess
import sys

import pytest

from torchlint.doors import rule_docs as ruledocs
from torchlint.rules import all_rules

DOCUMENTED = ruledocs.documented_rules()


def test_generated_docs_are_current(root):
    """Fails when a rule changed without `python scripts/gen_rule_docs.py`."""
    docs = root / ruledocs.DOCS_DIR
    want = ruledocs.generated_docs()
    stale = [
        n
        for n, text in sorted(want.items())
        if not (docs / n).is_file() or (docs / n).read_text(encoding="utf-8") != text
    ]
    extra = sorted(p.name for p in docs.glob("*.md") if p.name not in want)
    assert not stale and not extra, f"stale rule docs {stale}, extra {extra}: run `python scripts/gen_rule_docs.py`"


def test_generated_catalog_is_current(root):
    """torchlint/rules/catalog.py (read without importing the rules) says what the
    rule classes say; fails when a rule changed without `python scripts/gen_rule_docs.py`."""
    assert (root / ruledocs.CATALOG_PATH).read_text(encoding="utf-8") == ruledocs.render_catalog(), (
        "stale rule catalog: run `python scripts/gen_rule_docs.py`"
    )
    from torchlint.rules import CATALOG, severity

    assert CATALOG == {r.CODE: r.NAME for r in all_rules()}
    assert [c for c in CATALOG if severity(c) == "error"] == ["TL000", "TL001"]


def test_every_rule_has_a_page_and_an_index_row():
    files = ruledocs.generated_docs()
    index = files["README.md"]
    for r in DOCUMENTED:
        assert f"{r.NAME}.md" in files
        assert f"[{r.CODE}]({r.NAME}.md)" in index
    assert "TL000" in index and "syntax-error.md" in files


@pytest.mark.parametrize("rule", DOCUMENTED, ids=[r.CODE for r in DOCUMENTED])
def test_docstring_has_the_required_sections(rule):
    assert ruledocs.doc_problems(rule) == []
    titles = [t for t, _ in ruledocs.doc_sections(rule)]
    for t in ruledocs.REQUIRED_SECTIONS:
        assert t in titles


@pytest.mark.parametrize("rule", DOCUMENTED, ids=[r.CODE for r in DOCUMENTED])
def test_page_shape(rule):
    page = ruledocs.render_rule_markdown(rule)
    assert page.startswith(f"# {rule.NAME} ({rule.CODE})\n")
    for title, _ in ruledocs.doc_sections(rule):
        assert f"\n## {title}\n" in page
    if rule.APPLICABILITY is None:
        assert "Fix is" not in page
    else:
        assert ruledocs.fix_line(rule) in page


def test_fix_availability_wording():
    from torchlint.findings import Applicability
    from torchlint.rules.base import Invalid, Rule

    class Always(Rule):
        CODE, NAME, APPLICABILITY = "TL999", "always-fixed", Applicability.SAFE
        INVALID = (Invalid("a", fixed="b"),)

    # Every invalid example has a fix, all safe.
    assert ruledocs.fix_line(Always) == "Fix is always available (safe)."
    # TL105: an attribute or a name later read on the host gets no fix.
    assert ruledocs.fix_line("TL105") == "Fix is sometimes available (safe)."
    # TL104: some findings (through a name or a helper, random factories, one-offs) carry no fix.
    # safe: device= on a factory; unsafe: a per-step random draw in an unseeded program
    assert ruledocs.fix_line("TL104") == "Fix is sometimes available (safe or unsafe)."
    # TL303: loaders without `import torch` get no fix; the others a safe one.
    assert ruledocs.fix_line("TL303") == "Fix is sometimes available (safe)."
    # TL501: one example has no fix, one is unsafe.
    assert ruledocs.fix_line("TL501") == "Fix is sometimes available (safe or unsafe)."
    assert ruledocs.fix_line("TL000") is None


def test_doc_problems_catches_bad_docstrings():
    from torchlint.findings import Applicability
    from torchlint.rules.base import Rule

    class Bad(Rule):
        """
        Leading text.

        ## Why is this bad?
        Because.

        ## What it does
        Things.

        ## Bogus
        x
        """

        CODE, NAME, MESSAGE = "TL999", "bad", "bad"
        APPLICABILITY = Applicability.SAFE

    problems = " | ".join(ruledocs.doc_problems(Bad))
    for needle in (
        "missing section '## Example'",
        "missing section '## Fix safety'",
        "unknown section '## Bogus'",
        "out of order",
        "text before",
    ):
        assert needle in problems


def test_section_parser_ignores_headers_inside_code_fences():
    from torchlint.rules.base import Rule

    class Fenced(Rule):
        """
        ## What it does
        ```python
        ## not a section
        ```
        """

        CODE, NAME, MESSAGE = "TL998", "fenced", "m"

    assert [t for t, _ in ruledocs.doc_sections(Fenced)] == ["What it does"]


def test_json_forms():
    entry = ruledocs.render_rule_json("TL104")
    assert entry["code"] == "TL104" and entry["name"] == "create-then-move"
    assert entry["fix_availability"] == "sometimes" and entry["fix_applicability"] == ["safe", "unsafe"]
    assert entry["url"].endswith("/docs/rules/create-then-move.md")
    assert "## What it does" in entry["explanation"]
    table = ruledocs.rules_table_json()
    assert [e["code"] for e in table] == [r.CODE for r in all_rules()]
    assert table[0]["code"] == "TL000"
    json.dumps(table)  # serialisable
    assert ruledocs.render_rule_json("create-then-move") == entry
    with pytest.raises(KeyError):
        ruledocs.render_rule_json("TL777")


def test_text_table_lists_every_rule():
    text = ruledocs.rules_table_text()
    for r in DOCUMENTED:
        assert r.CODE in text and r.NAME in text


@pytest.mark.slow
def test_script_check_mode(root, tmp_path):
    out = tmp_path / "rules"
    catalog = tmp_path / "catalog.py"

    def gen(*args):
        cmd = [
            sys.executable,
            str(root / "scripts" / "gen_rule_docs.py"),
            *args,
            "--docs",
            str(out),
            "--catalog",
            str(catalog),
        ]
        return subprocess.run(cmd, capture_output=True, text=True)

    assert gen("--check").returncode == 1
    assert gen().returncode == 0
    assert gen("--check").returncode == 0
    assert catalog.read_text() == (root / ruledocs.CATALOG_PATH).read_text()
    page = out / "create-then-move.md"
    page.write_text(page.read_text() + "edited\n")
    proc = gen("--check")
    assert proc.returncode == 1 and "create-then-move.md" in proc.stderr
    catalog.write_text("CATALOG = {}\n")
    proc = gen("--check")
    assert proc.returncode == 1 and "catalog.py" in proc.stderr


# Rules about a file's contents: every rule but TL001 (a file that cannot be
# read has no contents; its page is checked by test_io_error_page below).
CONTENT_RULES = [r for r in DOCUMENTED if r.CODE != "TL001"]


@pytest.mark.parametrize("rule", CONTENT_RULES, ids=[r.CODE for r in CONTENT_RULES])
def test_example_triggers_its_rule_and_use_instead_does_not(rule):
    """Issue 27: the Example blocks of six pages gave "All checks passed!"
    when pasted into a file. Each page's Example, linted as a file with every
    rule enabled, must report the rule; its "Use instead" must not."""
    from helpers import lint_source

    example = ruledocs.section_code(rule, "Example")
    better = ruledocs.section_code(rule, "Use instead")
    assert example is not None and better is not None, "Example and Use instead need a ```python block"
    found = [f.code for f in lint_source(example, ruledocs.EXAMPLE_PATH)]
    assert rule.CODE in found, f"the Example of {rule.CODE} does not trigger it (found: {found})"
    still = [f.code for f in lint_source(better, ruledocs.EXAMPLE_PATH)]
    assert rule.CODE not in still, f"the Use instead of {rule.CODE} still triggers it"
    if rule.REQUIRES_DEVICE:  # these fire only where a device is in play: the example shows one
        assert "device" in example


@pytest.mark.parametrize("rule", DOCUMENTED, ids=[r.CODE for r in DOCUMENTED])
def test_page_shows_what_torchlint_prints_for_its_example(rule):
    """The output on each page is generated by running torchlint on the
    example (TL201's page showed a message the tool does not print)."""
    output = ruledocs.example_output(rule)
    flag = "--preview " if ruledocs.status(rule).is_preview else ""
    assert output is not None and output.startswith(f"$ torchlint check {flag}example.py\n")
    page = ruledocs.render_rule_markdown(rule)
    assert "```console\n" + output in page
    messages = [line for line in output.splitlines() if line.startswith("example.py:")]
    assert any(f" {rule.CODE} " in line for line in messages), messages
    assert "Found " in output


def test_io_error_page_shows_what_the_runner_reports(tmp_path, monkeypatch):
    """TL001's example is a file that cannot be read: the page's output is the
    runner's own finding for one (read failing with EACCES)."""
    import builtins
    import errno

    from torchlint.files import runner

    target = tmp_path / "example.py"
    target.write_text("x = 1\n")
    real_open = builtins.open

    def deny(path, *args, **kwargs):
        if str(path) == str(target):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", deny)
    outcome = runner.process_file(runner.FileJob(str(target), frozenset(), "lint"))
    (finding,) = outcome.findings
    assert (finding.code, finding.message) == ("TL001", "Cannot read the file: Permission denied")
    assert f"example.py:1:1: TL001 {finding.message}" in ruledocs.example_output("TL001")
