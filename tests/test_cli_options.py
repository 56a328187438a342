"""Ruff's options that torchlint users reach for: --add-noqa, --exit-non-zero-on-fix,
--fix-only, --show-settings, --show-files, --exclude/--extend-exclude,
force-exclude, unsafe-fixes, --cache-dir, respect-gitignore and `rule --all`."""

import json
import os
import re

import pytest
from click.testing import CliRunner

from torchlint.doors.cli import main

from helpers import CLEAN_SRC, TL104_FIXED, TL104_SRC, UNSAFE_SRC

BOTH = TL104_SRC + UNSAFE_SRC.replace("import torch\n", "")  # a safe fix and an unsafe one


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCHLINT_OUTPUT_FORMAT", raising=False)
    monkeypatch.delenv("TORCHLINT_CACHE_DIR", raising=False)
    return tmp_path


def invoke(*args, input=None, env=None):
    return CliRunner().invoke(main, list(args), input=input, env=env)


# --- --exit-non-zero-on-fix, --fix-only -------------------------------------------------


def test_exit_non_zero_on_fix(proj):
    f = proj / "a.py"
    f.write_text(TL104_SRC)
    r = invoke("--fix", "--exit-non-zero-on-fix", ".")
    assert r.exit_code == 1 and f.read_text() == TL104_FIXED  # fixed, nothing left, still 1
    assert "Found 1 error (1 fixed, 0 remaining)." in r.stdout
    r = invoke("--fix", "--exit-non-zero-on-fix", ".")  # nothing to fix: 0
    assert r.exit_code == 0
    f.write_text(TL104_SRC)
    assert invoke("--fix", "--exit-non-zero-on-fix", "--exit-zero", ".").exit_code == 0  # --exit-zero wins
    f.write_text(TL104_SRC)
    assert invoke("--fix", ".").exit_code == 0  # without it, all fixed is success


def test_exit_non_zero_on_fix_with_stdin(proj):
    r = invoke("--fix", "--exit-non-zero-on-fix", "--stdin-filename", "a.py", input=TL104_SRC)
    assert r.exit_code == 1 and r.stdout == TL104_FIXED
    r = invoke("--fix", "--exit-non-zero-on-fix", "--stdin-filename", "a.py", input=CLEAN_SRC)
    assert r.exit_code == 0 and r.stdout == CLEAN_SRC


def test_fix_only_fixes_and_does_not_report_what_remains(proj):
    f = proj / "a.py"
    f.write_text(BOTH)
    r = invoke("--fix-only", ".")
    assert r.exit_code == 0, r.output  # the unsafe finding remains: not reported, not exit 1
    assert r.stdout == "Fixed 1 error.\n"
    assert "torch.zeros(3, device=device)" in f.read_text() and "autograd.profiler" in f.read_text()
    r = invoke("--fix-only", ".")
    assert r.exit_code == 0 and r.stdout == ""
    r = invoke("--fix-only", "--unsafe-fixes", "--exit-non-zero-on-fix", ".")
    assert r.exit_code == 1 and r.stdout == "Fixed 1 error.\n" and "torch.profiler.profile(" in f.read_text()


def test_fix_only_with_stdin_prints_only_the_source(proj):
    r = invoke("--fix-only", "--stdin-filename", "a.py", input=BOTH)
    assert r.exit_code == 0
    assert "torch.zeros(3, device=device)" in r.stdout and "TL501" not in r.output


# --- --show-files, --show-settings ----------------------------------------------------


def _tree(proj):
    for rel in ("src/a.py", "src/b.ipynb", "gen/c.py", "build/d.py", "notes.txt"):
        p = proj / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(CLEAN_SRC if rel.endswith(".py") else "{}")


def test_show_files_lists_what_would_be_linted(proj):
    _tree(proj)
    r = invoke("--show-files", ".")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["gen/c.py", "src/a.py", "src/b.ipynb"]  # build/ is a default exclude
    r = invoke("--show-files", "--extend-exclude", "gen/", ".")
    assert r.stdout.splitlines() == ["src/a.py", "src/b.ipynb"]
    r = invoke("--show-files", "--exclude", "src", ".")  # replaces `exclude`, defaults included
    assert r.stdout.splitlines() == ["build/d.py", "gen/c.py"]
    r = invoke("--show-files", "nope")
    assert r.exit_code == 2 and "nope: no such file or directory" in r.stderr


def test_show_settings(proj):
    (proj / "pyproject.toml").write_text(
        '[tool.torchlint]\nignore = ["TL5"]\nunsafe-fixes = true\n[tool.torchlint.per-file-ignores]\n"tests/*" = ["TL1"]\n'
    )
    (proj / "tests").mkdir()
    (proj / "tests" / "t.py").write_text(CLEAN_SRC)
    r = invoke("--show-settings", "--extend-select", "TL104", "tests")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == f"Resolved settings for: {proj / 'tests' / 't.py'}"
    assert lines[1] == f"Settings path: {proj / 'pyproject.toml'}"
    assert 'ignore = ["TL5"]' in lines and 'extend-select = ["TL104"]' in lines
    assert 'per-file-ignores = {"tests/*" = ["TL1"]}' in lines
    enabled = next(ln for ln in lines if ln.startswith("enabled = "))
    assert '"TL401"' in enabled and '"TL104"' not in enabled and '"TL501"' not in enabled
    assert "unsafe-fixes = true" in lines and "respect-gitignore = true" in lines


