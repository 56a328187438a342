"""`torchlint verify` / `torchlint doctor` through click's CliRunner.

Only the CUDA probe is mocked (to play a machine without CUDA, or one with
it); everything after it is the real logic."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.verify import cli, fixture_meta, probe, runner, script_runs
from torchlint.verify.probe import CudaProbe

DATA = Path(__file__).parent / "data"
FAKE = DATA / "verify_fake"
REPO_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

CPU_ONLY = CudaProbe(False, "torch 2.13.0 is a CPU-only build", "cpu-only-build", "2.13.0", None)
NO_DRIVER = CudaProbe(
    False,
    "torch 2.13.0 is built for CUDA 12.8 but no NVIDIA driver or CUDA device is visible",
    "no-driver",
    "2.13.0",
    "12.8",
)
GPU = CudaProbe(True, "", "", "2.13.0", "12.8", 1, ["NVIDIA H100 80GB HBM3"])
NO_GPU = CudaProbe(
    False,
    "no NVIDIA GPU on this machine (checked /proc/driver/nvidia, nvidia-smi, NVML, the PCI bus); "
    "torch 2.13.0 is a CPU-only build",
    "no-gpu",
    "2.13.0",
    None,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    monkeypatch.delenv("TORCHLINT_SMOKE", raising=False)


def invoke(*args):
    return CliRunner().invoke(cli.verify_command, list(args), catch_exceptions=False)


def test_cli_module_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, torchlint.verify.cli; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=str(Path(__file__).resolve().parents[1])
    )
    assert out.stdout.strip() == "False", out.stderr


def test_without_cuda_every_rule_is_skipped(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: CPU_ONLY)
    out = tmp_path / "report.json"
    result = invoke("--fixtures", str(FAKE), "--output", str(out))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["GPU verification skipped: torch 2.13.0 is a CPU-only build"]
    data = json.loads(out.read_text())
    assert data["mode"] == "skipped"
    assert data["skipped_reason"] == "torch 2.13.0 is a CPU-only build"
    assert [r["rule"] for r in data["rules"]] == ["TL910", "TL911", "TL912"]
    assert all(r["verdict"] == "skipped" and r["reason"] == CPU_ONLY.reason for r in data["rules"])


@pytest.mark.slow
def test_no_json_report_is_written_uninvited(monkeypatch, tmp_path):
    """Issue 27: `verify` wrote torchlint-verify.json into the current folder
    without being asked; the JSON report is written only with --output."""
    monkeypatch.setattr(probe, "probe_cuda", lambda: CPU_ONLY)
    monkeypatch.chdir(tmp_path)
    result = invoke("--fixtures", str(FAKE))
    assert result.exit_code == 0
    assert list(tmp_path.iterdir()) == []
    result = invoke("--fixtures", str(FAKE), "--smoke")
    assert result.exit_code == 0
    assert list(tmp_path.iterdir()) == []


def test_without_cuda_require_gpu_exits_2(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: NO_DRIVER)
    out = tmp_path / "r.json"
    result = invoke("--fixtures", str(FAKE), "--output", str(out), "--require-gpu")
    assert result.exit_code == 2
    assert "GPU verification skipped: torch 2.13.0 is built for CUDA 12.8 but no NVIDIA driver" in result.stdout
    assert all(r["verdict"] == "skipped" for r in json.loads(out.read_text())["rules"])


def test_without_cuda_markdown_and_plot(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: CPU_ONLY)
    md, png = tmp_path / "r.md", tmp_path / "r.png"
    result = invoke(
        "--fixtures",
        str(FAKE),
        "--output",
        str(tmp_path / "r.json"),
        "--markdown",
        str(md),
        "--plot",
        str(png),
        "--rule",
        "tl911",
    )
    assert result.exit_code == 0
    assert "| TL911 | sync_count | - | - | n/a | down >= 50% | SKIPPED |" in md.read_text()
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_launch_blocking_refuses_to_measure(monkeypatch, tmp_path):
    called = []
    monkeypatch.setattr(probe, "probe_cuda", lambda: called.append(1) or GPU)
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    result = invoke("--fixtures", str(FAKE), "--output", str(tmp_path / "r.json"))
    assert result.exit_code == 2
    assert "CUDA_LAUNCH_BLOCKING" in result.stderr and "unset CUDA_LAUNCH_BLOCKING" in result.stderr
    assert not called and not (tmp_path / "r.json").exists()


def test_launch_blocking_zero_is_fine(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: CPU_ONLY)
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "0")
    assert invoke("--fixtures", str(FAKE), "--output", str(tmp_path / "r.json")).exit_code == 0


def test_unknown_rule_and_missing_fixtures_are_usage_errors(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    result = invoke("--fixtures", str(FAKE), "--rule", "TL999")
    assert result.exit_code == 2 and "TL999" in result.stderr
    result = invoke("--fixtures", str(tmp_path / "nope"))
    assert result.exit_code == 2 and "no fixtures directory" in result.stderr


def test_without_a_gpu_that_is_said_first(monkeypatch, tmp_path):
    """Even when the fixtures cannot be found, the missing GPU is the first thing said."""
    monkeypatch.setattr(probe, "probe_cuda", lambda: NO_GPU)
    result = invoke("--fixtures", str(tmp_path / "nope"), "--output", str(tmp_path / "r.json"))
    assert result.stdout.splitlines()[0] == f"GPU verification skipped: {NO_GPU.reason}"
    assert result.exit_code == 2 and "no fixtures directory" in result.stderr


def test_bad_meta_is_a_usage_error(tmp_path):
    d = tmp_path / "TL1-x"
    d.mkdir()
    (d / "bad.py").write_text("")
    (d / "fixed.py").write_text("")
    (d / "meta.toml").write_text(
        'rule = "TL1"\nname = "x"\nsummary = "s"\nmetric = "joy"\ndirection = "up"\nthreshold = 0.1\n'
    )
    result = invoke("--smoke", "--fixtures", str(tmp_path))
    assert result.exit_code == 2 and "metric 'joy'" in result.stderr


def test_with_a_gpu_measures_and_gives_verdicts(monkeypatch, tmp_path):
    """The probe says CUDA; the fake scripts print what a GPU run would."""
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    result = invoke("--fixtures", str(FAKE), "--repeats", "2", "--output", str(out), "--markdown", str(md))
    data = json.loads(out.read_text())
    verdicts = {r["rule"]: r["verdict"] for r in data["rules"]}
    assert verdicts == {"TL910": "pass", "TL911": "pass", "TL912": "fail"}
    assert result.exit_code == 1  # a failed verdict
    assert data["mode"] == "gpu" and data["environment"]["device"] == "NVIDIA H100 80GB HBM3"
    tl910 = next(r for r in data["rules"] if r["rule"] == "TL910")
    assert tl910["bad"]["median"] == 1.0 and tl910["fixed"]["median"] == 0.5 and tl910["change"] == -0.5
    assert tl910["bad"]["n"] == 2
    tl912 = next(r for r in data["rules"] if r["rule"] == "TL912")
    assert tl912["change"] == pytest.approx(0.02)
    assert tl912["metrics"]["h2d_copies"] == {
        "bad": {"median": 3.0, "spread": 0.0, "n": 2},
        "fixed": {"median": 3.0, "spread": 0.0, "n": 2},
    }
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["Rule", "Metric", "Bad", "Fixed", "Change", "Threshold", "Verdict", "Repeats"]
    assert any(line.startswith("TL912") and line.split()[-2:] == ["FAIL", "2"] for line in lines)
    # The progress bar goes to stderr, and only on a terminal: no stray label line here.
    assert result.stderr.splitlines() == [f"writing {out} after every rule", f"wrote {md}"]
    assert "| TL911 | sync_count | 50 | 0 | -100.0% | down >= 50% | PASS |" in md.read_text()
    assert data["complete"] is True and data["rules_not_run"] == []
    assert [r["script"] for r in tl910["runs"]] == ["bad", "fixed", "fixed", "bad"]


def test_rules_option_takes_a_comma_separated_list(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    out = tmp_path / "r.json"
    result = invoke("--fixtures", str(FAKE), "--rules", "TL910,tl911", "--repeats", "1", "--output", str(out))
    assert result.exit_code == 0, result.output
    assert [r["rule"] for r in json.loads(out.read_text())["rules"]] == ["TL910", "TL911"]


def test_time_budget_leaves_rules_for_another_command(monkeypatch, tmp_path):
    """A rule whose estimate does not fit is reported as not run (exit 3), with the command that runs it."""
    from torchlint.verify import plan

    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    monkeypatch.setattr(plan, "estimator", lambda repeats: lambda fx: 1e6 if fx.rule == "TL911" else 1.0)
    out = tmp_path / "part1.json"
    result = invoke("--fixtures", str(FAKE), "--repeats", "1", "--time-budget", "600", "--output", str(out))
    data = json.loads(out.read_text())
    assert {r["rule"]: r["verdict"] for r in data["rules"]} == {"TL910": "pass", "TL911": "not-run", "TL912": "fail"}
    assert data["complete"] is False and data["rules_not_run"] == ["TL911"]
    assert "--rules TL911" in result.stderr
    assert result.exit_code == 1  # TL912 failed; a failure wins over "incomplete"
    result = invoke(
        "--fixtures",
        str(FAKE),
        "--rules",
        "TL910,TL911",
        "--repeats",
        "1",
        "--time-budget",
        "600",
        "--output",
        str(out),
    )
    assert result.exit_code == 3


def test_two_partial_reports_merge(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    a, b, merged, md = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "all.json", tmp_path / "all.md"
    assert invoke("--fixtures", str(FAKE), "--rules", "TL910", "--repeats", "1", "--output", str(a)).exit_code == 0
    assert invoke("--fixtures", str(FAKE), "--rules", "TL911", "--repeats", "1", "--output", str(b)).exit_code == 0
    result = invoke("--merge", str(a), "--merge", str(b), "--output", str(merged), "--markdown", str(md))
    assert result.exit_code == 0, result.output
    data = json.loads(merged.read_text())
    assert {r["rule"]: (r["verdict"], r["source"]) for r in data["rules"]} == {
        "TL910": ("pass", str(a)),
        "TL911": ("pass", str(b)),
    }
    assert data["complete"] is True and data["merged_from"] == [str(a), str(b)]
    assert "| TL911 | sync_count | 50 | 0 |" in md.read_text()


def test_merge_refuses_reports_from_different_gpus(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    invoke("--fixtures", str(FAKE), "--rules", "TL910", "--repeats", "1", "--output", str(a))
    data = json.loads(a.read_text())
    data["environment"]["device"] = "NVIDIA A100-SXM4-40GB"
    b.write_text(json.dumps(data))
    result = invoke("--merge", str(a), "--merge", str(b))
    assert result.exit_code == 2 and "different device" in result.stderr


_STOPPED_RUN = r"""
import sys
from torchlint.verify import cli, probe, runner
from torchlint.verify.probe import CudaProbe
probe.probe_cuda = lambda: CudaProbe(True, "", "", "2.13.0", "12.8", 1, ["NVIDIA H100 80GB HBM3"])
cli.verify_command.main(sys.argv[1:], prog_name="torchlint verify")
"""


@pytest.mark.slow
def test_a_stopped_run_leaves_a_valid_partial_report(tmp_path):
    """The report is rewritten after every rule: kill the run (SIGKILL, no clean-up) while
    its second rule hangs, and the file holds a valid report with the first rule measured."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    fixtures = tmp_path / "fixtures"
    shutil.copytree(FAKE / "TL910-fast", fixtures / "TL910-fast")
    hang = fixtures / "TL913-hang"
    hang.mkdir()
    (hang / "bad.py").write_text("import time\ntime.sleep(600)\n")
    (hang / "fixed.py").write_text("import time\ntime.sleep(600)\n")
    (hang / "meta.toml").write_text(
        'rule = "TL913"\nname = "hang"\nsummary = "s"\nmetric = "wall_s"\ndirection = "down"\nthreshold = 0.1\n'
    )
    out = tmp_path / "part.json"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", _STOPPED_RUN, "--fixtures", str(fixtures), "--repeats", "1", "--output", str(out)],
        cwd=str(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(root)),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if out.exists() and '"verdict": "pass"' in out.read_text():
                break
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    data = json.loads(out.read_text())
    assert data["mode"] == "gpu" and data["complete"] is False
    assert {r["rule"]: r["verdict"] for r in data["rules"]} == {"TL910": "pass", "TL913": "not-run"}
    assert data["rules_not_run"] == ["TL913"]
    assert "stopped before this rule" in next(r for r in data["rules"] if r["rule"] == "TL913")["reason"]
    # ... and it merges with the part that measured the rest.
    result = invoke("--merge", str(out), "--output", str(tmp_path / "all.json"))
    assert result.exit_code == 3 and "still not measured: TL913" in result.stderr


