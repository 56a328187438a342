"""Runner plumbing, the harness's windows, and the CUDA/hardware probes' logic (CPU only)."""

import json
import types
import warnings
from pathlib import Path

import pytest

from torchlint.verify import busy, fixture_meta, harness, passes, probe, rule_results, runner, script_runs, verdict
from torchlint.verify.harness import MARK, Harness

DATA = Path(__file__).parent / "data"
FAKE = DATA / "verify_fake"


def fake_fixture(metric="wall_s", skip=(), checks=(), direction="down", rule="TL1", path="/nowhere"):
    return fixture_meta.Fixture(
        rule, "x", "s", metric, direction, 0.1, False, Path(path), tuple(skip), "", tuple(checks)
    )


# --- plan ------------------------------------------------------------------------------------


def test_plan_alternates_bad_and_fixed_and_adds_context_windows_on_the_first_repeat():
    steps = [(p.repeat, p.script, p.passes) for p in runner.plan([fake_fixture("busy_fraction")], 3)]
    assert steps == [
        (0, "bad", ("timing", "profile", "sync")),
        (0, "fixed", ("timing", "profile", "sync")),
        (1, "fixed", ("timing", "profile")),
        (1, "bad", ("timing", "profile")),
        (2, "bad", ("timing", "profile")),
        (2, "fixed", ("timing", "profile")),
    ]


def test_plan_honours_skip_passes_and_timing_metrics():
    steps = [(p.repeat, p.passes) for p in runner.plan([fake_fixture("wall_s", skip=["profile"])], 2)]
    assert steps == [(0, ("timing", "sync"))] * 2 + [(1, ("timing",))] * 2


def test_one_run_per_script_and_repeat():
    """The windows share a process: one interpreter per script and repeat; a rule whose
    bad script crashes runs the pair once (a crash is not a sample)."""
    fixtures = fixture_meta.discover(fixture_meta.default_fixtures_dir())
    crashing = [fx for fx in fixtures if fx.bad_error]
    assert len(runner.plan(fixtures, 5)) == 10 * (len(fixtures) - len(crashing)) + 2 * len(crashing)


def test_a_crashing_bad_script_plans_one_pair_with_every_window():
    fx = fixture_meta.Fixture(
        "TL1", "x", "s", "busy_fraction", "up", 0.1, False, Path("/nowhere"), bad_error="Expected all tensors"
    )
    steps = [(p.repeat, p.script, p.passes) for p in runner.plan([fx], 5)]
    assert steps == [(0, "bad", ("timing", "profile", "sync")), (0, "fixed", ("timing", "profile", "sync"))]


def test_rules_run_least_certain_first_and_the_placement_family_last():
    fixtures = fixture_meta.discover(fixture_meta.default_fixtures_dir())
    order = [fx.rule for fx in fixture_meta.run_order(fixtures)]
    assert order[:3] == ["TL401", "TL402", "TL501"]
    assert order[-5:] == ["TL100", "TL101", "TL102", "TL103", "TL105"]
    assert sorted(order) == [fx.rule for fx in fixtures]
    ranks = [fx.certainty.rank for fx in fixture_meta.run_order(fixtures)]
    assert ranks == sorted(ranks)


def test_the_placement_rules_that_would_crash_are_measured_as_crashes():
    """TL102/TL103/TL105: on a GPU the bad script stops with a device mismatch; no fixture
    moves the model back to the CPU to make it run (that passed by construction)."""
    by_rule = {fx.rule: fx for fx in fixture_meta.discover(fixture_meta.default_fixtures_dir())}
    for code in ("TL102", "TL103", "TL105"):
        assert by_rule[code].bad_error == "Expected all tensors to be on the same device", code
    assert {code for code, fx in by_rule.items() if fx.bad_error} == {"TL102", "TL103", "TL105"}
    for fx in by_rule.values():
        for which in fixture_meta.SCRIPTS:
            assert "h.follow(" not in fx.script(which).read_text(), fx.rule


