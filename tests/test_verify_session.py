"""The one-call GPU session: its parts (torchlint.verify.session) and scripts/gpu_verify.sh,
run here as a dry run (--smoke) on fake fixtures."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.verify import cli, fixture_meta, session

ROOT = Path(__file__).resolve().parents[1]
FAKE = Path(__file__).parent / "data" / "verify_fake"
SCRIPT = ROOT / "scripts" / "gpu_verify.sh"


def test_parts_go_least_certain_first_with_their_repeats():
    parts = session.parts(fixture_meta.discover(fixture_meta.default_fixtures_dir()))
    assert [(p.name, p.repeats) for p in parts] == [("part1-low", 3), ("part2-medium", 2), ("part3-high", 1)]
    assert parts[0].rules == "TL401,TL402,TL501"
    assert parts[1].rules == "TL104,TL106,TL201,TL202,TL301,TL302,TL303,TL403"
    assert parts[2].rules == "TL100,TL101,TL102,TL103,TL105"
    assert [p.repeats for p in session.parts(fixture_meta.discover(fixture_meta.default_fixtures_dir()), 7)] == [
        7,
        7,
        7,
    ]


def test_parts_are_printed_for_the_script(capsys):
    assert session.main(["--fixtures", str(FAKE)]) == 0
    assert capsys.readouterr().out == "part1-medium\tTL910,TL911,TL912\t2\n"


def _fixtures(tmp_path):
    """The fake fixtures, TL912 made the least certain and its scripts made to hang."""
    fixtures = tmp_path / "fixtures"
    shutil.copytree(FAKE, fixtures)
    hang = fixtures / "TL912-busy"
    (hang / "meta.toml").write_text((hang / "meta.toml").read_text() + 'certainty = "low"\n')
    for which in ("bad", "fixed"):
        (hang / f"{which}.py").write_text("import time\ntime.sleep(600)\n")
    # A short estimate (a few seconds a run), so that the part starts with what the deadline leaves it.
    tiny = {"step_s": 0.001, "setup_s": 0.0}
    (hang / "cost.json").write_text(json.dumps({"rule": "TL912", "scripts": {"bad": tiny, "fixed": tiny}}))
    return fixtures


def _session(out, fixtures, limit):
    env = dict(os.environ, GPU_VERIFY_LIMIT_S=str(limit), PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    env.pop("TORCHLINT_SMOKE", None)
    return subprocess.run(
        ["bash", str(SCRIPT), "--smoke", str(out), "--fixtures", str(fixtures)],
        cwd=str(ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=limit + 120,
    )


@pytest.mark.slow
def test_a_dry_run_of_the_session_ends_with_the_merged_table(tmp_path):
    out = tmp_path / "out"
    proc = _session(out, FAKE, 300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # the fake scripts claim cuda: dry-run FAILs
    names = sorted(p.name for p in out.iterdir())
    for name in ("environment.txt", "doctor.txt", "parts.tsv", "part1-medium.json", "verify.json", "verify.md"):
        assert name in names, names
    merged = json.loads((out / "verify.json").read_text())
    assert merged["mode"] == "dry-run" and merged["complete"] is True
    assert [r["rule"] for r in merged["rules"]] == ["TL910", "TL911", "TL912"]
    assert all(r["repeats"] == 1 for r in merged["rules"])  # --smoke: one repeat
    assert "| Rule | Metric | Bad | Fixed | Change | Threshold | Verdict | Repeats |" in proc.stdout
    assert "results in" in proc.stdout and "verify.md" in proc.stdout.split("results in")[1]
    assert "import torch._dynamo" in (out / "environment.txt").read_text()
    assert "torchlint run --device cuda (TL401 TL403 TL302): skipped (smoke" in proc.stdout
    assert not any(name.startswith("run-cuda-") for name in names)


@pytest.mark.slow
def test_without_a_gpu_the_cuda_runs_are_recorded_as_failed_and_the_session_still_ends(tmp_path):
    """Not --smoke, on a machine without CUDA: the parts exit 2 (no usable GPU), each
    `torchlint run --device cuda` exits 2 with its one line in its log, and the merge still runs."""
    from torchlint.runtime.cuda import unavailable

    if unavailable() is None:
        pytest.skip("this machine has a CUDA device: the no-GPU path of gpu_verify.sh cannot be seen here")
    out = tmp_path / "out"
    env = dict(os.environ, GPU_VERIFY_LIMIT_S="200", PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    env.pop("TORCHLINT_SMOKE", None)
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(out)], cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=320
    )
    log = proc.stdout + proc.stderr
    for rule in ("TL401", "TL403", "TL302"):
        assert f"run-cuda-{rule}: exit 2: no CUDA device" in log, log
        assert (out / f"run-cuda-{rule}.log").read_text().startswith("torchlint: error: no CUDA device: ")
    assert "merge: exit" in log and (out / "verify.json").exists()


@pytest.mark.slow
def test_the_shared_deadline_cuts_the_least_certain_part_and_leaves_the_rest_not_run(tmp_path):
    """Part 1 (TL912, least certain) hangs: its --time-budget ends its run; no time is left
    for part 2, which is not started; the merge lists its rules NOT-RUN, with why."""
    out = tmp_path / "out"
    proc = _session(out, _fixtures(tmp_path), 90)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 3, log
    assert "part2-medium (--rules TL910,TL911): not started" in log
    merged = json.loads((out / "verify.json").read_text())
    verdicts = {r["rule"]: (r["verdict"], r["reason"]) for r in merged["rules"]}
    assert verdicts["TL910"] == ("not-run", cli.NOT_REPORTED) and verdicts["TL911"][1] == cli.NOT_REPORTED
    assert verdicts["TL912"][0] == "not-run" and "--time-budget" in verdicts["TL912"][1]
    assert merged["complete"] is False and merged["rules_not_run"] == ["TL910", "TL911", "TL912"]
    assert "**Partial report**: not run: TL910, TL911, TL912" in proc.stdout
    assert not (out / "part2-medium.json").exists()


def _by_rule(fixtures, code):
    return next(fx for fx in fixtures if fx.rule == code)


def test_a_fixture_with_a_session_of_its_own_is_in_no_part_but_verify_still_runs_it():
    fixtures = fixture_meta.discover(fixture_meta.default_fixtures_dir())
    tl404 = _by_rule(fixtures, "TL404")
    assert "compile time" in tl404.own_session
    assert all("TL404" not in p.rules for p in session.parts(fixtures))
    assert [fx.rule for fx in fixture_meta.discover(fixture_meta.default_fixtures_dir(), ["TL404"])] == ["TL404"]


def test_fixtures_needing_more_gpus_are_in_no_part_and_skipped_with_why(tmp_path):
    fixtures = fixture_meta.discover(fixture_meta.default_fixtures_dir())
    tl601 = [fx for fx in fixtures if fx.rule == "TL601"]
    assert tl601 and tl601[0].min_gpus == 2
    assert all("TL601" not in p.rules for p in session.parts(fixtures))
    assert "TL601" in session.parts(fixtures, gpus=2)[1].rules
    assert [(fx.rule, why) for fx, why in session.unmeasured(fixtures)] == [
        (
            "TL304",
            "in a session of its own (torchlint verify --rules TL304): " + _by_rule(fixtures, "TL304").own_session,
        ),
        (
            "TL404",
            "in a session of its own (torchlint verify --rules TL404): " + _by_rule(fixtures, "TL404").own_session,
        ),
        ("TL601", "not measured on 1 GPU(s): the fixture needs 2 (meta.toml min_gpus)"),
    ]
    assert fixture_meta.too_few_gpus(tl601[0], 2) is None
    # a GPU run on a one-GPU machine reports it skipped, with the reason, and runs nothing
    import json

    from torchlint.verify import cli

    out = tmp_path / "report.json"
    code = cli._measure(tl601, 1, {"device_count": 1}, out, None, None, None, 60.0, None, tmp_path)
    result = json.loads(out.read_text())["rules"][0]
    assert code == cli.EXIT_OK
    assert result["verdict"] == "skipped" and "needs 2" in result["reason"] and not result.get("runs")


def test_min_gpus_must_be_a_count(tmp_path):
    import shutil

    import pytest

    folder = tmp_path / "TL601-data-parallel"
    shutil.copytree(fixture_meta.default_fixtures_dir() / "TL601-data-parallel", folder)
    meta = folder / "meta.toml"
    meta.write_text(meta.read_text().replace("min_gpus = 2", "min_gpus = 0"))
    with pytest.raises(fixture_meta.FixtureError, match="min_gpus"):
        fixture_meta.load_fixture(folder)