_HANGS_LATE = """
import json, os, pathlib, time
from torchlint.verify.harness import MARK
count = pathlib.Path("count")
k = int(count.read_text()) if count.exists() else 0
count.write_text(str(k + 1))
if k >= 6:
    time.sleep(600)
passes = [p for p in os.environ["TORCHLINT_VERIFY_PASSES"].split(",") if p]
wall = 1.0 if __file__.endswith("bad.py") else 0.5
print(MARK + json.dumps({"device": "cuda", "passes": {p: {"samples": 10, "steps": 5, "wall_s": wall} for p in passes}}))
"""


@pytest.mark.slow
def test_sigterm_keeps_the_rule_in_progress(tmp_path):
    """SIGTERM while a rule's 7th run hangs: the report keeps that rule, with a verdict from
    the three repeats it finished, and the run exits 0 (nothing failed, nothing left out)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    fixtures = tmp_path / "fixtures"
    late = fixtures / "TL913-late"
    late.mkdir(parents=True)
    for which in ("bad", "fixed"):
        (late / f"{which}.py").write_text(_HANGS_LATE)
    (late / "meta.toml").write_text(
        'rule = "TL913"\nname = "late"\nsummary = "s"\nmetric = "wall_s"\ndirection = "down"\nthreshold = 0.1\n'
    )
    out = tmp_path / "part.json"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", _STOPPED_RUN, "--fixtures", str(fixtures), "--repeats", "5", "--output", str(out)],
        cwd=str(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(root)),
        start_new_session=True,
    )
    try:
        count = late / "count"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not count.exists() or count.read_text() != "7"):
            time.sleep(0.2)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    data = json.loads(out.read_text())
    (rule,) = data["rules"]
    assert rule["verdict"] == "pass" and rule["repeats"] == 3
    assert "cut short after 3 of 5 repeats: stopped (SIGTERM or Ctrl-C) during this rule" in rule["reason"]
    assert len(rule["runs"]) == 6 and data["complete"] is True
    assert rc == 0


def test_merge_with_rules_lists_what_no_part_measured(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    a, merged = tmp_path / "a.json", tmp_path / "all.json"
    assert invoke("--fixtures", str(FAKE), "--rules", "TL910", "--repeats", "1", "--output", str(a)).exit_code == 0
    result = invoke("--merge", str(a), "--fixtures", str(FAKE), "--rules", "TL910,TL911", "--output", str(merged))
    assert result.exit_code == 3 and "still not measured: TL911" in result.stderr
    data = json.loads(merged.read_text())
    tl911 = next(r for r in data["rules"] if r["rule"] == "TL911")
    assert tl911["verdict"] == "not-run" and tl911["reason"] == cli.NOT_REPORTED


def test_rules_are_measured_least_certain_first_and_reported_in_code_order(monkeypatch, tmp_path):
    import shutil

    fixtures = tmp_path / "fixtures"
    shutil.copytree(FAKE, fixtures)
    meta = fixtures / "TL912-busy" / "meta.toml"
    meta.write_text(meta.read_text() + 'certainty = "low"\n')
    meta = fixtures / "TL910-fast" / "meta.toml"
    meta.write_text(meta.read_text() + 'certainty = "high"\n')
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    order = []
    real = script_runs.run_script

    def spy(fx, *args, **kwargs):
        order.append(fx.rule)
        return real(fx, *args, **kwargs)

    monkeypatch.setattr(runner, "run_script", spy)
    out = tmp_path / "r.json"
    invoke("--fixtures", str(fixtures), "--repeats", "1", "--output", str(out))
    assert order == ["TL912", "TL912", "TL911", "TL911", "TL910", "TL910"]
    assert [r["rule"] for r in json.loads(out.read_text())["rules"]] == ["TL910", "TL911", "TL912"]


@pytest.mark.slow
def test_dry_run_measures_on_the_cpu_at_smoke_sizes(tmp_path):
    """The GPU path's bookkeeping without a GPU: a real fixture pair, at smoke sizes."""
    out, md = tmp_path / "dry.json", tmp_path / "dry.md"
    result = invoke(
        "--dry-run",
        "--fixtures",
        str(DATA / "verify_fixtures"),
        "--repeats",
        "1",
        "--output",
        str(out),
        "--markdown",
        str(md),
    )
    data = json.loads(out.read_text())
    assert data["mode"] == "dry-run" and data["environment"]["device"] == cli.DRY_RUN_DEVICE
    (rule,) = data["rules"]
    assert rule["verdict"] in ("pass", "fail", "inconclusive") and len(rule["runs"]) == 2
    assert all(r["device"] == "cpu" for r in rule["runs"])
    assert "**Dry run** on the CPU" in md.read_text()
    assert result.exit_code in (0, 1)