# --- exclusions ----------------------------------------------------------------------


def test_cli_exclude_patterns_are_relative_to_the_current_folder(proj, monkeypatch):
    (proj / "pyproject.toml").write_text("[tool.torchlint]\n")
    for rel in ("pkg/gen/a.py", "pkg/b.py", "gen/c.py"):
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(CLEAN_SRC)
    monkeypatch.chdir(proj / "pkg")
    r = invoke("--show-files", "--extend-exclude", "/gen", ".")  # anchored at pkg/, not at the project root
    assert r.stdout.splitlines() == ["b.py"]


def test_force_exclude_in_config_and_on_the_command_line(proj):
    (proj / "gen").mkdir()
    (proj / "gen" / "a.py").write_text(TL104_SRC)
    (proj / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["gen/"]\n')
    assert invoke("gen/a.py").exit_code == 1  # named: linted
    assert invoke("gen").exit_code == 1
    r = invoke("--force-exclude", "gen/a.py")
    assert r.exit_code == 0 and "No Python files found" in r.stderr
    assert invoke("--force-exclude", "gen").exit_code == 0  # a named folder too
    (proj / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["gen/"]\nforce-exclude = true\n')
    assert invoke("gen/a.py").exit_code == 0
    assert invoke("--no-force-exclude", "gen/a.py").exit_code == 1


def test_respect_gitignore(proj):
    (proj / ".gitignore").write_text("ignored/\n")
    (proj / "ignored").mkdir()
    (proj / "ignored" / "a.py").write_text(TL104_SRC)
    assert invoke(".").exit_code == 0
    assert invoke("--no-respect-gitignore", ".").exit_code == 1
    (proj / "pyproject.toml").write_text("[tool.torchlint]\nrespect-gitignore = false\n")
    assert invoke(".").exit_code == 1
    assert invoke("--respect-gitignore", ".").exit_code == 0


# --- unsafe-fixes in the configuration -------------------------------------------------


def test_unsafe_fixes_in_config(proj):
    f = proj / "a.py"
    f.write_text(UNSAFE_SRC)
    (proj / "pyproject.toml").write_text("[tool.torchlint]\nunsafe-fixes = true\n")
    r = invoke("--output-format", "concise", ".")
    assert "TL501 [*]" in r.stdout  # counted as fixable
    r = invoke("--fix", "--no-unsafe-fixes", ".")
    assert r.exit_code == 1 and f.read_text() == UNSAFE_SRC
    r = invoke("--fix", ".")
    assert r.exit_code == 0 and "torch.profiler.profile(" in f.read_text()


def test_unsafe_fixes_false_hides_the_hint(proj):
    (proj / "a.py").write_text(UNSAFE_SRC)
    assert "hidden fix can be enabled" in invoke(".").stdout
    (proj / "pyproject.toml").write_text("[tool.torchlint]\nunsafe-fixes = false\n")
    r = invoke(".")
    assert r.exit_code == 1 and "hidden fix" not in r.stdout and "Found 1 error." in r.stdout
    assert "TL501 [*]" in invoke("--unsafe-fixes", "--output-format", "concise", ".").stdout


# --- --cache-dir -----------------------------------------------------------------------


def test_cache_dir_option_env_and_config(proj, tmp_path_factory):
    (proj / "a.py").write_text(TL104_SRC)
    elsewhere = tmp_path_factory.mktemp("cache") / "tl"
    r = invoke("--cache-dir", str(elsewhere), ".")
    assert r.exit_code == 1
    assert (elsewhere / "CACHEDIR.TAG").is_file() and not (proj / ".torchlint_cache").exists()
    assert invoke("--cache-dir", str(elsewhere), ".").stdout == r.stdout  # answered from it
    env_dir = tmp_path_factory.mktemp("cache") / "env"
    invoke(".", env={"TORCHLINT_CACHE_DIR": str(env_dir)})
    assert (env_dir / "CACHEDIR.TAG").is_file()
    (proj / "pyproject.toml").write_text('[tool.torchlint]\ncache-dir = ".cache/torchlint"\n')
    invoke(".")
    assert (proj / ".cache" / "torchlint" / "CACHEDIR.TAG").is_file() and not (proj / ".torchlint_cache").exists()
    unused = tmp_path_factory.mktemp("c") / "x"
    assert invoke("--no-cache", "--cache-dir", str(unused), ".").exit_code == 1 and not unused.exists()


@pytest.mark.parametrize(
    "body, message",
    [
        ("force-exclude = 1\n", "`force-exclude` must be true or false, not an integer"),
        ('respect-gitignore = "no"\n', "`respect-gitignore` must be true or false, not a string"),
        ("unsafe-fixes = []\n", "`unsafe-fixes` must be true or false, not a list"),
        ("cache-dir = 3\n", "`cache-dir` must be a path (a string), not an integer"),
        ('extend-exclude = "gen/"\n', "`extend-exclude` must be a list of strings, not a string"),
    ],
)
def test_new_config_keys_are_typed(proj, body, message):
    (proj / "pyproject.toml").write_text("[tool.torchlint]\n" + body)
    r = invoke(".")
    assert r.exit_code == 2 and message in r.stderr and str(proj / "pyproject.toml") in r.stderr


# --- rule --all ------------------------------------------------------------------------


def test_rule_all(proj):
    r = invoke("rule", "--all")
    assert r.exit_code == 0
    titles = [ln for ln in r.stdout.splitlines() if re.fullmatch(r"# [a-z0-9-]+ \(TL\d{3}\)", ln)]
    assert titles[0] == "# syntax-error (TL000)" and "# legacy-profiler (TL501)" in titles
    assert titles == sorted(titles, key=lambda t: t.rsplit("(", 1)[1])
    rules = json.loads(invoke("rule", "--all", "--output-format", "json").stdout)
    assert [x["code"] for x in rules] == sorted(x["code"] for x in rules) and len(rules) == len(titles)
    r = invoke("rule")
    assert r.exit_code == 2 and "give a rule code or --all" in r.output
    assert invoke("rule", "--all", "TL104").exit_code == 2


# --- --add-noqa ------------------------------------------------------------------------


def test_add_noqa(proj):
    f = proj / "a.py"
    f.write_text(BOTH)
    r = invoke("--add-noqa", ".")
    assert r.exit_code == 0, r.output
    assert r.stderr == "Added 2 noqa directives.\n" and r.stdout == ""
    text = f.read_text()
    assert "x = torch.zeros(3).to(device)  # noqa: TL104\n" in text
    assert "profile(use_cuda=True) as prof:  # noqa: TL501\n" in text
    assert invoke(".").exit_code == 0  # everything suppressed
    r = invoke("--add-noqa", ".")  # idempotent
    assert r.stderr == "Added 0 noqa directives.\n" and f.read_text() == text


def test_add_noqa_conflicts(proj):
    for other in ("--fix", "--diff", "--fix-only"):
        r = invoke("--add-noqa", other, ".")
        assert r.exit_code == 2 and f"--add-noqa cannot be used with {other}" in r.output
    r = invoke("--add-noqa", "--stdin-filename", "a.py", input=TL104_SRC)
    assert r.exit_code == 2


def test_add_noqa_read_only_file_is_a_problem(proj):
    ro = proj / "ro.py"
    ro.write_text(TL104_SRC)
    os.chmod(ro, 0o444)
    try:
        r = invoke("--add-noqa", ".")
    finally:
        os.chmod(ro, 0o644)
    assert r.exit_code == 2 and "ro.py: file is read-only" in r.stderr and ro.read_text() == TL104_SRC


# --- the CI formats through the CLI ----------------------------------------------------


@pytest.mark.parametrize("fmt", ["gitlab", "junit", "pylint", "rdjson"])
def test_ci_formats_from_the_command_line(proj, fmt):
    (proj / "a.py").write_text(TL104_SRC)
    r = invoke("--output-format", fmt, ".")
    assert r.exit_code == 1 and "TL104" in r.stdout
    assert "Found" not in r.stdout  # machine formats carry no summary
    r = invoke("--output-format", fmt, "-o", "out.txt", ".", env={"TORCHLINT_OUTPUT_FORMAT": None})
    assert r.stdout == "" and "TL104" in (proj / "out.txt").read_text()


def test_clean_removes_a_cache_dir_torchlint_made_and_nothing_else(proj, tmp_path_factory):
    (proj / "a.py").write_text(TL104_SRC)
    elsewhere = tmp_path_factory.mktemp("cache") / "tl"
    invoke("--cache-dir", str(elsewhere), ".")
    r = invoke("clean", "--cache-dir", str(elsewhere))
    assert r.exit_code == 0 and f"Removed {elsewhere}" in r.stdout and not elsewhere.exists()
    precious = tmp_path_factory.mktemp("precious")
    (precious / "data.txt").write_text("keep me\n")
    r = invoke("clean", "--cache-dir", str(precious))
    assert f"No torchlint cache at {precious}" in r.stdout and (precious / "data.txt").exists()
    (proj / "pyproject.toml").write_text('[tool.torchlint]\ncache-dir = ".cache/tl"\n')
    invoke(".")
    assert (proj / ".cache" / "tl").is_dir()
    r = invoke("clean")
    assert not (proj / ".cache" / "tl").exists(), r.stdout
