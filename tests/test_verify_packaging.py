"""`torchlint verify` outside the repository: the fixtures ship in the wheel, and
`python -m torchlint.verify` runs with torch and click alone (as on the GPU
machine, which has no LibCST or pathspec)."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p for p in (ROOT / "fixtures").iterdir() if (p / "meta.toml").is_file())


def _blocked(tmp_path: Path) -> Path:
    """A directory that, first on PYTHONPATH, makes `import libcst` / `import pathspec` fail."""
    block = tmp_path / "block"
    for name in ("libcst", "pathspec"):
        (block / name).mkdir(parents=True)
        (block / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed here (test)')\n")
    return block


def _env(*paths: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    env.pop("TORCHLINT_SMOKE", None)
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the sources (an in-tree build would leave build/ in the checkout)."""
    import shutil

    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "torchlint", src / "torchlint", ignore=ignore)
    shutil.copytree(ROOT / "fixtures", src / "fixtures", ignore=ignore)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(out), "-q"],
        capture_output=True,
        text=True,
        cwd=str(out),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (whl,) = out.glob("torchlint-*.whl")
    return whl


@pytest.mark.slow
def test_the_wheel_ships_every_fixture(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for fx in FIXTURES:
        for f in ("bad.py", "fixed.py", "meta.toml", "cost.json"):
            assert f"torchlint/verify/fixtures/{fx.name}/{f}" in names, f"{fx.name}/{f} is not in the wheel"
    assert not any(n.startswith("fixtures/") for n in names), "fixtures must live inside the package"


@pytest.mark.slow
def test_installed_verify_finds_and_runs_the_packaged_fixtures(wheel, tmp_path):
    """The wheel unpacked as an installed package (what pip does), run from an empty
    folder without LibCST or pathspec: the packaged fixtures are found and run."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = _env(_blocked(tmp_path), site)
    where = subprocess.run(
        [sys.executable, "-c", "from torchlint.verify import fixture_meta; print(fixture_meta.default_fixtures_dir())"],
        capture_output=True,
        text=True,
        cwd=str(empty),
        env=env,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()) == site / "torchlint" / "verify" / "fixtures"
    smoke = subprocess.run(
        [sys.executable, "-m", "torchlint.verify", "--smoke", "--rules", "TL104,TL401"],
        capture_output=True,
        text=True,
        cwd=str(empty),
        env=env,
        timeout=600,
    )
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr[-3000:]
    for name in ("TL104-create-then-move", "TL401-sync-in-loop"):
        assert f"ok     {name}/bad.py" in smoke.stdout and f"ok     {name}/fixed.py" in smoke.stdout
    plan = subprocess.run(
        [sys.executable, "-m", "torchlint.verify", "--plan"],
        capture_output=True,
        text=True,
        cwd=str(empty),
        env=env,
        timeout=120,
    )
    assert plan.returncode == 0 and "(no cost.json)" not in plan.stdout, plan.stdout + plan.stderr


@pytest.mark.slow
def test_module_entry_point_needs_only_click_and_torch(tmp_path):
    """`python -m torchlint.verify` (verify, doctor, plan, merge) from a checkout where
    `import libcst` and `import pathspec` fail."""
    env = _env(_blocked(tmp_path), ROOT)
    doctor = subprocess.run(
        [sys.executable, "-m", "torchlint.verify", "doctor"],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env=env,
        timeout=120,
    )
    assert doctor.returncode in (0, 1), doctor.stderr
    assert "CUDA_LAUNCH_BLOCKING" in doctor.stdout and "torch " in doctor.stdout
    verify = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchlint.verify",
            "--fixtures",
            str(ROOT / "tests" / "data" / "verify_fake"),
            "--output",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env=env,
        timeout=120,
    )
    import torch

    if not torch.cuda.is_available():
        assert verify.returncode == 0, verify.stderr
        assert verify.stdout.startswith("GPU verification skipped: ")
    else:  # the fake fixtures measured: TL912 fails by design
        assert verify.returncode == 1 and "TL912" in verify.stdout
    help_text = subprocess.run(
        [sys.executable, "-m", "torchlint.verify", "--help"],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env=env,
        timeout=120,
    )
    assert help_text.returncode == 0 and "--time-budget" in help_text.stdout