def test_the_session_plan_lists_every_rule_once_least_certain_first_within_8_minutes():
    from torchlint.verify import plan, session

    result = invoke("--plan")
    assert result.exit_code == 0, result.output
    fixtures = fixture_meta.discover(REPO_FIXTURES)
    left_out = {fx.rule for fx, _ in session.unmeasured(fixtures)}
    lines = result.stdout.splitlines()
    for fx in fixtures:
        in_table = sum(1 for line in lines if f" {fx.rule} " in line and line[:1].isdigit())
        in_left_out = sum(1 for line in lines if line.startswith(f"  {fx.rule}: "))
        assert (in_table, in_left_out) == ((0, 1) if fx.rule in left_out else (1, 0)), fx.rule
    assert left_out == {"TL304", "TL404", "TL601"}
    assert "(no cost.json)" not in result.stdout, "run python -m torchlint.verify.costs"
    _, total = plan.render(fixtures)
    assert total <= session.RULES_BUDGET_S == 480 < session.LIMIT_S <= 540
    assert "within the 8.0 min budget (480 s)" in result.stdout
    listed = [line.split("--rules ")[1].split()[0] for line in lines if line.lstrip().startswith("part")]
    assert ",".join(listed).split(",") == [
        fx.rule for fx in fixture_meta.run_order(fixtures) if fx.rule not in left_out
    ]
    assert listed[0] == "TL401,TL402,TL501" and listed[-1] == "TL100,TL101,TL102,TL103,TL105"


