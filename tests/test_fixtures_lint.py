"""Every fixture pair under fixtures/ lints as its meta.toml says, and its fix works.

Generic over fixtures/*/: each directory holds bad.py, fixed.py and meta.toml
(schema in the helpers' brief / docs). bad.py reports only its rule (at least
once), fixed.py reports nothing, and `fix_source(bad, unsafe=meta.unsafe_fix)`
clears that rule's findings, parses and is idempotent.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import libcst as cst
import pytest

from torchlint.rules import all_codes, name_of, rule_by_code

from helpers import fix_source, lint_source

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = (
    sorted(p for p in (ROOT / "fixtures").glob("*/") if p.is_dir() and (p / "meta.toml").exists())
    if (ROOT / "fixtures").is_dir()
    else []
)
IDS = [p.name for p in FIXTURES]

METRICS = {"busy_fraction", "samples_per_s", "peak_mem_bytes", "sync_count", "h2d_copies", "wall_s"}
KEYS = {
    "rule": str,
    "name": str,
    "summary": str,
    "metric": str,
    "direction": str,
    "threshold": (int, float),
    "unsafe_fix": bool,
}


def meta_of(folder: Path) -> dict:
    return tomllib.loads((folder / "meta.toml").read_text())


def test_there_are_fixtures():
    assert FIXTURES, "no fixtures/*/meta.toml found"
    dirs = [p for p in (ROOT / "fixtures").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))]
    assert len(dirs) == len(FIXTURES), "a fixture directory lacks meta.toml"


@pytest.mark.parametrize("folder", FIXTURES, ids=IDS)
def test_meta_schema(folder):
    meta = meta_of(folder)
    for key, typ in KEYS.items():
        assert key in meta, f"{folder.name}/meta.toml lacks {key}"
        assert isinstance(meta[key], typ) and not (typ is not bool and isinstance(meta[key], bool)), key
    assert meta["rule"] in all_codes()
    assert meta["name"] == name_of(meta["rule"])
    assert folder.name == f"{meta['rule']}-{meta['name']}"
    assert meta["metric"] in METRICS
    assert meta["direction"] in ("up", "down")
    assert meta["threshold"] > 0
    assert meta["summary"].strip()
    assert (folder / "bad.py").is_file() and (folder / "fixed.py").is_file()


@pytest.mark.parametrize("folder", FIXTURES, ids=IDS)
def test_bad_reports_only_its_rule(folder):
    rule = meta_of(folder)["rule"]
    path = folder / "bad.py"
    codes = [f.code for f in lint_source(path.read_text(), str(path))]
    assert codes, f"{folder.name}/bad.py reports nothing"
    assert set(codes) == {rule}, f"{folder.name}/bad.py reports {codes}"


@pytest.mark.parametrize("folder", FIXTURES, ids=IDS)
def test_fixed_reports_nothing(folder):
    path = folder / "fixed.py"
    found = [(f.code, f.row) for f in lint_source(path.read_text(), str(path))]
    assert found == [], f"{folder.name}/fixed.py reports {found}"


def _has_fix(folder: Path) -> bool:
    return rule_by_code(meta_of(folder)["rule"]).APPLICABILITY is not None


FIXABLE = [p for p in FIXTURES if _has_fix(p)]


def test_rules_without_a_fix_really_offer_none():
    """TL301/TL402 fixtures have hand-written fixed.py: their rules must not offer a fix."""
    for folder in FIXTURES:
        if folder not in FIXABLE:
            findings = lint_source((folder / "bad.py").read_text(), "bad.py")
            assert findings and all(f.fix is None for f in findings), folder.name


@pytest.mark.parametrize("folder", FIXABLE, ids=[p.name for p in FIXABLE])
def test_fix_clears_parses_and_is_idempotent(folder):
    meta = meta_of(folder)
    bad = (folder / "bad.py").read_text()
    fixed, remaining = fix_source(bad, str(folder / "bad.py"), unsafe=meta["unsafe_fix"])
    assert fixed != bad, "no fix was applied"
    cst.parse_module(fixed)
    assert not [f for f in remaining if f.code == meta["rule"]], "the fix did not clear the finding"
    again, _ = fix_source(fixed, str(folder / "bad.py"), unsafe=meta["unsafe_fix"])
    assert again == fixed, "the fix is not idempotent"
    if meta["unsafe_fix"]:
        safe_only, _ = fix_source(bad, str(folder / "bad.py"))
        assert [f for f in lint_source(safe_only) if f.code == meta["rule"]], (
            "an unsafe fix was applied without unsafe=True"
        )


PLACEMENT = [p for p in FIXTURES if p.name.startswith("TL10")]


@pytest.mark.parametrize("folder", PLACEMENT, ids=[p.name for p in PLACEMENT])
def test_placement_fixed_is_exactly_the_fix(folder):
    """The placement fixtures' fixed.py is what `--fix` (with `--unsafe-fixes`
    where the meta says so) makes of bad.py."""
    meta = meta_of(folder)
    fixed, _ = fix_source((folder / "bad.py").read_text(), "bad.py", unsafe=meta["unsafe_fix"])
    assert fixed == (folder / "fixed.py").read_text()


_DRIVER = r"""
import io, json, runpy, sys, contextlib
out = {}
for path in sys.argv[1:]:
    buf = io.StringIO()
    sys.argv = [path, "--smoke"]
    with contextlib.redirect_stdout(buf):
        runpy.run_path(path, run_name="__main__")
    lines = [l for l in buf.getvalue().splitlines() if l.startswith("TORCHLINT_METRICS ")]
    out[path] = json.loads(lines[-1].split(" ", 1)[1]) if lines else None
print(json.dumps(out))
"""


@pytest.mark.slow
def test_placement_fixtures_run_in_smoke_mode():
    """Both scripts of every placement fixture run on the CPU with --smoke and
    emit their metrics line (one interpreter, so torch is imported once)."""
    paths = [str(p / n) for p in PLACEMENT for n in ("bad.py", "fixed.py")]
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, *paths], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for path in paths:
        metrics = result[path]
        assert metrics is not None, f"{path} printed no metrics"
        assert metrics["smoke"] is True and metrics["samples"] > 0, path


@pytest.mark.slow
def test_every_fixed_bad_script_still_runs(tmp_path):
    """For every fixture with a fix: bad.py after `--fix --unsafe-fixes` still
    runs on the CPU with --smoke (a fix must never break a working script)."""
    paths = []
    for folder in FIXABLE:
        copy = tmp_path / folder.name
        shutil.copytree(folder, copy)
        fixed, _ = fix_source((folder / "bad.py").read_text(), "bad.py", unsafe=True)
        assert fixed != (folder / "bad.py").read_text(), folder.name
        (copy / "bad.py").write_text(fixed)
        paths.append(str(copy / "bad.py"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, *paths], capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for path in paths:
        metrics = result[path]
        assert metrics is not None, f"{path} printed no metrics"
        assert metrics["smoke"] is True and metrics["samples"] > 0, path
