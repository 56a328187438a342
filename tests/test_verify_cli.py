"""`torchlint verify` / `torchlint doctor` through click's CliRunner.

Only the CUDA probe is mocked (to play a machine without CUDA, or one with
it); everything after it is the real logic."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.verify import cli, probe
from torchlint.verify.probe import CudaProbe

DATA = Path(__file__).parent / "data"
FAKE = DATA / "verify_fake"
REPO_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

CPU_ONLY = CudaProbe(False, "torch 2.13.0 is a CPU-only build", "cpu-only-build", "2.13.0", None)
NO_DRIVER = CudaProbe(False, "torch 2.13.0 is built for CUDA 12.8 but no NVIDIA driver or CUDA device is visible",
                      "no-driver", "2.13.0", "12.8")
GPU = CudaProbe(True, "", "", "2.13.0", "12.8", 1, ["NVIDIA H100 80GB HBM3"])


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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(Path(__file__).resolve().parents[1]))
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


def test_without_cuda_default_output_path(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "probe_cuda", lambda: CPU_ONLY)
    monkeypatch.chdir(tmp_path)
    result = invoke("--fixtures", str(FAKE))
    assert result.exit_code == 0
    assert (tmp_path / cli.DEFAULT_OUTPUT).is_file()


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
    result = invoke("--fixtures", str(FAKE), "--output", str(tmp_path / "r.json"), "--markdown", str(md),
                    "--plot", str(png), "--rule", "tl911")
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


def test_unknown_rule_and_missing_fixtures_are_usage_errors(tmp_path):
    result = invoke("--fixtures", str(FAKE), "--rule", "TL999")
    assert result.exit_code == 2 and "TL999" in result.stderr
    result = invoke("--fixtures", str(tmp_path / "nope"))
    assert result.exit_code == 2 and "no fixtures directory" in result.stderr


def test_bad_meta_is_a_usage_error(tmp_path):
    d = tmp_path / "TL1-x"
    d.mkdir()
    (d / "bad.py").write_text("")
    (d / "fixed.py").write_text("")
    (d / "meta.toml").write_text('rule = "TL1"\nname = "x"\nsummary = "s"\nmetric = "joy"\ndirection = "up"\n'
                                 'threshold = 0.1\n')
    result = invoke("--fixtures", str(tmp_path))
    assert result.exit_code == 2 and "metric 'joy'" in result.stderr


def test_with_a_gpu_measures_and_gives_verdicts(monkeypatch, tmp_path):
    """The probe says CUDA; the fake scripts print what a GPU run would."""
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    result = invoke("--fixtures", str(FAKE), "--repeats", "2", "--output", str(out), "--markdown", str(md))
    data = json.loads(out.read_text())
    verdicts = {r["rule"]: r["verdict"] for r in data["rules"]}
    assert verdicts == {"TL910": "pass", "TL911": "pass", "TL912": "fail"}
    assert result.exit_code == 1                    # a failed verdict
    assert data["mode"] == "gpu" and data["environment"]["device"] == "NVIDIA H100 80GB HBM3"
    tl910 = next(r for r in data["rules"] if r["rule"] == "TL910")
    assert tl910["bad"]["median"] == 1.0 and tl910["fixed"]["median"] == 0.5 and tl910["change"] == -0.5
    assert tl910["bad"]["n"] == 2
    tl912 = next(r for r in data["rules"] if r["rule"] == "TL912")
    assert tl912["change"] == pytest.approx(0.02)
    assert tl912["metrics"]["h2d_copies"] == {"bad": {"median": 3.0, "spread": 0.0, "n": 2},
                                              "fixed": {"median": 3.0, "spread": 0.0, "n": 2}}
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["Rule", "Metric", "Bad", "Fixed", "Change", "Threshold", "Verdict"]
    assert any(line.startswith("TL912") and line.endswith("FAIL") for line in lines)
    assert "verify" in result.stderr                # the progress bar goes to stderr
    assert "| TL911 | sync_count | 50 | 0 | -100.0% | down >= 50% | PASS |" in md.read_text()


def test_smoke_of_broken_fixtures_fails(tmp_path):
    out = tmp_path / "smoke.json"
    result = invoke("--smoke", "--fixtures", str(DATA / "verify_broken"), "--output", str(out))
    assert result.exit_code == 1
    assert "boom: this fixture script crashed" in result.stdout
    assert "no metrics line" in result.stdout
    assert "smoke: 2/4 scripts ran and emitted metrics" in result.stdout
    data = json.loads(out.read_text())
    assert {r["rule"]: r["verdict"] for r in data["rules"]} == {"TL920": "smoke-failed", "TL921": "smoke-failed"}


def test_smoke_of_fake_fixtures_passes_the_smoke_flag():
    result = invoke("--smoke", "--fixtures", str(FAKE))
    assert result.exit_code == 0, result.output
    assert "smoke: 6/6 scripts ran and emitted metrics" in result.stdout


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


def test_doctor_with_a_gpu(monkeypatch):
    monkeypatch.setattr(probe, "probe_cuda", lambda: GPU)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = CliRunner().invoke(cli.doctor_command, [])
    assert result.exit_code == 0, result.output
    assert "1 CUDA device(s): [0] NVIDIA H100 80GB HBM3" in result.stdout
    assert "GPU ready" in result.stdout


def test_doctor_missing_driver_and_env_problems(monkeypatch):
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


@pytest.mark.skipif(not _cpu_only_build(), reason="checks the CPU-only diagnosis; this torch is a CUDA build")
def test_doctor_on_this_cpu_only_machine(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = CliRunner().invoke(cli.doctor_command, [])
    assert result.exit_code == 1
    out = result.stdout
    assert out.startswith("ok    torch ")
    assert "is a CPU-only build (torch.version.cuda is None)" in out
    assert "fix: pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu" in out
    assert "GPU cannot be used" in out


@pytest.mark.skipif(not _cpu_only_build(), reason="checks the CPU-only skip line; this torch is a CUDA build")
def test_verify_on_this_cpu_only_machine_unmocked(tmp_path):
    import torch

    out = tmp_path / "r.json"
    result = invoke("--fixtures", str(FAKE), "--output", str(out))
    assert result.exit_code == 0
    version = torch.__version__.split("+")[0]
    assert result.stdout == f"GPU verification skipped: torch {version} is a CPU-only build\n"


def test_smoke_without_fork_uses_fresh_interpreters(monkeypatch):
    monkeypatch.setenv("TORCHLINT_SMOKE_FORK", "0")
    result = invoke("--smoke", "--fixtures", str(DATA / "verify_broken"))
    assert result.exit_code == 1
    assert "boom: this fixture script crashed" in result.stdout and "no metrics line" in result.stdout
    assert invoke("--smoke", "--fixtures", str(FAKE)).exit_code == 0


def test_smoke_kills_a_script_that_hangs(tmp_path):
    d = tmp_path / "TL1-hang"
    d.mkdir()
    (d / "bad.py").write_text("import time\ntime.sleep(60)\n")
    (d / "fixed.py").write_text((FAKE / "TL910-fast" / "fixed.py").read_text())
    (d / "meta.toml").write_text('rule = "TL1"\nname = "hang"\nsummary = "s"\nmetric = "wall_s"\n'
                                 'direction = "down"\nthreshold = 0.1\n')
    result = invoke("--smoke", "--fixtures", str(tmp_path), "--timeout", "4")
    assert result.exit_code == 1
    assert "timed out after 4 s" in result.stdout
    assert "ok     TL1-hang/fixed.py" in result.stdout


def test_commands_register_in_a_group(monkeypatch, tmp_path):
    """As torchlint.cli registers them: main.add_command(verify_command); main.add_command(doctor_command)."""
    import click

    @click.group()
    def main():
        pass

    main.add_command(cli.verify_command)
    main.add_command(cli.doctor_command)
    assert sorted(main.commands) == ["doctor", "verify"]
    help_text = CliRunner().invoke(main, ["verify", "--help"]).output
    for option in ("--rule", "--repeats", "--output", "--markdown", "--plot", "--smoke", "--require-gpu",
                   "--fixtures"):
        assert option in help_text
    monkeypatch.setattr(probe, "probe_cuda", lambda: CPU_ONLY)
    result = CliRunner().invoke(main, ["verify", "--fixtures", str(FAKE), "--output", str(tmp_path / "r.json"),
                                       "--require-gpu"])
    assert result.exit_code == 2
