import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from torchlint.doors.cli import main

from helpers import BAD_SYNTAX, CLEAN_SRC, TL104_FIXED, TL104_SRC, UNSAFE_SRC

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCHLINT_OUTPUT_FORMAT", raising=False)
    return tmp_path


def invoke(*args, input=None, env=None):
    return CliRunner().invoke(main, list(args), input=input, env=env)


def test_default_command_is_check(proj):
    (proj / "a.py").write_text(TL104_SRC)
    plain = invoke("--output-format", "concise")
    explicit = invoke("check", "--output-format", "concise", ".")
    assert plain.exit_code == explicit.exit_code == 1
    assert plain.stdout == explicit.stdout
    assert "a.py:3:5: TL104 [*]" in plain.stdout


def test_exit_codes(proj):
    (proj / "clean.py").write_text(CLEAN_SRC)
    r = invoke("clean.py")
    assert r.exit_code == 0 and "All checks passed!" in r.stdout
    (proj / "a.py").write_text(TL104_SRC)
    assert invoke(".").exit_code == 1
    assert invoke("--exit-zero", ".").exit_code == 0
    r = invoke("missing.py")
    assert r.exit_code == 2 and "torchlint: error: missing.py: no such file or directory" in r.stderr
    assert invoke("--output-format", "xml", ".").exit_code == 2  # usage error


def test_fix_writes_and_clears(proj):
    f = proj / "a.py"
    f.write_text(TL104_SRC)
    r = invoke("--fix", "--show-fixes", ".")
    assert r.exit_code == 0, r.output
    assert f.read_text() == TL104_FIXED
    assert "Found 1 error (1 fixed, 0 remaining)." in r.stdout
    assert "- a.py: 1 fix" in r.stdout
    assert invoke(".").exit_code == 0


def test_diff_writes_nothing_and_exits_1(proj):
    f = proj / "a.py"
    f.write_text(TL104_SRC)
    r = invoke("--diff", ".")
    assert r.exit_code == 1
    assert "+x = torch.zeros(3, device=device)" in r.stdout
    assert "Would fix 1 error in 1 file." in r.stderr
    assert f.read_text() == TL104_SRC
    (proj / "a.py").write_text(CLEAN_SRC)
    assert invoke("--diff", ".").exit_code == 0


def test_unsafe_fixes_gating(proj):
    f = proj / "a.py"
    f.write_text(UNSAFE_SRC)
    r = invoke("--fix", "--output-format", "concise", ".")
    assert r.exit_code == 1 and f.read_text() == UNSAFE_SRC
    assert "TL501 Legacy" in r.stdout  # no [*]: not applicable without --unsafe-fixes
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option" in r.stdout
    r = invoke("--fix", "--unsafe-fixes", ".")
    assert r.exit_code == 0 and "torch.profiler.profile(" in f.read_text()


def test_stdin_lint_and_fix(proj):
    r = invoke("--output-format", "concise", "--stdin-filename", "pkg/x.py", "-", input=TL104_SRC)
    assert r.exit_code == 1 and r.stdout.startswith("pkg/x.py:3:5: TL104")
    r = invoke("--fix", "--stdin-filename", "x.py", "-", input=UNSAFE_SRC + TL104_SRC.replace("import torch\n", ""))
    assert r.exit_code == 1
    assert "x = torch.zeros(3, device=device)" in r.stdout  # fixed source on stdout
    assert "TL501" in r.stderr and "TL501" not in r.stdout  # remaining findings on stderr
    r = invoke("--fix", "-", input=TL104_SRC)
    assert r.exit_code == 0 and r.stdout == TL104_FIXED
    r = invoke("--diff", "-", input=TL104_SRC)
    assert r.exit_code == 1 and "+x = torch.zeros(3, device=device)" in r.stdout


def test_select_ignore_and_prefixes(proj):
    (proj / "a.py").write_text(TL104_SRC + UNSAFE_SRC.replace("import torch\n", ""))

    def codes(*args):
        r = invoke("--output-format", "json", *args, ".")
        return sorted({f["code"] for f in json.loads(r.stdout)})

    assert codes() == ["TL104", "TL501"]
    assert codes("--select", "TL1") == ["TL104"]
    assert codes("--select", "TL104,TL5") == ["TL104", "TL501"]
    assert codes("--select", "TL1", "--extend-select", "TL501") == ["TL104", "TL501"]
    assert codes("--ignore", "TL5") == ["TL104"]
    assert codes("--select", "TL104", "--ignore", "TL104") == []


