"""`torchlint verify --mechanism`: the verdict logic on made-up run reports,
the command through click's runner (the script runs replaced by made-up
ones), and, slow, every real fixture pair under `torchlint run`."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.runtime.compare import UNOBSERVABLE
from torchlint.verify import cli, fixture_meta
from torchlint.verify import mechanism as M

REPO_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PER_STEP = ["TL106", "TL201", "TL202", "TL301", "TL401", "TL403"]


def observation(code, reported=True, per_step=True, crash=False, count=6, where="bad.py:37"):
    return {
        "code": code,
        "where": where,
        "count": count,
        "steps_seen": count if per_step else 1,
        "steps": 6,
        "clock": "optimizer steps",
        "per_step": per_step,
        "reported": reported,
        "crash": crash,
        "message": "...",
    }


def ran(rule, script, *observations, status="ok", error=None):
    report = {
        "per_step_codes": PER_STEP,
        "status": status,
        "exit_code": 0 if status == "ok" else 1,
        "steps": 6,
        "clock": "optimizer steps",
        "seconds": 1.0,
        "device_used": True,
        "error": error,
        "observations": list(observations),
    }
    return M.ScriptRun(rule, script, 0, report)


# -- the verdicts ------------------------------------------------------------------------------------


def test_bad_shows_it_and_fixed_does_not_is_observed():
    verdict, reason = M.judge("TL401", ran("TL401", "bad", observation("TL401")), ran("TL401", "fixed"))
    assert verdict == M.OBSERVED
    assert reason == "bad.py shows TL401 at bad.py:37, 6 times in 6 of 6 optimizer steps; fixed.py does not"


def test_an_unreported_observation_in_fixed_is_not_a_finding():
    once = observation("TL401", reported=False, per_step=False, count=1, where="fixed.py:40")
    verdict, _ = M.judge("TL401", ran("TL401", "bad", observation("TL401")), ran("TL401", "fixed", once))
    assert verdict == M.OBSERVED


def test_bad_without_the_code_is_not_observed_and_says_what_it_showed():
    bad = ran("TL101", "bad", observation("TL100", per_step=False, count=1))
    verdict, reason = M.judge("TL101", bad, ran("TL101", "fixed"))
    assert (verdict, reason) == (M.NOT_OBSERVED, "bad.py does not show TL101 (it reports TL100)")
    assert M.judge("TL101", ran("TL101", "bad"), ran("TL101", "fixed"))[1].endswith("(it reports nothing)")


def test_a_per_step_rule_seen_once_is_not_observed():
    once = observation("TL401", reported=False, per_step=False, count=1)
    verdict, reason = M.judge("TL401", ran("TL401", "bad", once), ran("TL401", "fixed"))
    assert verdict == M.NOT_OBSERVED
    assert "TL401 seen at bad.py:37, once in 1 of 6 optimizer steps, not reported" in reason
    # Reported but not per step (as a report from elsewhere could say): still not shown for a per-step rule.
    assert not M.shows(ran("TL401", "bad", observation("TL401", per_step=False)), "TL401")
    # A crash (a device mismatch) is shown whenever it happens; a rule that is not per-step is shown once.
    assert M.shows(ran("TL403", "bad", observation("TL403", per_step=False, crash=True)), "TL403")
    assert M.shows(ran("TL501", "bad", observation("TL501", per_step=False, count=1)), "TL501")


def test_fixed_still_showing_it():
    fixed = ran("TL501", "fixed", observation("TL501", per_step=False, count=1, where="fixed.py:36"))
    verdict, reason = M.judge("TL501", ran("TL501", "bad", observation("TL501", per_step=False, count=1)), fixed)
    assert verdict == M.FIXED_STILL_OBSERVED
    assert reason == "fixed.py still shows TL501: at fixed.py:36, once in 1 of 6 optimizer steps"


def test_a_script_that_did_not_end_well_is_an_error():
    failed = ran("TL601", "fixed", status="failed", error={"type": "RuntimeError", "message": "no NCCL"})
    verdict, reason = M.judge("TL601", ran("TL601", "bad", observation("TL601")), failed)
    assert (verdict, reason) == (M.ERROR, "fixed.py failed: RuntimeError: no NCCL")
    lost = M.ScriptRun("TL601", "bad", -1, None, "timed out after 300 s")
    assert M.judge("TL601", lost, ran("TL601", "fixed")) == (M.ERROR, "bad.py timed out after 300 s")
    assert M.judge("TL601", M.ScriptRun("TL601", "bad", 1), ran("TL601", "fixed"))[1] == "bad.py exit 1: no report"


def test_passed_needs_every_observable_rule_observed():
    assert M.passed([{"verdict": M.OBSERVED}, {"verdict": M.NOT_OBSERVABLE}])
    assert M.passed([{"verdict": M.NOT_OBSERVABLE}])
    for verdict in (M.NOT_OBSERVED, M.FIXED_STILL_OBSERVED, M.ERROR):
        assert not M.passed([{"verdict": M.OBSERVED}, {"verdict": verdict}])


def test_the_rules_a_run_cannot_observe_are_the_comparisons_not_checked():
    assert {r for r in ("TL000", "TL001", "TL105", "TL402", "TL401") if not M.observable(r)} == set(UNOBSERVABLE)


# -- the command ----------------------------------------------------------------------------------------


def invoke(*args):
    return CliRunner().invoke(cli.verify_command, list(args), catch_exceptions=False)


@pytest.fixture
def made_up_runs(monkeypatch):
    """Script runs replaced: bad shows the rule, fixed does not, except for the rules in `still`."""
    calls = []
    still = set()

    def run_script(fx, which, timeout):
        calls.append((fx.rule, which))
        shown = which == "bad" or fx.rule in still
        return ran(fx.rule, which, *([observation(fx.rule)] if shown else []))

    monkeypatch.setattr(M, "run_script", run_script)
    return calls, still


@pytest.mark.parametrize(
    "flag",
    [["--smoke"], ["--dry-run"], ["--plan"], ["--require-gpu"], ["--repeats", "2"], ["--time-budget", "60"]],
)
def test_mechanism_with_a_gpu_option_is_a_usage_error(flag, made_up_runs):
    result = invoke("--mechanism", *flag)
    assert result.exit_code == 2
    assert f"--mechanism runs no GPU measurement: it does not take {flag[0]}" in result.output
    assert made_up_runs[0] == []


def test_mechanism_with_an_unknown_rule_is_a_usage_error(made_up_runs):
    result = invoke("--mechanism", "--rule", "TL999")
    assert result.exit_code == 2 and "TL999" in result.output


def test_mechanism_runs_only_the_rules_asked_for_and_writes_the_reports(made_up_runs, tmp_path):
    calls, _ = made_up_runs
    out, md = tmp_path / "m.json", tmp_path / "m.md"
    result = invoke(
        "--mechanism", "--rule", "TL401", "--rules", "TL105,TL303", "--output", str(out), "--markdown", str(md)
    )
    assert result.exit_code == 0, result.output
    assert sorted(calls) == [("TL303", "bad"), ("TL303", "fixed"), ("TL401", "bad"), ("TL401", "fixed")]
    rep = json.loads(out.read_text())
    assert (rep["mode"], rep["environment"]["device"], rep["complete"]) == ("mechanism", M.DEVICE, True)
    assert rep["summary"] == {"not-observable": 1, "observed": 2}
    assert rep["requested_rules"] == ["TL105", "TL303", "TL401"]
    by_rule = {r["rule"]: r for r in rep["rules"]}
    assert by_rule["TL105"]["bad"] is None and "does not observe TL105" in by_rule["TL105"]["reason"]
    tl401 = by_rule["TL401"]
    assert tl401["fixture"] == "fixtures/TL401-sync-in-loop" and tl401["verdict"] == "observed"
    assert tl401["bad"]["shows"] is True and tl401["fixed"]["shows"] is False
    assert tl401["bad"]["findings"][0]["code"] == "TL401" and tl401["fixed"]["findings"] == []
    text = result.output
    assert text.splitlines()[0].split() == ["Rule", "Bad", "Fixed", "Verdict"]
    assert "TL401  6x, 6/6 optimizer steps  none" in text and "NOT-OBSERVABLE" in text
    assert "mechanism: 2 of 2 observable rules observed (TL105: not observable by a run)" in text
    markdown = md.read_text()
    assert markdown.startswith("# torchlint verify --mechanism")
    assert "| TL401 | 6x, 6/6 optimizer steps | none | OBSERVED |" in markdown


def test_mechanism_fails_when_a_fixed_script_still_shows_its_rule(made_up_runs):
    made_up_runs[1].add("TL501")
    result = invoke("--mechanism", "--rules", "TL401,TL501")
    assert result.exit_code == 1
    assert "TL501  6x, 6/6 optimizer steps  6x, 6/6 optimizer steps  FIXED-STILL-OBSERVED" in result.output
    assert "  TL501 fixed-still-observed: fixed.py still shows TL501: at bad.py:37" in result.output


def test_mechanism_of_unobservable_rules_only_runs_nothing_and_passes(made_up_runs):
    result = invoke("--mechanism", "--rules", "TL105,TL402")
    assert result.exit_code == 0 and made_up_runs[0] == []
    assert "mechanism: 0 of 0 observable rules observed (TL105, TL402: not observable by a run)" in result.output


# -- every fixture pair, for real ----------------------------------------------------------------------

FIXTURES = fixture_meta.discover(REPO_FIXTURES, [])


def test_the_fixtures_include_unobservable_rules():
    # TL105 and TL402 have fixtures that a run cannot judge: their verdict is not-observable, not a pass.
    assert {fx.rule for fx in FIXTURES if not M.observable(fx.rule)} == {"TL105", "TL402"}


@pytest.mark.slow
@pytest.mark.parametrize("fx", FIXTURES, ids=[fx.rule for fx in FIXTURES])
def test_fixture_pair_mechanism(fx):
    """bad.py shows the rule's finding under `torchlint run`, fixed.py does not."""
    (result,) = M.check([fx], jobs=2)
    if not M.observable(fx.rule):
        assert result["verdict"] == M.NOT_OBSERVABLE
        return
    assert result["verdict"] == M.OBSERVED, result["reason"]
    assert result["bad"]["shows"] and result["fixed"]["shows"] is False