def test_plan_with_repeats_overrides_the_parts_and_can_be_over_budget():
    result = invoke("--plan", "--repeats", "9", "--time-budget", "60")
    assert result.exit_code == 0
    assert "--repeats 9;" in result.stdout and "OVER the 60 s budget" in result.stdout
    assert "part1-low: --rules TL401,TL402,TL501 --repeats 9" in result.stdout


def test_plan_without_cost_data_falls_back(tmp_path):
    result = invoke("--plan", "--fixtures", str(FAKE), "--repeats", "2")
    assert result.exit_code == 0
    assert "TL910  medium     wall_s" in result.stdout and "(no cost.json)" in result.stdout


@pytest.mark.slow
def test_smoke_of_broken_fixtures_fails(tmp_path):
    out = tmp_path / "smoke.json"
    result = invoke("--smoke", "--fixtures", str(DATA / "verify_broken"), "--output", str(out))
    assert result.exit_code == 1
    assert "boom: this fixture script crashed" in result.stdout
    assert "no metrics line" in result.stdout
    assert "smoke: 2/4 scripts ran and emitted metrics" in result.stdout
    data = json.loads(out.read_text())
    assert {r["rule"]: r["verdict"] for r in data["rules"]} == {"TL920": "smoke-failed", "TL921": "smoke-failed"}


