"""Runner plumbing, passes in the harness, and the CUDA probe's logic (CPU only)."""
import json
import types
import warnings
from pathlib import Path

import pytest

from torchlint.verify import busy, passes, probe, runner
from torchlint.verify.harness import MARK, Harness

DATA = Path(__file__).parent / "data"


def fake_fixture(metric="wall_s", skip=()):
    return runner.Fixture("TL1", "x", "s", metric, "down", 0.1, False, Path("/nowhere"), tuple(skip))


def test_plan_alternates_bad_and_fixed_and_adds_passes():
    steps = [(r, p, w) for _, r, p, w in runner.plan([fake_fixture("busy_fraction")], 3)]
    assert steps[:6] == [(0, "timing", "bad"), (0, "timing", "fixed"), (0, "profile", "bad"),
                         (0, "profile", "fixed"), (0, "sync", "bad"), (0, "sync", "fixed")]
    assert steps[6:10] == [(1, "timing", "fixed"), (1, "timing", "bad"), (1, "profile", "fixed"),
                           (1, "profile", "bad")]
    assert steps[10:] == [(2, "timing", "bad"), (2, "timing", "fixed"), (2, "profile", "bad"),
                          (2, "profile", "fixed")]


def test_plan_honours_skip_passes_and_timing_metrics():
    steps = [(r, p) for _, r, p, _ in runner.plan([fake_fixture("wall_s", skip=["profile"])], 2)]
    assert steps == [(0, "timing")] * 2 + [(0, "sync")] * 2 + [(1, "timing")] * 2


def test_repo_fixture_metadata_loads():
    fixtures = runner.discover(runner.default_fixtures_dir())
    assert fixtures, "fixtures/ has no pairs"
    for fx in fixtures:
        assert fx.metric in runner.V.METRICS and fx.direction in ("up", "down")


def test_skip_passes_cannot_skip_the_metric_pass(tmp_path):
    d = tmp_path / "TL1-x"
    d.mkdir()
    for f in ("bad.py", "fixed.py"):
        (d / f).write_text("")
    (d / "meta.toml").write_text('rule = "TL1"\nname = "x"\nsummary = "s"\nmetric = "sync_count"\n'
                                 'direction = "down"\nthreshold = 0.5\nskip_passes = ["sync"]\n')
    with pytest.raises(runner.FixtureError, match="cannot skip pass 'sync'"):
        runner.load_fixture(d)


def test_parse_metrics_takes_the_last_metrics_line():
    out = f"noise\n{MARK}{{\"a\": 1}}\nmore\n{MARK}{{\"a\": 2}}\ntrailing\n"
    assert runner.parse_metrics(out) == {"a": 2}
    assert runner.parse_metrics("nothing here\n") is None
    assert runner.parse_metrics(MARK + "{not json\n") is None


def run(script, pass_name, **metrics):
    base = {"device": "cuda", "samples": 10}
    base.update(metrics)
    return runner.Run("TL1", script, pass_name, 0, 0, base)


def test_mechanism_requires_the_expected_device():
    runs = [run("bad", "timing", wall_s=1.0, device="cpu"), run("fixed", "timing", wall_s=0.5, device="cpu")]
    ok, why = runner.mechanism(fake_fixture(), runs, "cuda")
    assert not ok and "ran on cpu, expected cuda" in why
    assert runner.mechanism(fake_fixture(), runs, "cpu") == (True, "")


def test_mechanism_requires_samples_and_something_to_remove():
    runs = [run("bad", "timing", wall_s=1.0, samples=0), run("fixed", "timing", wall_s=0.5)]
    assert "bad.py counted no samples" in runner.mechanism(fake_fixture(), runs, "cuda")[1]
    runs = [run("bad", "timing"), run("fixed", "timing"), run("bad", "profile", h2d_copies=0),
            run("fixed", "profile", h2d_copies=0)]
    assert "no host-to-device copy" in runner.mechanism(fake_fixture("h2d_copies"), runs, "cuda")[1]


def test_mechanism_busy_fraction_needs_window_and_kernels():
    runs = [run("bad", "timing"), run("fixed", "timing"),
            run("bad", "profile", busy_fraction=0.2, window_found=True, kernels=10),
            run("fixed", "profile", busy_fraction=0.9, window_found=False, kernels=10)]
    assert "no torchlint.window annotation" in runner.mechanism(fake_fixture("busy_fraction"), runs, "cuda")[1]
    runs[3] = run("fixed", "profile", busy_fraction=0.9, window_found=True, kernels=0)
    assert "no GPU kernel" in runner.mechanism(fake_fixture("busy_fraction"), runs, "cuda")[1]


def test_a_failed_run_fails_the_mechanism_and_is_reported():
    runs = [run("bad", "timing", wall_s=1.0), runner.Run("TL1", "fixed", "timing", 0, 1, None, "exit 1: boom")]
    result = runner.rule_result(fake_fixture(), runs)
    assert result["verdict"] == "fail"
    assert "fixed.py timing pass (repeat 0) failed: exit 1: boom" in result["reason"]
    assert result["errors"] == ["fixed.py timing pass (repeat 0): exit 1: boom"]


