"""The results cache: hits, misses, keys, corruption, concurrency, clean."""

from __future__ import annotations

import multiprocessing
import os
import pickle

import pytest
from click.testing import CliRunner

from torchlint.config import Settings
from torchlint.files import cache as cache_mod
from torchlint.files.cache import (
    CACHE_DIR_NAME,
    CACHEDIR_TAG,
    Cache,
    clean_cache,
    clean_command,
    settings_key,
    settings_key_for,
)

from helpers import check

SRC = b"import torch\nx = torch.zeros(3).to('cuda')\n"


def _result(path="a.py", text=SRC):
    return check(text.decode(), path)


def _entries(root):
    return [p for p in (root / CACHE_DIR_NAME).rglob("*") if p.is_file() and p.parent.name != CACHE_DIR_NAME]


def test_miss_then_hit_returns_an_equal_result(tmp_path):
    c = Cache(tmp_path, "k")
    assert c.get(SRC, "py") is None
    value = _result()
    assert value.findings and value.findings[0].fix is not None
    c.put(SRC, "py", value)
    again = Cache(tmp_path, "k").get(SRC, "py")
    assert again == value
    assert again.findings[0].fix.applicability == value.findings[0].fix.applicability


def test_cache_dir_is_tagged_and_ignored_by_git(tmp_path):
    Cache(tmp_path, "k").put(SRC, "py", _result())
    d = tmp_path / CACHE_DIR_NAME
    assert (d / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (d / "CACHEDIR.TAG").read_text() == CACHEDIR_TAG
    assert "*" in (d / ".gitignore").read_text().splitlines()


@pytest.mark.parametrize("change", ["content", "settings", "version", "variant", "code"])
def test_key_changes(tmp_path, change, monkeypatch):
    base = Cache(tmp_path, "codes=TL104", version="1.0")
    base.put(SRC, "py|code", "old")
    variant, content, key, version = "py|code", SRC, "codes=TL104", "1.0"
    if change == "content":
        content = SRC + b"# edited\n"
    elif change == "settings":
        key = "codes=TL104,TL501"
    elif change == "version":
        version = "1.1"
    elif change == "variant":
        variant = "py|test"
    elif change == "code":
        monkeypatch.setattr(cache_mod, "_fingerprint", "other-code")
    assert Cache(tmp_path, key, version=version).get(content, variant) is None
    monkeypatch.undo()
    assert Cache(tmp_path, "codes=TL104", version="1.0").get(SRC, "py|code") == "old"


def test_path_variant_reads_what_the_pipeline_reads_from_a_path():
    """The cache keys by contents; what the pipeline reads from a path (the
    suffix, and the role the path gives the file) must be in the key."""
    variant = cache_mod.path_variant
    assert variant("src/a.py") == variant("a.py") == variant("/abs/src/a.py") == "py|code"
    assert variant("nb.ipynb") == "ipynb|code"
    assert variant("tests/a.py") == variant("test_a.py") == variant("pkg\\tests\\a.py") == "py|test"
    assert variant("pkg/test_utils/training.py") == "py|test"
    assert variant("benchmarks.py") == variant("tools/latency.py") == "py|benchmark"


def test_the_analysis_reads_the_same_path_roles():
    """The analysis's roles come from the same function the cache keys by."""
    import libcst as cst

    from torchlint.analysis import Analysis

    module = cst.parse_module("x = 1\n")
    assert Analysis(module, "pkg/test_utils/training.py").roles.test_file
    assert Analysis(module, "benchmarks.py").roles.benchmark_file
    plain = Analysis(module, "train.py").roles
    assert not plain.test_file and not plain.benchmark_file


def test_settings_key_is_stable_and_sensitive():
    a = settings_key(["TL501", "TL104"], (("tests/*", ("TL1",)),), fix=False)
    assert a == settings_key(["TL104", "TL501", "TL104"], (("tests/*", ("TL1",)),), fix=False)
    assert a != settings_key(["TL104"], (("tests/*", ("TL1",)),))
    assert a != settings_key(["TL501", "TL104"], ())
    assert a != settings_key(["TL501", "TL104"], (("tests/*", ("TL1",)),), fix=True)
    assert settings_key(["X"], fix=True) != settings_key(["X"], fix=True, unsafe=True)
    s = Settings()
    assert settings_key_for(s) == settings_key_for(Settings())
    assert settings_key_for(s) != settings_key_for(Settings(ignore=("TL104",)))


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_corrupted_entry_is_a_miss_and_is_rewritten(tmp_path, damage):
    c = Cache(tmp_path, "k")
    c.put(SRC, "py", _result())
    (entry,) = _entries(tmp_path)
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        entry.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "empty":
        entry.write_bytes(b"")
    else:
        entry.write_bytes(os.urandom(200))
    assert Cache(tmp_path, "k").get(SRC, "py") is None
    Cache(tmp_path, "k").put(SRC, "py", _result())
    assert Cache(tmp_path, "k").get(SRC, "py") == _result()


def test_planted_pickle_cannot_run_code(tmp_path):
    c = Cache(tmp_path, "k")
    c.put(SRC, "py", 1)
    (entry,) = _entries(tmp_path)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    payload = pickle.dumps(Evil())
    import hashlib

    entry.write_bytes(b"TLCACHE1" + hashlib.blake2b(payload, digest_size=16).digest() + payload)
    assert Cache(tmp_path, "k").get(SRC, "py") is None


def test_unwritable_cache_is_skipped_silently(tmp_path):
    (tmp_path / CACHE_DIR_NAME).write_text("a file where the folder should be")
    c = Cache(tmp_path, "k")
    c.put(SRC, "py", 1)  # must not raise
    assert c.disabled and c.get(SRC, "py") is None


def _writer(root, n, value):
    c = Cache(root, "k")
    for _ in range(n):
        c.put(SRC, "py", value)
        got = c.get(SRC, "py")
        assert got in (None, "A" * 5000, "B" * 5000)


def test_two_processes_writing_the_same_key(tmp_path):
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    procs = [ctx.Process(target=_writer, args=(tmp_path, 150, v * 5000)) for v in "AB"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert Cache(tmp_path, "k").get(SRC, "py") in ("A" * 5000, "B" * 5000)
    leftovers = [p for p in (tmp_path / CACHE_DIR_NAME).rglob(".tmp-*")]
    assert leftovers == []


def test_clean_cache(tmp_path):
    assert clean_cache(tmp_path) is False
    Cache(tmp_path, "k").put(SRC, "py", 1)
    assert (tmp_path / CACHE_DIR_NAME).is_dir()
    assert clean_cache(tmp_path) is True
    assert not (tmp_path / CACHE_DIR_NAME).exists()


def test_clean_command(tmp_path):
    Cache(tmp_path, "k").put(SRC, "py", 1)
    runner = CliRunner()
    result = runner.invoke(clean_command, ["--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Removed" in result.output and not (tmp_path / CACHE_DIR_NAME).exists()
    result = runner.invoke(clean_command, ["--root", str(tmp_path)])
    assert result.exit_code == 0 and "No cache" in result.output


def test_clean_command_defaults_to_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Cache(tmp_path, "k").put(SRC, "py", 1)
    result = CliRunner().invoke(clean_command, [])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / CACHE_DIR_NAME).exists()