@pytest.mark.slow
def test_smoke_of_fake_fixtures_passes_the_smoke_flag():
    result = invoke("--smoke", "--fixtures", str(FAKE))
    assert result.exit_code == 0, result.output
    assert "smoke: 6/6 scripts ran and emitted metrics" in result.stdout
    # Issue 27: no stray "smoke" line (click's progress bar label, printed
    # alone when stderr is not a terminal).
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert len(lines) == 7 and all(line.startswith("ok ") for line in lines[:6]), lines


@pytest.mark.slow
def test_smoke_runs_every_fixture_pair():
    """Every fixtures/*/ pair (bad and fixed), briefly on the CPU, as CI does."""
    pairs = sorted(p.name for p in REPO_FIXTURES.iterdir() if (p / "meta.toml").is_file())
    assert pairs, "no fixture pairs in fixtures/"
    result = invoke("--smoke", "--fixtures", str(REPO_FIXTURES), "--jobs", "2")
    assert result.exit_code == 0, result.output
    for name in pairs:
        assert f"ok     {name}/bad.py" in result.stdout
        assert f"ok     {name}/fixed.py" in result.stdout


def _hardware(monkeypatch, present):
    what = (
        "GPU 0: NVIDIA H100 80GB HBM3"
        if present
        else "no NVIDIA GPU on this machine (checked /proc/driver/nvidia, nvidia-smi, NVML, the PCI bus)"
    )
    monkeypatch.setattr(probe, "nvidia_hardware", lambda: probe.Hardware(present, bool(present), what))


