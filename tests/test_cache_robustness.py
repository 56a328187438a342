"""The results cache, end to end through `python -m torchlint check`: two runs
at once over one cache, corrupted entries, and a cache that cannot be written.
Each run's JSON report is compared with a `--no-cache` run of the same tree."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.config import load_settings
from torchlint.files.cache import CACHE_DIR_NAME, _decode
from torchlint.files.runner import run

pytestmark = pytest.mark.slow  # subprocess CLIs

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 180

BAD = "import torch\ndevice = torch.device('cuda')\n\ndef f{i}():\n    return torch.zeros({i} + 1).to(device)\n"
PROFILER = "from torch.autograd import profiler\nwith profiler.profile(use_cuda=True) as p{i}:\n    pass\n"
CLEAN = "import torch\n\ndef g{i}(x):\n    return x * {i}\n"


def make_tree(root: Path, n: int = 24) -> Path:
    """A project (pyproject.toml with [tool.torchlint]) with findings in two of every three files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[tool.torchlint]\n")
    pkg = root / "pkg"
    pkg.mkdir()
    for i in range(n):
        template = (BAD, PROFILER, CLEAN)[i % 3]
        (pkg / f"m{i:02d}.py").write_text(template.format(i=i))
    return root


def cli(root: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TORCHLINT_OUTPUT_FORMAT", None)
    return subprocess.Popen(
        [sys.executable, "-m", "torchlint", "check", "--output-format", "json", "-j", "1", *args, "pkg"],
        cwd=str(root),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen):
    out, err = proc.communicate(timeout=TIMEOUT_S)
    return proc.returncode, json.loads(out), err


def check_json(root: Path, *args: str):
    return finish(cli(root, *args))


def entries(root: Path):
    """The result entries (the project pass's summaries, in `project/`, aside)."""
    cache_dir = root / CACHE_DIR_NAME
    return sorted(
        p
        for p in cache_dir.rglob("*")
        if p.is_file() and p.parent != cache_dir and p.relative_to(cache_dir).parts[0] != "project"
    )


@pytest.fixture
def tree(tmp_path):
    root = make_tree(tmp_path / "proj")
    code, expected, err = check_json(root, "--no-cache")
    assert code == 1 and err == ""
    assert len(expected) == 16  # 8 TL104 + 8 TL501
    assert not (root / CACHE_DIR_NAME).exists()
    return root, expected


def test_two_runs_at_once_share_the_cache(tree):
    root, expected = tree
    procs = [cli(root), cli(root)]  # started together, cold cache
    results = [finish(p) for p in procs]
    for code, findings, err in results:
        assert code == 1, err
        assert findings == expected
        assert "Traceback" not in err
    assert len(entries(root)) == 24  # one per file, whichever run wrote it last
    assert all(_decode(p.read_bytes()) is not None for p in entries(root))
    assert not list((root / CACHE_DIR_NAME).rglob(".tmp-*"))  # no temp file left behind
    # Warm: two more at once, now reading.
    for code, findings, _ in [finish(p) for p in (cli(root), cli(root))]:
        assert (code, findings) == (1, expected)


def _all_hits(root: Path):
    """An in-process run whose mapper fails if anything is left to lint (every file must be a cache hit)."""
    linted = []

    def mapper(fn, items):
        items = list(items)
        linted.extend(items)
        return [fn(item) for item in items]

    cwd = os.getcwd()
    os.chdir(root)
    try:
        # preview on, as the command line has it (TORCHLINT_PREVIEW): the same cache key
        result = run(["pkg"], load_settings(start=str(root), preview=True), mapper=mapper, cache_root=str(root))
    finally:
        os.chdir(cwd)
    return result, [job.path for job, _ in linted]


DAMAGE = {
    "truncated": lambda data: data[: len(data) // 2],
    "empty": lambda data: b"",
    "garbage": lambda data: b"\x00\xff not a cache entry " * 10,
    "bit flip": lambda data: data[:-1] + bytes([data[-1] ^ 1]),
    "header only": lambda data: data[:24],
}


def test_corrupted_entries_are_ignored_and_rewritten(tree):
    root, expected = tree
    assert check_json(root)[:2] == (1, expected)
    files = entries(root)
    assert len(files) == 24
    damaged = {}
    for path, (name, damage) in zip(files, DAMAGE.items()):
        path.write_bytes(damage(path.read_bytes()))
        damaged[path] = path.read_bytes()
        assert _decode(damaged[path]) is None, name
    code, findings, err = check_json(root)
    assert (code, findings) == (1, expected)
    assert "Traceback" not in err
    for path, bad in damaged.items():
        now = path.read_bytes()
        assert now != bad and _decode(now) is not None  # rewritten, sound again
    # A third run lints nothing: every entry, the rewritten ones included, is a hit.
    result, linted = _all_hits(root)
    assert linted == []
    assert len(result.findings) == len(expected)


def test_a_missing_entry_is_linted_and_written_again(tree):
    root, expected = tree
    assert check_json(root)[:2] == (1, expected)
    victim = entries(root)[0]
    victim.unlink()
    result, linted = _all_hits(root)
    assert len(linted) == 1 and victim.exists()
    assert len(result.findings) == len(expected)


def test_cache_path_is_a_file(tree):
    """`.torchlint_cache` is a regular file: the folder cannot be created; the run is unaffected."""
    root, expected = tree
    marker = root / CACHE_DIR_NAME
    marker.write_text("not a folder\n")
    for _ in range(2):
        code, findings, err = check_json(root)
        assert (code, findings, err) == (1, expected, "")
    assert marker.read_text() == "not a folder\n"


def _not_enforced_reason():
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return "running as root: permission bits do not stop root from writing (test_cache_path_is_a_file covers this case)"
    return None


@pytest.mark.skipif(_not_enforced_reason() is not None, reason=str(_not_enforced_reason()))
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_read_only_cache_folder(tree, warm):
    """A cache folder that cannot be written: a cold one gives correct results
    without caching; a warm one is still read."""
    root, expected = tree
    cache_dir = root / CACHE_DIR_NAME
    if warm:
        assert check_json(root)[:2] == (1, expected)
    else:
        cache_dir.mkdir()
    before = entries(root)
    dirs = [cache_dir, *(p for p in cache_dir.rglob("*") if p.is_dir())]
    for d in dirs:
        d.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        for _ in range(2):
            code, findings, err = check_json(root)
            assert (code, findings, err) == (1, expected, "")
        assert entries(root) == before
    finally:
        for d in dirs:
            d.chmod(stat.S_IRWXU)
    if warm:
        for d in dirs:
            d.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            _, linted = _all_hits(root)
            assert linted == []
        finally:
            for d in dirs:
                d.chmod(stat.S_IRWXU)


def _report(cwd: Path, *args: str) -> tuple:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TORCHLINT_OUTPUT_FORMAT", None)
    proc = subprocess.run(
        [sys.executable, "-m", "torchlint", "check", "-j", "1", *args],
        cwd=str(cwd),
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    return proc.returncode, proc.stdout, proc.stderr


FORMATS = ("json", "concise", "github", "sarif", "gitlab", "junit", "pylint", "rdjson")


@pytest.mark.slow
@pytest.mark.parametrize("first", ["root", "inside"])
def test_a_hit_from_another_folder_prints_this_runs_paths(tmp_path, first):
    """The cache is keyed by contents: a file linted as `pkg/m00.py` from the
    project root and as `m00.py` from `pkg/` is one entry, and each run prints
    its own paths (issue 27: `src/a.py` printed from inside `src/`, and
    `.../src/src/a.py` in JSON). Every format, either way round, must equal a
    `--no-cache` run from the same folder."""
    root = make_tree(tmp_path / "proj", n=6)
    pkg = root / "pkg"
    fill = (root, "pkg") if first == "root" else (pkg, ".")
    read = (pkg, ".") if first == "root" else (root, "pkg")
    code, out, err = _report(fill[0], "--output-format", "json", fill[1])
    assert code == 1, err
    filled = entries(root)
    assert len(filled) == 6
    for fmt in FORMATS:
        cached = _report(read[0], "--output-format", fmt, read[1])
        fresh = _report(read[0], "--no-cache", "--output-format", fmt, read[1])
        assert cached == fresh, fmt
        assert "pkg/pkg" not in cached[1] and "pkg\\\\pkg" not in cached[1], fmt
    assert entries(root) == filled  # every file of the second folder was a hit
    if first == "root":  # from inside pkg/, the paths are relative to pkg/
        concise = _report(pkg, "--output-format", "concise", "m00.py")[1]
        assert concise.startswith("m00.py:5:12: TL104"), concise
        (finding,) = json.loads(_report(pkg, "--output-format", "json", "m00.py")[1])
        assert finding["filename"] == str(pkg / "m00.py")