_SPAWN = (
    "import multiprocessing, runpy, sys; multiprocessing.set_start_method('spawn'); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)
_WORKER_SCRIPTS = [
    p
    for fx in fixture_meta.discover(fixture_meta.default_fixtures_dir())
    for p in (fx.script("bad"), fx.script("fixed"))
    if "num_workers" in p.read_text()
]


@pytest.mark.slow
@pytest.mark.parametrize("script", _WORKER_SCRIPTS, ids=[f"{p.parent.name}/{p.name}" for p in _WORKER_SCRIPTS])
def test_fixtures_with_loader_workers_run_under_spawn(script):
    """Workers started with spawn/forkserver (macOS, Windows, Linux from Python 3.14) import the
    script again: a fixture that starts them outside a __main__ guard breaks there."""
    import subprocess
    import sys

    env = script_runs.child_env(("timing",), smoke=True)
    proc = subprocess.run(
        [sys.executable, "-c", _SPAWN, str(script)],
        cwd=str(script.parent),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert script_runs.parse_metrics(proc.stdout)["passes"]["timing"]["samples"] > 0


def test_some_fixture_starts_loader_workers():
    assert len(_WORKER_SCRIPTS) >= 3, _WORKER_SCRIPTS


# --- fixtures and their meta -----------------------------------------------------------------


def test_repo_fixture_metadata_loads_with_why_and_valid_checks():
    fixtures = fixture_meta.discover(fixture_meta.default_fixtures_dir())
    assert fixtures, "fixtures/ has no pairs"
    for fx in fixtures:
        assert fx.metric in verdict.METRICS and fx.direction in ("up", "down")
        assert len(fx.why) > 80, f"{fx.rule}: meta.toml must say why its metric shows the rule's effect"
        for check in fx.checks:
            fixture_meta.parse_check(check)


def test_no_fixture_decides_on_a_count_the_fix_removes_by_construction():
    """TL104 / TL401: counting the removed call passes by construction; throughput is the honest metric."""
    for fx in fixture_meta.discover(fixture_meta.default_fixtures_dir()):
        assert fx.metric not in ("h2d_copies", "sync_count"), fx.rule


def test_busy_fraction_fixtures_confirm_with_the_timing_window():
    for fx in fixture_meta.discover(fixture_meta.default_fixtures_dir()):
        if fx.metric == "busy_fraction" and not fx.bad_error:
            assert "fixed.samples_per_s > bad.samples_per_s" in fx.checks, fx.rule


def _meta_dir(tmp_path, extra, metric="wall_s"):
    d = tmp_path / "TL1-x"
    d.mkdir(parents=True)
    for f in ("bad.py", "fixed.py"):
        (d / f).write_text("")
    (d / "meta.toml").write_text(
        f'rule = "TL1"\nname = "x"\nsummary = "s"\nmetric = "{metric}"\ndirection = "down"\nthreshold = 0.5\n{extra}'
    )
    return d


def test_skip_passes_cannot_skip_the_metric_pass(tmp_path):
    d = _meta_dir(tmp_path, 'skip_passes = ["sync"]\n', metric="sync_count")
    with pytest.raises(fixture_meta.FixtureError, match="cannot skip pass 'sync'"):
        fixture_meta.load_fixture(d)


def test_certainty_and_bad_error_are_checked(tmp_path):
    with pytest.raises(fixture_meta.FixtureError, match="certainty must be one of low, medium, high"):
        fixture_meta.load_fixture(_meta_dir(tmp_path / "a", 'certainty = "sure"\n'))
    with pytest.raises(fixture_meta.FixtureError, match="cannot have checks"):
        fixture_meta.load_fixture(_meta_dir(tmp_path / "b", 'bad_error = "boom"\nchecks = ["bad.wall_s > 0"]\n'))
    fx = fixture_meta.load_fixture(_meta_dir(tmp_path / "c", ""))
    assert fx.certainty is fixture_meta.Certainty.MEDIUM and fx.bad_error == ""


def test_bad_checks_and_windows_are_fixture_errors(tmp_path):
    with pytest.raises(fixture_meta.FixtureError, match="unknown metric 'joy'"):
        fixture_meta.load_fixture(_meta_dir(tmp_path / "a", 'checks = ["bad.joy > 0"]\n'))
    with pytest.raises(fixture_meta.FixtureError, match="expected"):
        fixture_meta.load_fixture(_meta_dir(tmp_path / "b", 'checks = ["bad.kernels is big"]\n'))
    with pytest.raises(fixture_meta.FixtureError, match="needs a skipped pass"):
        fixture_meta.load_fixture(
            _meta_dir(tmp_path / "c", 'skip_passes = ["profile"]\nchecks = ["bad.kernels > 0"]\n')
        )
    with pytest.raises(fixture_meta.FixtureError, match=r"\[windows\]"):
        fixture_meta.load_fixture(_meta_dir(tmp_path / "d", "[windows]\ntiming_seconds = 1\n"))
    fx = fixture_meta.load_fixture(
        _meta_dir(tmp_path / "e", 'checks = ["fixed.samples_per_s > bad.samples_per_s"]\n[windows]\ntiming_s = 1.5\n')
    )
    assert fx.windows == (("timing_s", 1.5),) and fx.checks == ("fixed.samples_per_s > bad.samples_per_s",)


def test_parse_check():
    assert fixture_meta.parse_check("bad.h2d_pageable > 0") == ("bad", "h2d_pageable", ">", 0.0)
    assert fixture_meta.parse_check(" fixed.samples_per_s>=bad.samples_per_s ") == (
        "fixed",
        "samples_per_s",
        ">=",
        ("bad", "samples_per_s"),
    )


def test_rules_split_on_commas():
    assert fixture_meta.split_rules(["TL104", "TL401, tl402", ""]) == ["TL104", "TL401", "tl402"]
    assert [f.rule for f in fixture_meta.discover(FAKE, ["tl910,TL912"])] == ["TL910", "TL912"]


def test_default_fixtures_are_the_checkout_or_the_installed_package(tmp_path, monkeypatch):
    assert fixture_meta.default_fixtures_dir() == fixture_meta.ROOT / "fixtures"
    monkeypatch.setattr(fixture_meta, "ROOT", tmp_path / "site-packages")
    packaged = tmp_path / "site-packages" / "torchlint" / "verify" / "fixtures"
    monkeypatch.setattr(fixture_meta, "PACKAGED_FIXTURES", packaged)
    with pytest.raises(fixture_meta.FixtureError, match="--fixtures"):
        fixture_meta.default_fixtures_dir()
    (packaged / "TL1-x").mkdir(parents=True)
    (packaged / "TL1-x" / "meta.toml").write_text("")
    assert fixture_meta.default_fixtures_dir() == packaged


# --- runs, windows, derived metrics ------------------------------------------------------------


def test_parse_metrics_takes_the_last_metrics_line():
    out = f'noise\n{MARK}{{"a": 1}}\nmore\n{MARK}{{"a": 2}}\ntrailing\n'
    assert script_runs.parse_metrics(out) == {"a": 2}
    assert script_runs.parse_metrics("nothing here\n") is None
    assert script_runs.parse_metrics(MARK + "{not json\n") is None


def run(script, passes=("timing",), repeat=0, device="cuda", **windows):
    """A Run whose windows hold `windows[pass]` (samples=10 in each unless given)."""
    metrics = {"device": device, "passes": {}}
    for p in passes:
        w = {"samples": 10, "steps": 5}
        w.update(windows.get(p, {}))
        metrics["passes"][p] = w
    return script_runs.Run("TL1", script, tuple(passes), repeat, 0, metrics)


def test_a_run_reads_each_metric_from_its_own_window():
    r = run(
        "bad",
        ("timing", "profile"),
        timing={"samples_per_s": 100.0, "wall_s": 1.0},
        profile={"samples_per_s": 50.0, "busy_fraction": 0.4, "gpu_busy_s_per_sample": 0.002},
    )
    assert r.value("samples_per_s") == 100.0  # the timing window's, not the profiled one
    assert r.value("busy_fraction") == 0.4
    assert r.value("profiler_slowdown") == 2.0
    assert r.value("busy_fraction_timed") == pytest.approx(0.2)
    assert r.value("sync_count") is None


def test_busy_fraction_timed_is_capped_at_one():
    r = run("bad", ("timing", "profile"), timing={"samples_per_s": 1000.0}, profile={"gpu_busy_s_per_sample": 0.01})
    assert r.value("busy_fraction_timed") == 1.0


def test_a_failed_context_window_is_an_error_but_keeps_the_others():
    r = run("bad", ("timing", "profile"), timing={"samples_per_s": 1.0})
    r.metrics["passes"]["profile"] = {"error": "RuntimeError: CUPTI"}
    script_runs._finish(r, 0, MARK + json.dumps(r.metrics), "")
    assert not r.ok and "profile window: RuntimeError: CUPTI" in r.error
    assert r.window("timing") is not None and r.window("profile") is None


# --- mechanism ---------------------------------------------------------------------------------


def test_mechanism_requires_the_expected_device():
    runs = [run("bad", device="cpu", timing={"wall_s": 1.0}), run("fixed", device="cpu", timing={"wall_s": 0.5})]
    ok, why = rule_results.mechanism(fake_fixture(), runs, "cuda")
    assert not ok and "ran on cpu, expected cuda" in why
    assert rule_results.mechanism(fake_fixture(), runs, "cpu") == (True, "")


def test_mechanism_requires_samples():
    runs = [run("bad", timing={"wall_s": 1.0, "samples": 0}), run("fixed", timing={"wall_s": 0.5})]
    assert "bad.py counted no samples" in rule_results.mechanism(fake_fixture(), runs, "cuda")[1]


def busy_runs(bad_kernels, fixed_kernels, fixed_window=True):
    return [
        run("bad", ("timing", "profile"), profile={"busy_fraction": 0.0, "window_found": True, "kernels": bad_kernels}),
        run(
            "fixed",
            ("timing", "profile"),
            profile={"busy_fraction": 0.9, "window_found": fixed_window, "kernels": fixed_kernels},
        ),
    ]


def test_busy_fraction_needs_kernels_only_in_the_script_the_fix_makes_busier():
    """Placement rules run bad.py on the CPU on purpose: no kernels there is the point."""
    up = fake_fixture("busy_fraction", direction="up")
    assert rule_results.mechanism(up, busy_runs(0, 40), "cuda") == (True, "")
    assert "fixed.py: no GPU kernel in the window" in rule_results.mechanism(up, busy_runs(40, 0), "cuda")[1]
    assert "no torchlint.window annotation" in rule_results.mechanism(up, busy_runs(0, 40, False), "cuda")[1]
    down = fake_fixture("busy_fraction", direction="down")
    assert "bad.py: no GPU kernel" in rule_results.mechanism(down, busy_runs(0, 40), "cuda")[1]


def test_fixture_checks_decide_the_mechanism():
    fx = fake_fixture(
        "samples_per_s", direction="up", checks=("bad.h2d_pageable > 0", "bad.h2d_pinned == 0", "fixed.h2d_pinned > 0")
    )
    good = [
        run("bad", ("timing", "profile"), profile={"h2d_pageable": 8, "h2d_pinned": 0}),
        run("fixed", ("timing", "profile"), profile={"h2d_pageable": 0, "h2d_pinned": 8}),
    ]
    assert rule_results.mechanism(fx, good, "cuda") == (True, "")
    pinned_bad = [run("bad", ("timing", "profile"), profile={"h2d_pageable": 0, "h2d_pinned": 8}), good[1]]
    ok, why = rule_results.mechanism(fx, pinned_bad, "cuda")
    assert not ok and why == "check 'bad.h2d_pageable > 0' does not hold: bad.h2d_pageable = 0, 0"
    unmeasured = [run("bad"), run("fixed")]
    assert rule_results.mechanism(fx, unmeasured, "cuda") == (False, "check 'bad.h2d_pageable > 0': not measured")


def test_a_check_may_compare_the_scripts():
    fx = fake_fixture("busy_fraction", direction="up", checks=("fixed.samples_per_s > bad.samples_per_s",))
    runs = busy_runs(0, 40)
    runs[0].metrics["passes"]["timing"]["samples_per_s"] = 200.0
    runs[1].metrics["passes"]["timing"]["samples_per_s"] = 100.0
    ok, why = rule_results.mechanism(fx, runs, "cuda")
    assert not ok and "fixed.samples_per_s = 100, bad.samples_per_s = 200" in why


def test_a_failed_run_fails_the_mechanism_and_is_reported():
    failed = script_runs.Run("TL1", "fixed", ("timing",), 0, 1, None, "exit 1: boom")
    runs = [run("bad", timing={"wall_s": 1.0}), failed]
    result = rule_results.rule_result(fake_fixture(), runs)
    assert result["verdict"] == "fail"
    assert "fixed.py timing window (repeat 0) failed: exit 1: boom" in result["reason"]
    assert result["errors"] == ["fixed.py (repeat 0, timing): exit 1: boom"]
    assert [r["script"] for r in result["runs"]] == ["bad", "fixed"]


def test_context_window_failure_does_not_decide_the_verdict():
    bad = run("bad", ("timing", "sync"), timing={"wall_s": 1.0})
    bad.metrics["passes"]["sync"] = {"error": "boom"}
    script_runs._finish(bad, 0, MARK + json.dumps(bad.metrics), "")
    runs = [bad, run("fixed", timing={"wall_s": 0.5})]
    result = rule_results.rule_result(fake_fixture(), runs)
    assert result["verdict"] == "pass" and result["errors"]


# --- a bad script that crashes: "bad crashes, fixed runs" ---------------------------------------

CRASH = "Expected all tensors to be on the same device"


def crash_fixture():
    return fixture_meta.Fixture("TL1", "x", "s", "busy_fraction", "up", 0.1, False, Path("/nowhere"), bad_error=CRASH)


def crashed(error=f"RuntimeError: {CRASH}, but found at least two devices, cuda:0 and cpu!"):
    return script_runs.Run("TL1", "bad", ("timing", "profile", "sync"), 0, 1, None, f"exit 1: Traceback | x | {error}")


def fixed_run(kernels=40, device="cuda"):
    passes = ("timing", "profile", "sync")
    r = run("fixed", passes, device=device, profile={"busy_fraction": 0.9, "kernels": kernels, "window_found": True})
    return r


def test_a_bad_script_that_crashes_as_expected_passes_when_fixed_runs():
    result = rule_results.rule_result(crash_fixture(), [crashed(), fixed_run()], repeats=5)
    assert result["verdict"] == "pass"
    assert result["reason"].startswith("bad crashes, fixed runs: bad.py stopped with 'RuntimeError: Expected all")
    assert result["bad_crash"].startswith("RuntimeError: " + CRASH)
    assert result["repeats"] == 1 and result["bad"] is None and result["change"] is None
    assert result["fixed"]["median"] == 0.9
    assert result["errors"] == []  # the expected crash is the result, not an error


def test_the_exception_that_ended_a_script_is_kept_when_messages_follow_it():
    stderr = "Traceback (most recent call last):\n  ...\nRuntimeError: " + CRASH + "\n" + "[W] worker exiting\n" * 3
    r = script_runs._finish(script_runs.Run("TL1", "bad", ("timing",), 0), 1, "", stderr)
    assert r.error.startswith("exit 1: RuntimeError: " + CRASH) and r.error.endswith("[W] worker exiting")
    assert rule_results.rule_result(crash_fixture(), [r, fixed_run()])["verdict"] == "pass"


def test_a_bad_script_that_runs_or_crashes_otherwise_fails():
    ran = run("bad", ("timing", "profile", "sync"), device="cuda")
    result = rule_results.rule_result(crash_fixture(), [ran, fixed_run()])
    assert result["verdict"] == "fail" and "bad.py ran to its end on cuda instead of stopping" in result["reason"]
    other = crashed("torch.OutOfMemoryError: CUDA out of memory")
    result = rule_results.rule_result(crash_fixture(), [other, fixed_run()])
    assert result["verdict"] == "fail" and "bad.py stopped, but not with" in result["reason"]
    assert result["bad_crash"] == "" and result["errors"]


def test_a_crash_passes_only_when_fixed_runs_on_the_gpu():
    assert "no GPU kernel" in rule_results.rule_result(crash_fixture(), [crashed(), fixed_run(kernels=0)])["reason"]
    assert (
        "ran on cpu, expected cuda"
        in rule_results.rule_result(crash_fixture(), [crashed(), fixed_run(device="cpu")])["reason"]
    )
    broken = script_runs.Run("TL1", "fixed", ("timing",), 0, 1, None, "exit 1: boom")
    assert rule_results.rule_result(crash_fixture(), [crashed(), broken])["verdict"] == "fail"


# --- measure: budget, incremental callback, partial windows -----------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_measure_skips_rules_that_do_not_fit_the_budget_and_reports_each_rule(monkeypatch):
    fixtures = fixture_meta.discover(FAKE)
    clock = Clock()

    def fake_run(fx, which, passes=("timing",), repeat=0, smoke=False, timeout=0, env=None, **kw):
        clock.now += 10.0
        return run(which, passes)

    monkeypatch.setattr(runner, "run_script", fake_run)
    seen = []
    estimates = {"TL910": 30.0, "TL911": 100.0, "TL912": 30.0}
    out = runner.measure(
        fixtures,
        repeats=1,
        budget_s=70.0,
        estimate=lambda fx: estimates[fx.rule],
        on_rule=lambda rr: seen.append((rr.fixture.rule, rr.complete)),
        clock=clock,
    )
    # TL910 takes 20 s (2 runs); TL911's 100 s do not fit in the 50 left; TL912 (30 s) does.
    assert seen == [("TL910", True), ("TL911", False), ("TL912", True)]
    skipped = out[str(fixtures[1].path)]
    assert not skipped.runs and "did not fit" in skipped.reason


def test_measure_stops_a_rule_when_the_budget_runs_out(monkeypatch):
    fixtures = fixture_meta.discover(FAKE, ["TL910"])
    clock = Clock()
    timeouts = []

    def fake_run(fx, which, passes=("timing",), repeat=0, smoke=False, timeout=0, env=None, **kw):
        timeouts.append(timeout)
        clock.now += timeout
        r = run(which, passes)
        r.rc, r.error = -1, f"timed out after {timeout:g} s"
        return r

    monkeypatch.setattr(runner, "run_script", fake_run)
    out = runner.measure(fixtures, repeats=2, budget_s=50.0, timeout=120.0, estimate=lambda fx: 10.0, clock=clock)
    rr = out[str(fixtures[0].path)]
    assert timeouts == [50.0]  # no run may outlast the budget
    assert not rr.complete and "ran out" in rr.reason


def test_a_stop_reports_the_rule_in_progress_with_the_runs_it_finished(monkeypatch):
    """SIGTERM (turned into an exception) mid-rule: on_rule still gets that rule, with its runs."""
    fixtures = fixture_meta.discover(FAKE, ["TL910", "TL911"])
    calls = []

    def fake_run(fx, which, passes=("timing",), repeat=0, smoke=False, timeout=0, env=None, **kw):
        calls.append(which)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return run(which, passes, repeat)

    monkeypatch.setattr(runner, "run_script", fake_run)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        runner.measure(fixtures, repeats=3, on_rule=lambda rr: seen.append((rr.fixture.rule, rr.complete, rr)))
    assert [(rule, complete) for rule, complete, _ in seen] == [("TL910", False)]
    rr = seen[0][2]
    assert len(rr.runs) == 4 and rr.reason == runner.STOPPED


def test_a_fixture_killed_by_the_stop_is_marked_cut(monkeypatch):
    fixtures = fixture_meta.discover(FAKE, ["TL910"])
    calls = []

    def fake_run(fx, which, passes=("timing",), repeat=0, smoke=False, timeout=0, env=None, **kw):
        calls.append(which)
        if len(calls) == 2:
            raise KeyboardInterrupt
        r = run(which, passes, repeat)
        r.rc = -15  # the stop's SIGTERM reached the fixture's process first
        return r

    monkeypatch.setattr(runner, "run_script", fake_run)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        runner.measure(fixtures, repeats=1, on_rule=seen.append)
    assert [r.cut for r in seen[0].runs] == [True]


def cut_runs(repeats, extra=()):
    """Finished repeats of a fake wall_s rule (bad 1.0 s, fixed 0.5 s), then `extra` runs."""
    runs = []
    for k in range(repeats):
        runs += [run("bad", repeat=k, timing={"wall_s": 1.0}), run("fixed", repeat=k, timing={"wall_s": 0.5})]
    return runs + list(extra)


def test_a_rule_cut_after_three_finished_repeats_keeps_its_verdict():
    killed = run("fixed", repeat=3)
    killed.rc, killed.cut, killed.error = -15, True, "exit -15: "
    runs = cut_runs(3, [run("bad", repeat=3, timing={"wall_s": 1.0}), killed])
    result = rule_results.cut_result(fake_fixture(), runs, runner.STOPPED, repeats=5, expected_device="cuda")
    assert result["verdict"] == "pass" and result["repeats"] == 3
    assert result["bad"]["n"] == 3 and result["fixed"]["n"] == 3  # the unfinished repeat is left out
    assert "(cut short after 3 of 5 repeats: stopped (SIGTERM or Ctrl-C) during this rule)" in result["reason"]
    assert len(result["runs"]) == 8 and result["runs"][-1]["cut"] is True  # ... but kept in the record


def test_a_rule_cut_too_early_is_not_run_with_its_runs_kept():
    result = rule_results.cut_result(fake_fixture(), cut_runs(2), runner.BUDGET_CUT, repeats=5)
    assert result["verdict"] == "not-run"
    assert result["reason"] == (
        "not run: --time-budget ran out during this rule, after 4 run(s); 2 finished repeat(s), a verdict needs 3"
    )
    assert len(result["runs"]) == 4
    crash = rule_results.cut_result(crash_fixture(), [crashed()], runner.STOPPED, repeats=5)
    assert crash["verdict"] == "not-run" and "a verdict needs 1" in crash["reason"]


@pytest.mark.slow
def test_a_run_killed_by_its_timeout_keeps_the_windows_it_printed(tmp_path):
    d = tmp_path / "TL1-slow"
    d.mkdir()
    script = (
        "import json, time\nfrom torchlint.verify.harness import MARK\n"
        "print(MARK + json.dumps({'device': 'cuda', 'passes': {'timing': {'samples': 5}}}), flush=True)\n"
        "time.sleep(60)\n"
    )
    (d / "bad.py").write_text(script)
    (d / "fixed.py").write_text(script)
    (d / "meta.toml").write_text(
        'rule = "TL1"\nname = "slow"\nsummary = "s"\nmetric = "sync_count"\ndirection = "down"\nthreshold = 0.5\n'
    )
    (fx,) = fixture_meta.discover(tmp_path)
    r = script_runs.run_script(fx, "bad", ("timing", "sync"), timeout=3)
    assert r.rc == -1 and "timed out" in r.error
    assert r.window("timing") == {"samples": 5} and r.window("sync") is None


# --- the harness, in this process, on the CPU ------------------------------------------------


def test_window_steps_follow_the_step_time():
    assert harness.window_steps(0.5, 0.01, 2, 100) == 50
    assert harness.window_steps(0.5, 2.0, 2, 100) == 2  # slow CPU step: its minimum
    assert harness.window_steps(0.5, 1e-5, 2, 100) == 100  # capped
    assert harness.window_steps(0.5, None, 3, 100) == 3


def test_passes_always_run_timing_first():
    assert harness.parse_passes("sync,profile,timing") == ["timing", "profile", "sync"]
    assert harness.parse_passes("") == ["timing"]
    with pytest.raises(ValueError, match="bogus"):
        harness.parse_passes("timing,bogus")


class FakeTime:
    """A clock the step function advances: the warm-up's arithmetic without real time."""

    def __init__(self, step_s, first_s):
        self.now, self.step_s, self.first_s, self.calls = 0.0, step_s, first_s, 0

    def perf_counter(self):
        return self.now

    def time(self):
        return 1e9 + self.now

    def train(self, steps):
        self.now += self.first_s if self.calls == 0 else steps * self.step_s
        self.calls += 1


def _harness(monkeypatch, passes="timing", smoke=False, windows=None):
    monkeypatch.setenv("TORCHLINT_VERIFY_PASSES", passes)
    monkeypatch.setenv("TORCHLINT_VERIFY_WINDOWS", json.dumps(windows or {}))
    monkeypatch.delenv("TORCHLINT_SMOKE", raising=False)
    monkeypatch.delenv("TORCHLINT_VERIFY_COST", raising=False)
    return Harness("t.py", argv=["--smoke"] if smoke else [])


def test_warm_up_is_sized_by_time_and_sizes_the_window(monkeypatch):
    """A slow first step (one-time costs) is not taken as the step time; warm-up goes on
    for warmup_s after it, and the timing window is sized to ~timing_s."""
    fake = FakeTime(step_s=0.004, first_s=0.5)
    monkeypatch.setattr(harness, "time", fake)
    h = _harness(monkeypatch)
    calls = []
    for steps in h.steps():
        calls.append(steps)
        fake.train(steps)
    warm = h.metrics["warmup"]
    assert calls[0] == 1 and warm["first_step_s"] == 0.5
    assert warm["seconds"] - warm["first_step_s"] >= 0.3 and warm["step_s"] == pytest.approx(0.004)
    assert calls[-1] == h.metrics["passes"]["timing"]["steps"]
    assert abs(calls[-1] - 125) <= 1  # 0.5 s / 4 ms


def test_a_slow_cpu_step_runs_few_steps(monkeypatch):
    fake = FakeTime(step_s=1.5, first_s=1.5)
    monkeypatch.setattr(harness, "time", fake)
    h = _harness(monkeypatch, passes="timing,sync")
    calls = []
    for steps in h.steps():
        calls.append(steps)
        fake.train(steps)
    assert calls == [1, 1, 2, 1]  # first step, one more warm-up step, timing minimum, sync minimum


@pytest.mark.slow
def test_profile_window_finds_the_window_on_cpu(monkeypatch):
    h = _harness(monkeypatch, "timing,profile", smoke=True)
    x = h.torch.ones(8)

    def train(steps):
        nonlocal x
        for _ in range(steps):
            x = x * 2
            h.count(8)

    for steps in h.steps():
        train(steps)
    prof = h.metrics["passes"]["profile"]
    assert prof["window_found"] is True and prof["busy_fraction"] == 0.0  # no GPU on the CPU
    assert prof["kernels"] == 0 and prof["samples"] == 16 and prof["window_us"] > 0
    assert prof["trace_events"] > 0 and prof["kernels_per_step"] == 0.0
    assert h.metrics["passes"]["timing"]["samples"] == 16


def test_sync_window_on_cpu_counts_nothing(monkeypatch):
    h = _harness(monkeypatch, "sync", smoke=True)
    for steps in h.steps():
        h.count(steps)
    assert h.metrics["passes"]["timing"]["samples"] == 2
    assert h.metrics["passes"]["sync"]["sync_count"] == 0


def test_each_window_is_printed_as_it_ends(monkeypatch, capsys):
    h = _harness(monkeypatch, "timing,sync", smoke=True)
    for steps in h.steps():
        h.count(steps)
    lines = [script_runs.parse_metrics(line) for line in capsys.readouterr().out.splitlines()]
    assert [sorted(m["passes"]) for m in lines] == [["timing"], ["sync", "timing"]]


def test_sync_pass_counts_synchronizing_warnings_and_restores_the_mode():
    """The counting logic, with a stand-in for torch.cuda's debug mode."""
    state = {"mode": 0, "set": []}
    cuda = types.SimpleNamespace(
        get_sync_debug_mode=lambda: state["mode"], set_sync_debug_mode=lambda m: state["set"].append(m)
    )
    h = types.SimpleNamespace(cuda=True, torch=types.SimpleNamespace(cuda=cuda))
    found = {}
    with passes.inner(h, "sync", found):
        for _ in range(3):
            warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert found["sync_count"] == 3
    assert state["set"] == ["warn", 0]


def test_per_step_values():
    m = {"steps": 4, "kernels": 40, "h2d_copies": 4, "sync_count": 2, "gpu_busy_us": 2000.0, "samples": 8}
    passes.per_step(m)
    assert (m["kernels_per_step"], m["h2d_per_step"], m["syncs_per_step"]) == (10, 1, 0.5)
    assert m["gpu_busy_s_per_sample"] == pytest.approx(0.00025)


def test_smoke_emits_the_metrics_line(monkeypatch, capsys):
    h = _harness(monkeypatch, "timing", smoke=True)
    for steps in h.steps():
        h.count(4 * steps)
    h.emit(extra=1)
    out = script_runs.parse_metrics(capsys.readouterr().out)
    timing = out["passes"]["timing"]
    assert timing["samples"] == 8 and out["extra"] == 1 and out["device"] == "cpu" and out["smoke"] is True
    assert timing["window_end_unix"] >= timing["window_start_unix"]
    assert "busy_fraction" not in timing and "sync_count" not in timing


# --- the probes' logic (torch.cuda answers stubbed) -------------------------------------------


@pytest.fixture
def fake_torch(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.13.0+cu128")
    return torch


def has_gpu(monkeypatch, present):
    monkeypatch.setattr(
        probe,
        "nvidia_hardware",
        lambda: probe.Hardware(
            present, bool(present), "GPU 0: H100" if present else "no NVIDIA GPU on this machine (checked ...)"
        ),
    )


def test_probe_cpu_only_build(monkeypatch, fake_torch):
    has_gpu(monkeypatch, True)
    monkeypatch.setattr(fake_torch.version, "cuda", None)
    monkeypatch.setattr(fake_torch.cuda, "is_available", lambda: False)
    p = probe.probe_cuda()
    assert (p.available, p.problem, p.reason) == (False, "cpu-only-build", "torch 2.13.0 is a CPU-only build")


def test_probe_says_first_that_there_is_no_gpu(monkeypatch, fake_torch):
    has_gpu(monkeypatch, False)
    monkeypatch.setattr(fake_torch.version, "cuda", None)
    monkeypatch.setattr(fake_torch.cuda, "is_available", lambda: False)
    p = probe.probe_cuda()
    assert p.problem == "no-gpu"
    assert p.reason == "no NVIDIA GPU on this machine (checked ...); torch 2.13.0 is a CPU-only build"


def test_probe_missing_driver(monkeypatch, fake_torch):
    has_gpu(monkeypatch, True)
    monkeypatch.setattr(fake_torch.version, "cuda", "12.8")
    monkeypatch.setattr(fake_torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    p = probe.probe_cuda()
    assert p.problem == "no-driver"
    assert p.reason == "torch 2.13.0 is built for CUDA 12.8 but no NVIDIA driver or CUDA device is visible"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert "CUDA_VISIBLE_DEVICES='-1' hides every device" in probe.probe_cuda().reason


def test_probe_available(monkeypatch, fake_torch):
    monkeypatch.setattr(fake_torch.version, "cuda", "12.8")
    monkeypatch.setattr(fake_torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(fake_torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(fake_torch.cuda, "get_device_name", lambda i: f"GPU{i}")
    p = probe.probe_cuda()
    assert p.available and p.devices == ["GPU0", "GPU1"] and p.device_count == 2


def _pci(root, *devices):
    for name, vendor, klass in devices:
        d = root / name
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(klass + "\n")
    return root


def test_hardware_from_the_driver_the_pci_bus_or_nothing(tmp_path):
    proc = tmp_path / "proc"
    (proc / "gpus" / "0000:18:00.0").mkdir(parents=True)
    hw = probe.nvidia_hardware(proc=proc, pci=tmp_path / "nopci", smi=None, nvml_count=None)
    assert (hw.present, hw.driver) == (True, True) and "1 NVIDIA GPU(s)" in hw.what
    pci = _pci(tmp_path / "pci", ("0000:00:01.0", "0x8086", "0x060000"), ("0000:18:00.0", "0x10de", "0x030200"))
    hw = probe.nvidia_hardware(proc=tmp_path / "none", pci=pci, smi=None, nvml_count=None)
    assert (hw.present, hw.driver) == (True, False) and "no NVIDIA driver" in hw.what
    no = _pci(tmp_path / "pci2", ("0000:00:01.0", "0x1af4", "0x010000"))
    hw = probe.nvidia_hardware(proc=tmp_path / "none", pci=no, smi=None, nvml_count=None)
    assert hw.present is False and hw.what.startswith("no NVIDIA GPU on this machine")
    assert (
        probe.nvidia_hardware(proc=tmp_path / "none", pci=tmp_path / "nopci", smi=None, nvml_count=None).present is None
    )
    assert probe.nvidia_hardware(proc=tmp_path / "none", pci=no, smi=None, nvml_count=2).present is True


def test_launch_blocking_values(monkeypatch):
    for value, blocking in (("1", True), ("true", True), ("0", False), ("", False)):
        monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", value)
        assert probe.launch_blocking() is blocking
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING")
    assert probe.launch_blocking() is False


def test_nvml_sampler_is_inert_without_a_driver():
    s = runner.NvmlSampler()
    started = s.start()
    s.stop()
    if not started:
        assert s.samples == [] and s.mean(0, 1e12) is None
    assert s.mean(None, 1) is None


@pytest.mark.slow
def test_measure_real_harness_end_to_end_on_cpu(tmp_path):
    """A real fixture pair through its windows in fresh subprocesses; CPU, so
    the expected device is cpu."""
    (fx,) = fixture_meta.discover(DATA / "verify_fixtures")
    rr = runner.measure([fx], repeats=1, timeout=300, traces=tmp_path / "traces")[str(fx.path)]
    runs = rr.runs
    assert rr.complete and [(r.script, r.passes) for r in runs] == [
        ("bad", ("timing", "profile")),
        ("fixed", ("timing", "profile")),
    ]
    assert all(r.ok for r in runs), [r.error for r in runs]
    # Each run records its start-up (interpreter, imports) and set-up, to calibrate --plan.
    assert all(0 < r.metrics["startup_s"] < r.seconds and 0 <= r.metrics["setup_s"] < r.seconds for r in runs)
    assert rule_results.run_record(runs[0])["startup_s"] == runs[0].metrics["startup_s"]
    assert all(r.window("profile")["window_found"] and r.window("profile")["busy_fraction"] == 0.0 for r in runs)
    result = rule_results.rule_result(fx, runs, expected_device="cpu")
    assert result["verdict"] == "pass", result["reason"]
    assert result["metrics"]["busy_fraction_timed"]["bad"]["median"] == 0.0
    assert rule_results.rule_result(fx, runs, expected_device="cuda")["verdict"] == "fail"
    kept = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert kept == ["TL900-sleep-bad-r0.json", "TL900-sleep-fixed-r0.json"]
    trace = json.loads((tmp_path / "traces" / kept[0]).read_text())
    assert busy.find_window(trace) is not None


def test_smoke_device_cuda_puts_a_smoke_run_on_the_gpu_torch_sees_and_never_syncs(monkeypatch):
    import torch

    monkeypatch.delenv("TORCHLINT_SMOKE_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _harness(monkeypatch, smoke=True).device.type == "cpu"  # a plain smoke run stays on the CPU
    monkeypatch.setenv("TORCHLINT_SMOKE_DEVICE", "cuda")
    h = _harness(monkeypatch, smoke=True)
    assert h.device.type == "cuda" and h.smoke and h.scale(1024, 8) == 8
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: synced.append(a))
    h.sync()
    assert synced == []  # a smoke run times nothing (under `torchlint run` a sync would be a finding)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _harness(monkeypatch, smoke=True).device.type == "cpu"  # no GPU: the CPU, as before