def test_doctor_with_a_gpu(monkeypatch):
    _hardware(monkeypatch, True)
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = CliRunner().invoke(cli.doctor_command, [])
    assert result.exit_code == 0, result.output
    assert "1 CUDA device(s): [0] NVIDIA H100 80GB HBM3" in result.stdout
    assert "GPU ready" in result.stdout


def test_doctor_missing_driver_and_env_problems(monkeypatch):
    _hardware(monkeypatch, True)
    monkeypatch.setattr(probe, "probe_cuda", lambda: NO_DRIVER)
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    result = CliRunner().invoke(cli.doctor_command, [])
    assert result.exit_code == 1
    out = result.stdout
    assert "FAIL  torch 2.13.0 is built for CUDA 12.8 but no NVIDIA driver" in out
    assert "FAIL  CUDA_VISIBLE_DEVICES='' hides every GPU" in out
    assert "fix: unset CUDA_VISIBLE_DEVICES" in out
    assert "warn  CUDA_LAUNCH_BLOCKING=1" in out and "fix: unset CUDA_LAUNCH_BLOCKING" in out


def _cpu_only_build():
    import torch

    return torch.version.cuda is None


def test_doctor_without_a_gpu_says_so_first(monkeypatch):
    """No NVIDIA device: that comes first; a CUDA build of torch is advice for another machine."""
    _hardware(monkeypatch, False)
    monkeypatch.setattr(probe, "probe_cuda", lambda: NO_GPU)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = CliRunner().invoke(cli.doctor_command, [])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert (
        lines[0] == "FAIL  no NVIDIA GPU on this machine (checked /proc/driver/nvidia, nvidia-smi, NVML, the PCI bus)"
    )
    assert lines[1].startswith(
        "      fix: torchlint verify measures on an NVIDIA GPU: run it on a machine that has one"
    )
    cpu = next(i for i, line in enumerate(lines) if "CPU-only build" in line)
    assert cpu > 1 and lines[cpu].startswith("info  ") and "on a machine with an NVIDIA GPU" in lines[cpu]
    assert "GPU cannot be used" in result.stdout


def test_doctor_cpu_only_torch_on_a_gpu_machine(monkeypatch):
    _hardware(monkeypatch, True)
    monkeypatch.setattr(probe, "probe_cuda", lambda: CPU_ONLY)
    result = CliRunner().invoke(cli.doctor_command, [])
    assert result.exit_code == 1
    out = result.stdout
    assert out.startswith("ok    NVIDIA GPU: GPU 0: NVIDIA H100")
    assert "FAIL  torch 2.13.0 is a CPU-only build (torch.version.cuda is None)" in out
    assert "fix: pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu" in out