def test_cli_select_overrides_config(proj):
    (proj / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL5"]\n')
    (proj / "a.py").write_text(TL104_SRC + UNSAFE_SRC.replace("import torch\n", ""))
    r = invoke("--output-format", "json", ".")
    assert [f["code"] for f in json.loads(r.stdout)] == ["TL501"]
    r = invoke("--output-format", "json", "--select", "TL104", ".")
    assert [f["code"] for f in json.loads(r.stdout)] == ["TL104"]


@pytest.mark.parametrize(
    "toml, args, message",
    [
        ('[tool.torchlint]\nselct = ["TL1"]\n', [], "unknown key 'selct'"),
        ('[tool.torchlint]\nselect = ["TL999"]\n', [], "unknown rule selector 'TL999'"),
        ('[tool.torchlint]\nselect = "TL1\n', [], "invalid TOML"),
        ("", ["--select", "XX1"], "unknown rule selector 'XX1'"),
    ],
)
def test_config_errors_are_one_line_exit_2(proj, toml, args, message):
    if toml:
        (proj / "pyproject.toml").write_text(toml)
    (proj / "a.py").write_text(CLEAN_SRC)
    r = invoke(*args, ".")
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("torchlint: error: ") and message in r.stderr
    assert "Traceback" not in r.output


def test_config_flag(proj):
    cfg = proj / "conf" / "tl.toml"
    cfg.parent.mkdir()
    cfg.write_text('[tool.torchlint]\nignore = ["TL104"]\n')
    (proj / "a.py").write_text(TL104_SRC)
    assert invoke("--config", str(cfg), ".").exit_code == 0
    r = invoke("--config", "nope.toml", ".")
    assert r.exit_code == 2 and "config file not found" in r.stderr


def test_per_file_ignores(proj):
    (proj / "pyproject.toml").write_text('[tool.torchlint]\nper-file-ignores = { "tests/*" = ["TL1"] }\n')
    (proj / "tests").mkdir()
    (proj / "tests" / "t.py").write_text(TL104_SRC)
    (proj / "a.py").write_text(TL104_SRC)
    r = invoke("--output-format", "json", ".")
    assert [os.path.basename(f["filename"]) for f in json.loads(r.stdout)] == ["a.py"]


def test_bad_file_is_tl000_others_still_linted(proj):
    (proj / "bad.py").write_text(BAD_SYNTAX)
    (proj / "bin.py").write_bytes(b"\x00\x01\x02binary")
    (proj / "good.py").write_text(TL104_SRC)
    r = invoke("--output-format", "concise", "--select", "TL104", ".")
    assert r.exit_code == 1
    lines = [ln for ln in r.stdout.splitlines() if ln.endswith(("directly", "file")) or "TL000" in ln]
    assert [ln.split(":")[0] for ln in lines] == ["bad.py", "bin.py", "good.py"]
    assert "cannot decode file" in r.stdout and "Traceback" not in r.output


def test_output_file_and_env_format(proj):
    (proj / "a.py").write_text(TL104_SRC)
    r = invoke("-o", "report.json", ".", env={"TORCHLINT_OUTPUT_FORMAT": "json"})
    assert r.exit_code == 1 and r.stdout == ""
    assert json.loads((proj / "report.json").read_text())[0]["code"] == "TL104"


def test_statistics(proj):
    (proj / "a.py").write_text(TL104_SRC + "y = torch.zeros(2).to(device)\n")
    r = invoke("--statistics", ".")
    # As in Ruff, the table is followed by the summary (issue 27: it was missing).
    assert r.exit_code == 1
    assert r.stdout == "2\tTL104\t[*] create-then-move\nFound 2 errors.\n[*] 2 fixable with the `--fix` option.\n"
    assert invoke("--statistics", "-q", ".").stdout == "2\tTL104\t[*] create-then-move\n"
    assert json.loads(invoke("--statistics", "--output-format", "json", ".").stdout)[0]["count"] == 2
    (proj / "a.py").write_text(CLEAN_SRC)
    assert invoke("--statistics", ".").stdout == "All checks passed!\n"


def test_version_forms(proj):
    """Issue 27: `-V` and `torchlint version`, as in Ruff, besides `--version`."""
    for args in (["--version"], ["-V"], ["version"]):
        r = invoke(*args)
        assert (r.exit_code, r.stdout) == (0, "torchlint 0.1.0\n"), args
    assert json.loads(invoke("version", "--output-format", "json").stdout) == {"version": "0.1.0"}


def test_diff_summary_names_the_fixes_unsafe_fixes_would_apply(proj):
    """Issue 27: with only unsafe fixes, `--diff` said "Would fix 0 errors in 0 files."."""
    (proj / "a.py").write_text(UNSAFE_SRC)
    r = invoke("--diff", ".")
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr == "No errors would be fixed (1 fix available with `--unsafe-fixes`).\n"
    r = invoke("--diff", "--unsafe-fixes", ".")
    assert r.exit_code == 1 and r.stderr == "Would fix 1 error in 1 file.\n"
    (proj / "b.py").write_text(TL104_SRC)
    r = invoke("--diff", ".")
    assert r.stderr == "Would fix 1 error in 1 file (1 additional fix available with `--unsafe-fixes`).\n"
    (proj / "pyproject.toml").write_text("[tool.torchlint]\nunsafe-fixes = false\n")
    assert invoke("--diff", ".").stderr == "Would fix 1 error in 1 file.\n"
    (proj / "b.py").unlink()
    (proj / "a.py").write_text(CLEAN_SRC)
    assert invoke("--diff", ".").stderr == "No errors would be fixed.\n"


def test_rules_table_is_wrapped_to_the_terminal(proj):
    """Issue 27: `torchlint rules` printed 900-character lines."""
    for columns in ("80", "120"):
        r = invoke("rules", env={"COLUMNS": columns})
        lines = r.stdout.splitlines()
        assert r.exit_code == 0 and max(len(line) for line in lines) <= int(columns), columns
        assert all(code in r.stdout for code in ("TL000", "TL104", "TL501"))


def test_accepted_options(proj):
    (proj / "a.py").write_text(CLEAN_SRC)
    assert invoke("--no-cache", "-j", "2", "-q", ".").exit_code == 0


def test_unexpected_exception_is_one_line(proj, monkeypatch):
    import torchlint.files.runner

    def boom(*a, **k):
        raise RuntimeError("kaput")

    monkeypatch.setattr(torchlint.files.runner, "run", boom)
    monkeypatch.delenv("TORCHLINT_DEBUG", raising=False)
    r = invoke(".")
    assert r.exit_code == 2
    assert r.stderr.startswith("torchlint: error: internal error: RuntimeError: kaput") and r.stderr.count("\n") == 1


def test_rules_and_rule(proj):
    r = invoke("rules")
    assert r.exit_code == 0 and "TL104" in r.stdout and "create-then-move" in r.stdout
    rows = json.loads(invoke("rules", "--output-format", "json").stdout)
    assert [x["code"] for x in rows][:1] == ["TL000"] and {"code", "name", "fix"} <= set(rows[1])
    r = invoke("rule", "TL104")
    assert r.exit_code == 0 and r.stdout.startswith("# create-then-move (TL104)") and "## What it does" in r.stdout
    doc = json.loads(invoke("rule", "tl501", "--output-format", "json").stdout)
    assert doc["code"] == "TL501" and doc["name"] == "legacy-profiler"
    r = invoke("rule", "TL999")
    assert r.exit_code == 2 and "unknown rule code 'TL999'" in r.stderr


def _subprocess(*args, cwd, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, input=stdin, timeout=120
    )


def test_python_m_torchlint_subprocess(tmp_path):
    (tmp_path / "a.py").write_text(TL104_SRC)
    r = _subprocess("-m", "torchlint", "--output-format", "concise", ".", cwd=tmp_path)
    assert r.returncode == 1 and "a.py:3:5: TL104" in r.stdout
    r = _subprocess("-m", "torchlint", "check", "--fix", "--stdin-filename", "a.py", "-", cwd=tmp_path, stdin=TL104_SRC)
    assert r.returncode == 0 and r.stdout == TL104_FIXED


def test_cli_never_imports_torch(tmp_path):
    (tmp_path / "a.py").write_text(TL104_SRC)
    code = (
        "import sys\n"
        "import torchlint.doors.cli\n"
        "assert 'torch' not in sys.modules, 'import torchlint.doors.cli imported torch'\n"
        "try:\n"
        "    torchlint.doors.cli.main(['check', '--output-format', 'json', '.'], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "leaked = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('LEAKED', leaked)\n"
    )
    r = _subprocess("-c", code, cwd=tmp_path)
    assert "LEAKED []" in r.stdout, r.stdout + r.stderr
    assert '"code": "TL104"' in r.stdout


def test_output_bytes_do_not_depend_on_hash_seed(tmp_path):
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text(TL104_SRC + UNSAFE_SRC.replace("import torch\n", ""))
    (tmp_path / "bad.py").write_text(BAD_SYNTAX)
    outputs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=seed)
        r = subprocess.run(
            [sys.executable, "-m", "torchlint", "--output-format", "sarif", "."],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert r.returncode == 1
        outputs.add(r.stdout)
    assert len(outputs) == 1


def test_read_only_file_under_fix_exits_2_after_fixing_others(proj):
    ro, rw = proj / "ro.py", proj / "rw.py"
    ro.write_text(TL104_SRC)
    rw.write_text(TL104_SRC)
    os.chmod(ro, 0o444)
    try:
        r = invoke("--fix", "--output-format", "concise", ".")
    finally:
        os.chmod(ro, 0o644)
    assert r.exit_code == 2
    assert r.stderr == "torchlint: error: ro.py: file is read-only; fixes not written\n"
    assert "ro.py:3:5: TL104" in r.stdout
    assert ro.read_text() == TL104_SRC and rw.read_text() == TL104_FIXED


# Two findings whose fixes are the same edit: both TL201 calls in one loop are
# fixed by wrapping that loop once.
SAME_FIX = (
    "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.load_state_dict(torch.load('m.pt'))\nmodel.eval()\n"
    "for x in data:\n    y = model(x)\n    z = model(y)\n"
)


def test_fix_counts_findings_not_edits(proj):
    """`--fix` says how many findings it fixed, as Ruff does: two findings that
    share one edit are two fixed, so the total matches what check reported."""
    f = proj / "a.py"
    f.write_text(SAME_FIX)
    check = invoke("--select", "TL201", "--unsafe-fixes", ".")
    assert "Found 2 errors." in check.stdout
    diff = invoke("--select", "TL201", "--diff", "--unsafe-fixes", ".")
    assert "Would fix 2 errors in 1 file." in diff.stderr
    fixed = invoke("--select", "TL201", "--fix", "--unsafe-fixes", ".")
    assert fixed.exit_code == 0, fixed.output
    assert "Found 2 errors (2 fixed, 0 remaining)." in fixed.stdout
    assert f.read_text().count("no_grad()") == 1


class _Crash(cst.Name):
    """A replacement whose code generation fails: a fix that crashes when built."""

    def _codegen_impl(self, state, default_semicolon=False):
        raise RuntimeError("fix bug")


@pytest.mark.parametrize("suppressed", [True, False])
def test_crashing_fix_on_a_suppressed_finding_does_not_change_the_exit_code(proj, monkeypatch, suppressed):
    """Fixes are built only for findings that survive suppression: a fix that
    would crash on a `# noqa`'d finding is never built. Unsuppressed, the same
    crash is a problem (exit 2) and the finding is still reported."""
    from torchlint.rules import rule_by_code

    def check(self, ctx):
        for call in ctx.facts.calls:
            if call.method == "cuda":
                ctx.report(call.node, replacements={call.node: _Crash("x")})

    monkeypatch.setattr(rule_by_code("TL104"), "check", check)
    comment = "  # noqa: TL104" if suppressed else ""
    (proj / "a.py").write_text(f"import torch\nx = torch.zeros(2).cuda(){comment}\n")
    r = invoke("--no-cache", "--output-format", "concise", ".")
    if suppressed:
        assert r.exit_code == 0 and "All checks passed!" in r.stdout and r.stderr == ""
    else:
        assert r.exit_code == 2 and "a.py:2:5: TL104" in r.stdout
        assert "internal error building fix: RuntimeError: fix bug" in r.stderr


# --- what a new user trips over ----------------------------------------------------------


def test_stdin_filename_without_dash_reads_stdin_and_leaves_the_folder_alone(proj):
    """`cat a.py | torchlint --fix --stdin-filename a.py` (how editors call it)
    reads stdin, as Ruff does: it must not lint, let alone fix, the current folder."""
    for name in ("a.py", "b.py", "c.py"):
        (proj / name).write_text(TL104_SRC)
    r = invoke("--fix", "--stdin-filename", "a.py", input=UNSAFE_SRC)
    assert r.stdout == UNSAFE_SRC  # stdin, not a.py's contents, comes back (nothing safe to fix)
    assert "a.py:" in r.stderr and "TL501" in r.stderr and "TL104" not in r.stderr
    for name in ("a.py", "b.py", "c.py"):
        assert (proj / name).read_text() == TL104_SRC, name
    r = invoke("--fix", "--stdin-filename", "a.py", input=TL104_SRC)
    assert r.exit_code == 0 and r.stdout == TL104_FIXED
    assert (proj / "a.py").read_text() == TL104_SRC
    r = invoke("--output-format", "concise", "--stdin-filename", "pkg/x.py", input=TL104_SRC)
    assert r.exit_code == 1 and r.stdout.startswith("pkg/x.py:3:5: TL104")


def test_stdin_filename_with_other_paths_ignores_them_with_a_warning(proj):
    (proj / "b.py").write_text(TL104_SRC)
    r = invoke("--output-format", "concise", "--stdin-filename", "a.py", "b.py", input=CLEAN_SRC)
    assert r.exit_code == 0 and "b.py" not in r.stdout
    assert "torchlint: warning: ignoring b.py in favor of standard input" in r.stderr


def test_stdin_filename_excluded_with_force_exclude_is_echoed_unchanged(proj):
    (proj / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["gen/"]\nforce-exclude = true\n')
    r = invoke("--fix", "--stdin-filename", "gen/a.py", input=TL104_SRC)
    assert r.exit_code == 0 and r.stdout == TL104_SRC and r.stderr == ""


def test_missing_path_never_says_all_checks_passed(proj):
    r = invoke("nope.py")
    assert r.exit_code == 2 and "All checks passed!" not in r.stdout
    assert r.stderr == "torchlint: error: nope.py: no such file or directory\n"
    (proj / "clean.py").write_text(CLEAN_SRC)
    r = invoke("clean.py", "nope.py")
    assert r.exit_code == 2 and "All checks passed!" not in r.stdout


def test_a_run_that_lints_nothing_says_so(proj):
    (proj / "empty").mkdir()
    (proj / "empty" / "notes.txt").write_text("no python here\n")
    r = invoke("empty")
    assert r.exit_code == 0
    assert "All checks passed!" not in r.stdout
    assert r.stderr == "torchlint: warning: No Python files found under the given path(s)\n"
    r = invoke("--output-format", "json", "empty")  # machine formats stay well-formed
    assert json.loads(r.stdout) == [] and "No Python files found" in r.stderr


def test_a_folder_named_on_the_command_line_is_linted_though_gitignored(proj):
    """`torchlint data/checkouts/` where a .gitignore above ignores it: the
    named folder is linted (as Ruff does); only what is inside it is filtered."""
    (proj / ".git").mkdir()
    (proj / ".gitignore").write_text("data/checkouts/\n*_gen.py\n")
    inner = proj / "data" / "checkouts"
    inner.mkdir(parents=True)
    (inner / "train.py").write_text(TL104_SRC)
    (inner / "model_gen.py").write_text(TL104_SRC)
    r = invoke("--output-format", "concise", "data/checkouts/")
    assert r.exit_code == 1, r.output
    assert r.stdout.startswith("data/checkouts/train.py:3:5: TL104 [*] ")
    assert "model_gen.py" not in r.stdout  # found inside it: .gitignore still applies
    # walking the repository still skips it
    (proj / "top.py").write_text(CLEAN_SRC)
    r = invoke("--output-format", "concise", ".")
    assert r.exit_code == 0 and "All checks passed!" in r.stdout


def test_bad_code_in_config_names_the_file(proj):
    (proj / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL999"]\n')
    (proj / "a.py").write_text(CLEAN_SRC)
    r = invoke(".")
    assert r.exit_code == 2
    assert r.stderr.startswith(
        f"torchlint: error: {proj / 'pyproject.toml'}: unknown rule selector 'TL999' in `ignore`"
    )
    (proj / "pyproject.toml").unlink()
    r = invoke("--select", "TL998", ".")
    assert r.exit_code == 2 and "error: unknown rule selector 'TL998' in --select" in r.stderr


def test_string_instead_of_list_in_config_is_an_error(proj):
    (proj / "pyproject.toml").write_text('[tool.torchlint]\nselect = "TL1"\n')
    (proj / "a.py").write_text(CLEAN_SRC)
    r = invoke(".")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "`select` must be a list of strings, not a string" in r.stderr and 'select = ["TL1"]' in r.stderr


def test_unknown_code_in_noqa_is_a_warning(proj):
    (proj / "a.py").write_text(TL104_SRC.replace(".to(device)\n", ".to(device)  # noqa: TL999\n"))
    (proj / "b.py").write_text("import os  # noqa: E501, F401\nx = 1  # torchlint: ignore[XYZ1]\n")
    r = invoke("--output-format", "concise", ".")
    assert r.exit_code == 1  # a warning leaves the exit code alone; TL104 is still reported
    assert "a.py:3:5: TL104" in r.stdout
    assert r.stderr.splitlines() == [
        "torchlint: warning: a.py:3: unknown rule code 'TL999' in `# noqa` (see `torchlint rules`); it suppresses nothing",
        "torchlint: warning: b.py:2: unknown rule code 'XYZ1' in `# torchlint: ignore[...]` (see `torchlint rules`); "
        "it suppresses nothing",
    ]
    # also from the cache
    assert invoke("--output-format", "concise", ".").stderr == r.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_symlink_loop_and_fifo_named_explicitly_are_one_line_errors(proj):
    os.symlink("loop", proj / "loop")
    os.mkfifo(proj / "pipe.py")
    (proj / "a.py").write_text(CLEAN_SRC)
    r = invoke("loop")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == "torchlint: error: loop: symlink loop (too many levels of symbolic links)\n"
    r = invoke("pipe.py")
    assert r.exit_code == 2 and "All checks passed!" not in r.stdout
    assert r.stderr == "torchlint: error: pipe.py: not a regular file: a FIFO (named pipe); skipped\n"
    r = invoke("a.py", "loop", "pipe.py")  # the others are still linted
    assert r.exit_code == 2 and r.stderr.count("\n") == 2


INTERRUPT_DRIVER = """
import os, signal, sys, time

import torchlint.files.parallel
import torchlint.engine.pipeline

torchlint.files.parallel.MIN_POOL_WEIGHT = 0  # a pool even for these small files
lint = torchlint.engine.pipeline.process_bytes


def slow(data, path, *args, **kwargs):
    if path.endswith("f10.py"):  # what Ctrl-C in a terminal does: SIGINT to the whole group
        os.killpg(os.getpgid(0), signal.SIGINT)
    time.sleep(0.05)
    return lint(data, path, *args, **kwargs)


torchlint.engine.pipeline.process_bytes = slow
if __name__ == "__main__":
    from torchlint.doors.cli import main

    main(sys.argv[1:])
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "killpg") or os.name != "posix", reason="needs POSIX process groups")
@pytest.mark.parametrize("jobs", ["2", "4"])
def test_ctrl_c_during_a_parallel_run_prints_one_line(tmp_path, jobs):
    for i in range(40):
        (tmp_path / f"f{i}.py").write_text(TL104_SRC)
    driver = tmp_path / "driver.py.txt"
    driver.write_text(INTERRUPT_DRIVER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TORCHLINT_MP_START="fork")
    r = subprocess.run(
        [sys.executable, str(driver), "--no-cache", "-j", jobs, "."],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a guard: before the fix, -j 4 could hang here
        start_new_session=True,  # its own process group, so the signal stays there
    )
    assert r.stderr == "torchlint: error: interrupted\n"
    assert r.returncode == 130


STUCK_DRIVER = """
import os, signal, sys, time

import torchlint.files.parallel
import torchlint.engine.pipeline

torchlint.files.parallel.MIN_POOL_WEIGHT = 0
lint = torchlint.engine.pipeline.process_bytes


def slow(data, path, *args, **kwargs):
    with open(os.path.join("pids", str(os.getpid())), "w"):
        pass
    if path.endswith("f0.py"):  # a file that takes "forever" to lint
        open("stuck", "w").close()
        time.sleep(3600)
    if path.endswith("f10.py"):  # Ctrl-C while the other worker is stuck in f0.py
        for _ in range(600):
            if os.path.exists("stuck"):
                break
            time.sleep(0.1)
        os.killpg(os.getpgid(0), signal.SIGINT)
    return lint(data, path, *args, **kwargs)


torchlint.engine.pipeline.process_bytes = slow
if __name__ == "__main__":
    from torchlint.doors.cli import main

    main(sys.argv[1:])
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "killpg") or os.name != "posix", reason="needs POSIX process groups")
def test_ctrl_c_ends_the_workers_it_does_not_wait_for_them(tmp_path):
    """Issue 27: after Ctrl-C the process printed "interrupted" at once but
    exited only when the workers had finished their items (the worker list
    was read after `shutdown()` cleared it). A worker stuck for an hour must
    not keep it: the run ends (the timeout is a guard, not a measurement)
    and no worker outlives it."""
    for i in range(40):
        (tmp_path / f"f{i}.py").write_text(TL104_SRC)
    (tmp_path / "pids").mkdir()
    driver = tmp_path / "driver.py.txt"
    driver.write_text(STUCK_DRIVER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TORCHLINT_MP_START="fork")
    proc = subprocess.Popen(
        [sys.executable, str(driver), "--no-cache", "-j", "2", "."],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the signal, and the cleanup, stay there
    )
    try:
        _, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers
        proc.communicate()
        pytest.fail("the interrupted run did not exit: it waited for its workers")
    assert stderr == "torchlint: error: interrupted\n"
    assert proc.returncode == 130
    workers = [int(p.name) for p in (tmp_path / "pids").iterdir()]
    assert len(workers) == 2 and (tmp_path / "stuck").exists()
    alive = []
    for pid in workers:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    for pid in alive:  # clean up before failing
        os.kill(pid, signal.SIGKILL)
    assert alive == [], "workers outlived the interrupted run"


@pytest.fixture
def unreadable(proj, monkeypatch):
    """`secret.py` cannot be read (EACCES), even by root."""
    import builtins
    import errno

    target = proj / "secret.py"
    target.write_text(TL104_SRC)
    real_open = builtins.open

    def deny(path, *args, **kwargs):
        if os.path.abspath(str(path)) == str(target):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", deny)
    (proj / "a.py").write_text(TL104_SRC)
    return target


@pytest.mark.parametrize(
    "fmt", ["full", "concise", "json", "json-lines", "github", "gitlab", "junit", "pylint", "rdjson", "sarif"]
)
def test_an_unreadable_file_is_a_tl001_finding_in_every_format(unreadable, fmt):
    """Issue 27: an unreadable file was reported only on stderr, not in
    JSON/SARIF; Ruff reports it as an E902 finding. torchlint's is TL001."""
    r = invoke("--no-cache", "-j", "1", "--output-format", fmt, ".")
    assert r.exit_code == 1 and r.stderr == "", r.stderr
    assert "TL001" in r.stdout and "Cannot read the file: Permission denied" in r.stdout
    assert "TL104" in r.stdout  # the other file is still linted
    if fmt == "json":
        codes = [(os.path.basename(f["filename"]), f["code"]) for f in json.loads(r.stdout)]
        assert codes == [("a.py", "TL104"), ("secret.py", "TL001")]
    if fmt == "sarif":
        results = json.loads(r.stdout)["runs"][0]["results"]
        tl001 = [x for x in results if x["ruleId"] == "TL001"]
        assert len(tl001) == 1 and tl001[0]["level"] == "error"


def test_an_unreadable_file_in_diff_mode_is_a_problem(unreadable):
    r = invoke("--no-cache", "-j", "1", "--diff", ".")
    assert r.exit_code == 2
    assert "torchlint: error: secret.py: cannot read the file: Permission denied" in r.stderr