def test_context_pass_failure_does_not_decide_the_verdict():
    runs = [run("bad", "timing", wall_s=1.0), run("fixed", "timing", wall_s=0.5),
            runner.Run("TL1", "bad", "sync", 0, -11, None, "exit -11: segfault")]
    result = runner.rule_result(fake_fixture(), runs)
    assert result["verdict"] == "pass" and result["errors"]


# --- the harness's passes, in this process, on the CPU ----------------------------------------


def _harness(monkeypatch, pass_name):
    monkeypatch.setenv("TORCHLINT_VERIFY_PASS", pass_name)
    return Harness("t.py", argv=["--smoke"])


def test_profile_pass_finds_the_window_on_cpu(monkeypatch):
    h = _harness(monkeypatch, "profile")
    x = h.torch.ones(8)
    with h.window():
        for _ in range(h.iters):
            x = x * 2
            h.count(8)
    assert h.metrics["window_found"] is True
    assert h.metrics["busy_fraction"] == 0.0          # no GPU on the CPU
    assert h.metrics["kernels"] == 0 and h.metrics["samples"] == 16
    assert h.metrics["window_us"] > 0


def test_sync_pass_on_cpu_counts_nothing(monkeypatch):
    h = _harness(monkeypatch, "sync")
    with h.window():
        h.count(1)
    assert h.metrics["sync_count"] == 0


def test_unknown_pass_is_an_error(monkeypatch):
    h = _harness(monkeypatch, "bogus")
    with pytest.raises(ValueError, match="TORCHLINT_VERIFY_PASS='bogus'"):
        with h.window():
            pass


def test_sync_pass_counts_synchronizing_warnings_and_restores_the_mode():
    """The counting logic, with a stand-in for torch.cuda's debug mode."""
    state = {"mode": 0, "set": []}
    cuda = types.SimpleNamespace(get_sync_debug_mode=lambda: state["mode"],
                                 set_sync_debug_mode=lambda m: state["set"].append(m))
    h = types.SimpleNamespace(cuda=True, torch=types.SimpleNamespace(cuda=cuda), metrics={}, pass_name="sync")
    with passes.inner(h):
        for _ in range(3):
            warnings.warn("called a synchronizing CUDA operation", UserWarning)
        warnings.warn("something else", UserWarning)
    assert h.metrics["sync_count"] == 3
    assert state["set"] == ["warn", 0]


def test_timing_pass_emits_the_metrics_line(monkeypatch, capsys):
    h = _harness(monkeypatch, "timing")
    with h.window():
        h.count(4)
    h.emit(extra=1)
    out = runner.parse_metrics(capsys.readouterr().out)
    assert out["samples"] == 4 and out["extra"] == 1 and out["device"] == "cpu" and out["smoke"] is True
    assert out["window_end_unix"] >= out["window_start_unix"]
    assert "busy_fraction" not in out and "sync_count" not in out


# --- the probe's logic (torch.cuda answers stubbed) ------------------------------------------


@pytest.fixture
def fake_torch(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.13.0+cu128")
    return torch


def test_probe_cpu_only_build(monkeypatch, fake_torch):
    monkeypatch.setattr(fake_torch.version, "cuda", None)
    monkeypatch.setattr(fake_torch.cuda, "is_available", lambda: False)
    p = probe.probe_cuda()
    assert (p.available, p.problem, p.reason) == (False, "cpu-only-build", "torch 2.13.0 is a CPU-only build")


def test_probe_missing_driver(monkeypatch, fake_torch):
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
    """A real fixture pair through its passes in fresh subprocesses; CPU, so
    the expected device is cpu."""
    (fx,) = runner.discover(DATA / "verify_fixtures")
    runs = runner.measure([fx], repeats=1, timeout=300, traces=tmp_path / "traces")[str(fx.path)]
    assert [(r.pass_name, r.script) for r in runs] == [("timing", "bad"), ("timing", "fixed"), ("profile", "bad"),
                                                       ("profile", "fixed")]
    assert all(r.ok for r in runs), [r.error for r in runs]
    profile = [r for r in runs if r.pass_name == "profile"]
    assert all(r.metrics["window_found"] and r.metrics["busy_fraction"] == 0.0 for r in profile)
    result = runner.rule_result(fx, runs, expected_device="cpu")
    assert result["verdict"] == "pass", result["reason"]
    assert result["bad"]["median"] > 0.5            # ten 50 ms sleeps
    assert runner.rule_result(fx, runs, expected_device="cuda")["verdict"] == "fail"
    kept = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert kept == ["TL900-sleep-bad-r0.json", "TL900-sleep-fixed-r0.json"]
    trace = json.loads((tmp_path / "traces" / kept[0]).read_text())
    assert busy.find_window(trace) is not None