@pytest.mark.skipif(not _cpu_only_build(), reason="checks the CPU-only diagnosis; this torch is a CUDA build")
def test_doctor_on_this_cpu_only_machine(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = CliRunner().invoke(cli.doctor_command, [])
    assert result.exit_code == 1
    out = result.stdout
    if probe.nvidia_hardware().present is False:
        assert out.startswith("FAIL  no NVIDIA GPU on this machine")
    assert "is a CPU-only build (torch.version.cuda is None)" in out
    assert "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu" in out
    assert "GPU cannot be used" in out


@pytest.mark.skipif(not _cpu_only_build(), reason="checks the CPU-only skip line; this torch is a CUDA build")
def test_verify_on_this_cpu_only_machine_unmocked(tmp_path):
    import torch

    out = tmp_path / "r.json"
    result = invoke("--fixtures", str(FAKE), "--output", str(out))
    assert result.exit_code == 0
    version = torch.__version__.split("+")[0]
    line = result.stdout.splitlines()
    assert len(line) == 1 and line[0].startswith("GPU verification skipped: ")
    assert line[0].endswith(f"torch {version} is a CPU-only build")


@pytest.mark.slow
def test_smoke_without_fork_uses_fresh_interpreters(monkeypatch):
    monkeypatch.setenv("TORCHLINT_SMOKE_FORK", "0")
    result = invoke("--smoke", "--fixtures", str(DATA / "verify_broken"))
    assert result.exit_code == 1
    assert "boom: this fixture script crashed" in result.stdout and "no metrics line" in result.stdout
    assert invoke("--smoke", "--fixtures", str(FAKE)).exit_code == 0


@pytest.mark.slow
def test_smoke_kills_a_script_that_hangs(tmp_path):
    d = tmp_path / "TL1-hang"
    d.mkdir()
    (d / "bad.py").write_text("import time\ntime.sleep(60)\n")
    (d / "fixed.py").write_text((FAKE / "TL910-fast" / "fixed.py").read_text())
    (d / "meta.toml").write_text(
        'rule = "TL1"\nname = "hang"\nsummary = "s"\nmetric = "wall_s"\ndirection = "down"\nthreshold = 0.1\n'
    )
    result = invoke("--smoke", "--fixtures", str(tmp_path), "--timeout", "4")
    assert result.exit_code == 1
    assert "timed out after 4 s" in result.stdout
    assert "ok     TL1-hang/fixed.py" in result.stdout


def test_commands_register_in_a_group(monkeypatch, tmp_path):
    """As torchlint.doors.cli registers them: main.add_command(verify_command); main.add_command(doctor_command)."""
    import click

    @click.group()
    def main():
        pass

    main.add_command(cli.verify_command)
    main.add_command(cli.doctor_command)
    assert sorted(main.commands) == ["doctor", "verify"]
    help_text = CliRunner().invoke(main, ["verify", "--help"]).output
    for option in (
        "--rule",
        "--rules",
        "--repeats",
        "--output",
        "--markdown",
        "--plot",
        "--smoke",
        "--require-gpu",
        "--fixtures",
        "--plan",
        "--merge",
        "--time-budget",
    ):
        assert option in help_text
    monkeypatch.setattr(probe, "probe_cuda", lambda: CPU_ONLY)
    result = CliRunner().invoke(
        main, ["verify", "--fixtures", str(FAKE), "--output", str(tmp_path / "r.json"), "--require-gpu"]
    )
    assert result.exit_code == 2


def test_progress_bar_only_on_a_terminal(monkeypatch):
    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

        def write(self, text):
            pass

        def flush(self):
            pass

    monkeypatch.setattr("sys.stderr", Stream(False))
    assert isinstance(cli._progress(3, "smoke", None), cli._NoBar)
    monkeypatch.setattr("sys.stderr", Stream(True))
    assert not isinstance(cli._progress(3, "smoke", None), cli._NoBar)
