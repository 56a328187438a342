"""What a newcomer is told: the preview hint at the end of a run, selections
that need preview, a misspelt command, a named file the CLI must still lint,
and the install hints of the server and `verify --smoke`."""

from __future__ import annotations

import builtins
import importlib.util

import pytest
from click.testing import CliRunner

from torchlint.config import Settings
from torchlint.doors.cli import main
from torchlint.rules import CATALOG, preview_codes

from helpers import TL104_SRC

# TL303 (`stable_rule`) reports this loader without preview mode; the rest of its findings need preview.
LOADER = (
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "device = torch.device('cuda')\n"
    "loader = DataLoader(range(10), batch_size=4, num_workers=2)\n"
    "for x in loader:\n"
    "    y = x.to(device)\n"
)


@pytest.fixture
def proj(tmp_path, monkeypatch):
    """A project run without preview mode (the suite's conftest turns it on)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCHLINT_PREVIEW", raising=False)
    monkeypatch.delenv("TORCHLINT_OUTPUT_FORMAT", raising=False)
    (tmp_path / "a.py").write_text(TL104_SRC)
    return tmp_path


def invoke(*args, input=None):
    return CliRunner().invoke(main, ["--no-cache" if a == "<nc>" else a for a in args], input=input)


def hint_lines(stderr: str):
    return [line for line in stderr.splitlines() if line.startswith("torchlint: hint:")]


def test_a_run_says_how_many_preview_rules_are_off_once_at_the_end(proj, only_stable_rule):
    r = invoke("check", "--no-cache", ".")
    assert r.exit_code == 0 and "All checks passed!" in r.stdout  # TL104 is a preview rule
    hints = hint_lines(r.stderr)
    off = len(preview_codes())
    assert off == len(CATALOG) - 3  # all but TL000, TL001 and the stable rule
    assert hints == [
        f"torchlint: hint: {off} preview rules are off; `--preview` (or `preview = true` in the "
        "configuration) turns them on"
    ]
    assert r.stderr.rstrip().splitlines()[-1] == hints[0]  # last
    assert "hint" not in r.stdout


ONLY_ALWAYS_REPORTED = ", so this run checked only that the files parse and can be read"


def test_with_no_stable_rule_the_hint_says_the_run_only_checked_that_files_parse(proj, no_stable_rule):
    r = invoke("check", "--no-cache", ".")
    assert r.exit_code == 0 and r.stdout == "All checks passed!\n", r.output  # as documented: nothing found
    assert hint_lines(r.stderr) == [
        f"torchlint: hint: {len(CATALOG) - 2} preview rules are off{ONLY_ALWAYS_REPORTED}; `--preview` "
        "(or `preview = true` in the configuration) turns them on"
    ]
    assert r.stderr.rstrip().splitlines()[-1] == hint_lines(r.stderr)[0] and "Traceback" not in r.output
    (proj / "b.py").write_text("def f(:\n")  # TL000 is still reported
    r = invoke("check", "--no-cache", "--output-format", "concise", ".")
    assert r.exit_code == 1 and "b.py:1:7: TL000" in r.stdout and ONLY_ALWAYS_REPORTED in r.stderr
    r = invoke("check", "--no-cache", "--preview", ".")
    assert r.exit_code == 1 and "TL104" in r.stdout and not hint_lines(r.stderr)


def test_a_selection_of_preview_rules_only_gets_the_same_hint(proj, only_stable_rule):
    r = invoke("check", "--no-cache", "--select", "TL104", ".")
    assert hint_lines(r.stderr) == [
        f"torchlint: hint: 1 preview rule is off{ONLY_ALWAYS_REPORTED}; `--preview` "
        "(or `preview = true` in the configuration) turns them on"
    ]
    r = invoke("check", "--no-cache", "--select", f"TL104,{only_stable_rule}", ".")
    assert ONLY_ALWAYS_REPORTED not in r.stderr and hint_lines(r.stderr)[0].startswith("torchlint: hint: 1 preview")


def test_the_default_run_hint_for_the_recorded_statuses(proj):
    """What a user meets now, with the catalog as generated."""
    r = invoke("check", "--no-cache", ".")
    off = len(preview_codes())
    only = ONLY_ALWAYS_REPORTED if off == len(CATALOG) - 2 else ""
    assert r.exit_code == 0 and hint_lines(r.stderr) == [
        f"torchlint: hint: {off} preview rules are off{only}; `--preview` (or `preview = true` in the "
        "configuration) turns them on"
    ]


@pytest.mark.parametrize("fmt", ["json", "sarif", "junit", "concise"])
def test_the_hint_never_reaches_stdout(proj, fmt):
    r = invoke("check", "--no-cache", "--output-format", fmt, ".")
    assert "preview rules are off" not in r.stdout and len(hint_lines(r.stderr)) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["-q"],
        ["--quiet"],
        ["--preview"],
        ["--stdin-filename", "a.py"],  # an editor's call
    ],
)
def test_no_hint(proj, args):
    r = invoke("check", "--no-cache", *args, input=TL104_SRC if "--stdin-filename" in args else None)
    assert not hint_lines(r.stderr), r.stderr


def test_no_hint_when_the_selection_holds_no_preview_rule(proj, stable_rule):
    r = invoke("check", "--no-cache", "--select", stable_rule, ".")  # nothing is off
    assert r.exit_code == 0 and not hint_lines(r.stderr), r.stderr
    r = invoke("check", "--no-cache", "--select", stable_rule, "--extend-select", "TL104", ".")
    assert hint_lines(r.stderr)[0].startswith("torchlint: hint: 1 preview rule is off;")  # it can fail


def test_the_hint_counts_the_preview_rules_the_selection_would_run(proj, only_stable_rule):
    r = invoke("check", "--no-cache", "--select", "TL3", ".")
    off = sorted(c for c in preview_codes() if c.startswith("TL3"))
    assert hint_lines(r.stderr) == [
        f"torchlint: hint: {len(off)} preview rules are off; `--preview` (or `preview = true` in the "
        "configuration) turns them on"
    ]
    r = invoke("check", "--no-cache", "--select", "TL303,TL401", ".")
    assert hint_lines(r.stderr)[0].startswith("torchlint: hint: 1 preview rule is off;")
    assert Settings(select=("TL3",)).preview_rules_off() == frozenset(off)


def test_the_hint_after_fix_diff_and_add_noqa(proj, stable_rule):
    (proj / "b.py").write_text(LOADER)
    for args in (["--fix"], ["--diff"], ["--fix-only"], ["--add-noqa"]):
        r = invoke("check", "--no-cache", *args, ".")
        assert len(hint_lines(r.stderr)) == 1, (args, r.stderr)
    assert "pin_memory=" in (proj / "b.py").read_text()  # --fix fixed the stable rule's finding


def test_the_hint_is_not_given_when_no_file_was_linted(proj):
    (proj / "a.py").unlink()
    r = invoke("check", "--no-cache", ".")
    assert "No Python files found" in r.stderr and not hint_lines(r.stderr)


# -- selections that need preview -------------------------------------------------------------


def test_a_prefix_of_preview_rules_only_warns_like_an_exact_code(proj, only_stable_rule):
    r = invoke("check", "--no-cache", "--select", "TL1", ".")
    assert (
        "torchlint: warning: selection `TL1` has no effect because preview is not enabled (it selects only "
        "preview rules; use --preview or `preview = true`)" in r.stderr
    )
    r = invoke("check", "--no-cache", "--select", "TL1,TL401", ".")
    assert "selection `TL1` has no effect" in r.stderr and "selection `TL401` has no effect" in r.stderr


@pytest.mark.parametrize("selector", ["TL3", "TL30", "TL", "ALL", "TL303"])
def test_a_selector_that_holds_a_stable_rule_does_not_warn(proj, stable_rule, selector):
    r = invoke("check", "--no-cache", "--select", selector, ".")
    assert "has no effect" not in r.stderr


def test_no_selection_warning_in_preview_mode(proj):
    r = invoke("check", "--no-cache", "--preview", "--select", "TL1,TL401", ".")
    assert "has no effect" not in r.stderr and r.exit_code == 1


def test_a_preview_only_selection_in_the_configuration_warns_too(proj, only_stable_rule):
    (proj / "pyproject.toml").write_text('[tool.torchlint]\nextend-select = ["TL40"]\n')
    r = invoke("check", "--no-cache", ".")
    assert "selection `TL40` has no effect because preview is not enabled" in r.stderr


# -- a misspelt command -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "word,match", [("chek", "check"), ("sever", "server"), ("verfy", "verify"), ("cleam", "clean")]
)
def test_a_misspelt_command_is_a_usage_error_with_a_suggestion(proj, word, match):
    r = invoke(word, ".")
    assert r.exit_code == 2
    assert f"unrecognized subcommand '{word}'; did you mean '{match}'?" in r.stderr
    assert "All checks passed" not in r.stdout


def test_a_path_that_looks_like_a_command_is_still_a_path(proj, stable_rule):
    (proj / "chek").mkdir()
    (proj / "chek" / "b.py").write_text(LOADER)
    r = invoke("chek", "--no-cache", "--output-format", "concise")
    assert r.exit_code == 1 and "TL303" in r.stdout
    # Not a close match, not on disk: a missing path, as before.
    r = invoke("srcx")
    assert r.exit_code == 2 and "torchlint: error: srcx: no such file or directory" in r.stderr
    r = invoke("missing.py")
    assert r.exit_code == 2 and "missing.py: no such file or directory" in r.stderr


# -- a named file the CLI cannot check for readability ----------------------------------------


def test_a_named_file_is_linted_even_when_access_says_unreadable(proj, monkeypatch):
    """click's readable check refused the whole run (a usage error) for one
    file without read permission; the file must reach the runner, which
    reports TL001 for it and lints the others."""
    import os

    real = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, *a, **k: False if str(path).endswith("a.py") else real(path, mode)
    )
    (proj / "b.py").write_text(LOADER)
    r = invoke("check", "--no-cache", "--output-format", "concise", "a.py", "b.py", "--config", "pyproject.toml")
    assert "Invalid value" not in r.output
    assert "config file not found: pyproject.toml" in r.stderr  # the config's own error, one line
    r = invoke("check", "--no-cache", "--preview", "--output-format", "concise", "a.py", "b.py")
    assert r.exit_code == 1 and "a.py:3:5: TL104" in r.stdout and "b.py:4:10: TL303" in r.stdout


# -- install hints ----------------------------------------------------------------------------


def test_the_server_install_hint_works_without_pypi_torchlint(monkeypatch):
    from torchlint.doors import server

    real_import = builtins.__import__

    def no_pygls(name, *args, **kwargs):
        if name.startswith(("pygls", "lsprotocol", "torchlint.doors.lsp.features")):
            raise ImportError(f"No module named {name.split('.')[0]!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pygls)
    r = CliRunner().invoke(main, ["server"])
    assert r.exit_code == 2
    message = r.stderr.strip()
    assert message.count("\n") == 0
    assert "torchlint server needs the `server` extra" in message
    assert "pip install 'pygls>=2.0' 'lsprotocol>=2024.0.0'" in message  # the extra's own requirements
    assert "torchlint[server]'" not in message.split("(or")[0]  # not a name PyPI does not have
    hint = server.install_hint()
    assert "in this clone: pip install" in hint and hint.rstrip(")").endswith("[server]'")


def test_smoke_without_torch_says_so_in_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    r = CliRunner().invoke(main, ["verify", "--smoke"])
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0
    assert r.output.startswith("smoke run skipped: torch is not installed")
