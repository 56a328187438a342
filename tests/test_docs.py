"""The user-facing docs cover what the command line offers, and the README's
Quick start reads in the order a new user follows it."""

import re
from pathlib import Path

import click

from torchlint.doors.cli import FORMATS, check_command, main
from torchlint.report import FORMATS as REPORT_FORMATS

ROOT = Path(__file__).resolve().parents[1]
LINTER = (ROOT / "docs" / "linter.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_check_option_is_documented_in_linter_md():
    missing = []
    for param in check_command.params:
        if isinstance(param, click.Option):
            names = [n for n in param.opts + param.secondary_opts if n.startswith("--")]
            missing += [n for n in names if not re.search(rf"`[^`\n]*{re.escape(n)}\b", LINTER)]
    assert missing == []


def test_every_output_format_is_documented():
    assert set(FORMATS) == set(REPORT_FORMATS)
    section = LINTER.split("## Output formats", 1)[1]
    assert [f for f in FORMATS if f"- `{f}`" not in section] == []
    output = README.split("## Output formats", 1)[1].split("\n## ", 1)[0]
    assert [f for f in FORMATS if f"`{f}`" not in output] == []


def test_every_command_is_documented():
    assert [c for c in main.commands if f"torchlint {c}" not in LINTER + README] == []
    assert "torchlint rule --all" in LINTER


def test_quick_start_gives_the_torch_advice_before_the_commands():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    fence = section.index("```")
    assert "CPU build of torch installed first" in section[:fence], "the advice must come before the command"
    assert "https://download.pytorch.org/whl/cpu" in README.split("## Quick start", 1)[0]
    block = section[fence:].split("```")[1]
    commands = [ln for ln in block.splitlines()[1:] if ln.strip() and not ln.startswith("#")]
    assert len(commands) == 2 and "torchlint --preview examples/" in commands[0] and "pytest" in commands[1]


def test_readme_pre_commit_snippets_name_no_missing_tag():
    # There are no release tags: a `rev: v...` would fail with "pathspec ... did not match".
    for doc in (README, (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")):
        assert not re.search(r"rev:\s*v\d", doc)


def test_the_readme_plan_figure_is_the_plans_total():
    """Issue 40: the README said 7.4 min where `torchlint verify --plan` says
    7.5: the figure is the plan's own total, as it prints it."""
    from torchlint.verify import fixture_meta
    from torchlint.verify import plan as plan_mod

    text, _ = plan_mod.render(fixture_meta.discover(fixture_meta.default_fixtures_dir(), []))
    total = re.search(r"^Total: \d+ runs, ([\d.]+ min)", text, re.M).group(1)
    line = next(ln for ln in README.splitlines() if "torchlint verify --plan" in ln and "$" in ln)
    assert f"(about {total})" in line, (total, line)
