"""Rule status (stable or preview) follows the first-sight measurement, and
every place that shows it agrees: the catalog, `torchlint rules`, each rule's
page and the README's rule table. Preview mode works as in Ruff."""

import json
import re

from click.testing import CliRunner

from bench import rounds
from torchlint.config import Settings, load_settings
from torchlint.doors import rule_docs as ruledocs
from torchlint.doors.cli import main
from torchlint.rules import all_codes, preview_codes
from torchlint.rules.catalog import STATUS
from torchlint.rules.stability import ALWAYS_REPORTED, MIN_JUDGED, MIN_PRECISION, Stability, decide

from helpers import ROOT, TL104_SRC, api


def test_recorded_statuses_follow_the_judged_rounds():
    """torchlint/rules/catalog.py's STATUS is what docs/accuracy/rounds decides."""
    measured = rounds.rule_statuses(rounds.load_rounds(), all_codes())
    assert STATUS == measured, "run `python scripts/gen_rule_docs.py` after recording a round"


def test_the_policy():
    assert decide(10, 9, 0, (2,)).stability is Stability.STABLE
    assert decide(9, 9, 0, (2,)).stability is Stability.PREVIEW  # too few judged
    assert decide(20, 17, 0, (2, 3)).stability is Stability.PREVIEW  # 0.85 < 0.90
    assert decide(10, 10, 1, (2,)).stability is Stability.PREVIEW  # a wrong fix
    assert MIN_JUDGED == 10 and MIN_PRECISION == 0.90


def test_torchlint_rules_shows_the_recorded_status():
    out = CliRunner().invoke(main, ["rules", "--output-format", "json"])
    assert out.exit_code == 0
    for entry in json.loads(out.output):
        status = STATUS[entry["code"]]
        assert entry["preview"] is status.is_preview, entry["code"]
        assert entry["first_sight_precision"] == status.precision
    text = CliRunner().invoke(main, ["rules"]).output
    for code in all_codes():
        row = next(line for line in text.splitlines() if line.startswith(code))
        assert ruledocs.status_column(code).split()[0] in row


def test_each_rule_page_shows_the_recorded_status():
    for code in all_codes():
        name = ruledocs.rule_by_code(code).NAME
        page = (ROOT / "docs" / "rules" / f"{name}.md").read_text(encoding="utf-8")
        assert ruledocs.status_line(code) in page, code


def test_the_readme_rule_table_shows_the_recorded_status():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (TL\d{3}) \| [a-z0-9-]+ \| ([^|]+) \|", readme, re.M))
    assert set(rows) == set(all_codes())
    for code, cell in rows.items():
        assert cell.strip() == ruledocs.status_column(code), code


# -- preview mode ---------------------------------------------------------------------------------


def test_default_runs_only_stable_rules(monkeypatch):
    monkeypatch.delenv("TORCHLINT_PREVIEW", raising=False)
    enabled = Settings().enabled()
    assert enabled.isdisjoint(preview_codes())
    assert ALWAYS_REPORTED <= enabled
    assert Settings(preview=True).enabled() >= preview_codes()


def test_preview_from_the_command_line_the_configuration_and_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHLINT_PREVIEW", raising=False)
    code = sorted(preview_codes())[0]
    assert code not in load_settings(start=str(tmp_path)).enabled()
    assert code in load_settings(start=str(tmp_path), preview=True).enabled()
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\npreview = true\n")
    assert code in load_settings(start=str(tmp_path)).enabled()
    assert code not in load_settings(start=str(tmp_path), preview=False).enabled()  # --no-preview wins


def test_selecting_a_preview_rule_by_code_needs_preview(tmp_path, monkeypatch):
    """As in Ruff: without preview, naming a preview rule has no effect, and says so."""
    monkeypatch.delenv("TORCHLINT_PREVIEW", raising=False)
    code = sorted(preview_codes())[0]
    (tmp_path / "a.py").write_text("import torch\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", "--select", code, str(tmp_path / "a.py")])
    assert f"selection `{code}` has no effect because preview is not enabled" in result.output
    result = CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--select", code, str(tmp_path / "a.py")])
    assert "has no effect" not in result.output


def test_the_environment_variable_turns_preview_on(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_text(TL104_SRC)
    monkeypatch.setenv("TORCHLINT_PREVIEW", "1")
    on = CliRunner().invoke(main, ["check", "--no-cache", "--select", "TL", str(path)])
    monkeypatch.setenv("TORCHLINT_PREVIEW", "0")
    off = CliRunner().invoke(main, ["check", "--no-cache", "--select", "TL", str(path)])
    found_on = set(re.findall(r"TL\d{3}", on.output))
    found_off = set(re.findall(r"TL\d{3}", off.output))
    assert found_off == found_on - preview_codes()
    assert api.lint_source(TL104_SRC, "a.py")  # the tests' helpers run every rule
