"""Every command of the README's Usage block does what its comment says, run
as written (through bash, with the installed `torchlint`) in a fresh copy of
examples/, as the README tells a reader to try them. A command added to the
block without an expectation here fails the test."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
HANG_S = 300  # a hang guard, not a speed bound


def usage_lines():
    """(command, comment) for each line of the fenced block under `## Usage`."""
    section = README.split("\n## Usage\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n")[2].split("```", 1)[0]  # after the set-up block
    out = []
    for line in block.splitlines():
        command, comment = (re.split(r"\s+#\s", line, maxsplit=1) + [""])[:2]
        out.append((command.strip(), comment.strip()))
    return out


USAGE = usage_lines()


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, folder: Path):
        self.code, self.out, self.err, self.folder = proc.returncode, proc.stdout, proc.stderr, folder

    def __repr__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out[-3000:]}\n--- stderr\n{self.err[-3000:]}"

    def text(self, name: str) -> str:
        return (self.folder / name).read_text(encoding="utf-8")


def _env():
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", COLUMNS="100")
    for name in ("TORCHLINT_PREVIEW", "TORCHLINT_OUTPUT_FORMAT", "TORCHLINT_CACHE_DIR", "TORCHLINT_DOCS_URL"):
        env.pop(name, None)  # the reader's shell: none of the suite's settings
    return env


SETUP = "cp -r examples /tmp/demo && cd /tmp/demo && echo 'preview = true' > torchlint.toml"


@pytest.fixture
def demo(tmp_path):
    """The README's set-up line, with the copy under tmp_path."""
    if not (BIN / "torchlint").exists():
        pytest.skip("no `torchlint` command beside this Python: install the package (pip install -e .)")
    folder = tmp_path / "demo"
    shutil.copytree(ROOT / "examples", folder)
    (folder / "torchlint.toml").write_text("preview = true\n")
    return folder


def test_the_usage_set_up_is_the_one_the_test_follows():
    section = README.split("\n## Usage\n", 1)[1].split("\n## ", 1)[0]
    assert f"```bash\n{SETUP}\n```" in section


def run(command: str, folder: Path) -> Run:
    proc = subprocess.run(
        ["bash", "-c", command], cwd=folder, env=_env(), capture_output=True, text=True, timeout=HANG_S
    )
    return Run(proc, folder)


ORIGINAL = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "examples").glob("*.py")}
PREVIEW_HINT = re.compile(r"^torchlint: hint: \d+ preview rules? (is|are) off\b.*`--preview`", re.M)
FINDING = re.compile(r"^(\S+\.py):\d+:\d+: (TL\d{3})", re.M)
EVERY_CODE = {"TL100", "TL101", "TL102", "TL103", "TL104", "TL105", "TL106", "TL201", "TL202", "TL301", "TL302"}
EVERY_CODE |= {"TL303", "TL304", "TL401", "TL402", "TL403", "TL404", "TL501", "TL601"}


def found(r: Run):
    """{(file, code)} of the findings a report names."""
    return set(FINDING.findall(r.out))


def codes(r: Run):
    return {code for _, code in found(r)}


def changed(r: Run):
    return sorted(n for n, t in ORIGINAL.items() if r.text(n) != t)


def check_lint(r: Run):
    assert r.code == 1 and codes(r) == EVERY_CODE and "Found 20 errors." in r.out, r
    assert not PREVIEW_HINT.search(r.err) and changed(r) == []


def check_files(r: Run):
    assert r.code == 1 and {f for f, _ in found(r)} == {"data.py", "train.py"}, r


def check_fix(r: Run):
    # (A fix can uncover another finding that a later pass fixes: more fixed than found fixable.)
    assert r.code == 1 and re.search(r"Found 2\d errors \([4-9] fixed, 1\d remaining\)\.", r.out), r
    assert changed(r) == ["finetune.py", "profile_step.py", "train.py"]  # the safe fixes' files
    assert "torch.profiler.profile" in r.text("profile_step.py")


def check_unsafe_fix(r: Run):
    assert r.code == 1 and "fixed" in r.out, r
    # Unsafe fixes too: TL201 wraps evaluation in no_grad (its only fix is unsafe).
    assert "evaluate.py" in changed(r) and "torch.no_grad()" in r.text("evaluate.py"), changed(r)


def check_diff(r: Run):
    assert r.code == 1 and "--- train.py\n+++ train.py\n" in r.out, r
    assert re.match(r"Would fix [4-9] errors in 3 files", r.err) and changed(r) == []


def check_select(r: Run):
    assert r.code == 1 and "TL401" in codes(r) and codes(r) - {"TL401"} <= {f"TL10{i}" for i in range(7)}, r
    assert len(codes(r)) >= 5 and "has no effect" not in r.err


def check_statistics(r: Run):
    rows = [line.split() for line in r.out.splitlines() if line[:1].isdigit()]
    assert r.code == 1 and rows[0] == ["2", "TL104", "[", "]", "create-then-move"], r
    assert {row[1] for row in rows} == EVERY_CODE and "Found 20 errors." in r.out


def check_fix_only(r: Run):
    assert r.code == 0 and re.fullmatch(r"Fixed [4-9] errors\.", r.out.strip()), r
    assert changed(r) == ["finetune.py", "profile_step.py", "train.py"]


def check_add_noqa(r: Run):
    assert r.code == 0 and re.match(r"Added 1\d noqa directives\.", r.err), r  # one per line with findings
    assert re.search(r"# noqa: [^\n]*TL303", r.text("data.py"))
    assert run("torchlint .", r.folder).out.startswith("All checks passed!")


def check_show_files(r: Run):
    assert r.code == 0 and r.out.split() == sorted(ORIGINAL), r


def check_show_settings(r: Run):
    assert r.code == 0 and r.out.startswith(f"Resolved settings for: {r.folder / 'train.py'}"), r
    assert f"Settings path: {r.folder / 'torchlint.toml'}" in r.out and "preview = true" in r.out


def check_extend_exclude(r: Run):
    # not gen/ nor *_pb2.py; train_images.py holds no mistake of its own (it runs the others)
    assert r.code == 1 and {f for f, _ in found(r)} == {p for p in ORIGINAL if p != "train_images.py"}, r


def check_no_preview(r: Run):
    # The stable rules as this clone's catalog records them (the command runs this torchlint).
    from torchlint.rules import preview_codes

    stable = EVERY_CODE - preview_codes()
    if stable:
        n = len(FINDING.findall(r.out))
        assert r.code == 1 and codes(r) == stable and f"Found {n} error{'s' if n > 1 else ''}." in r.out, r
    else:
        assert r.code == 0 and r.out.startswith("All checks passed!") and not found(r), r
    hint = r.err.splitlines()[-1]
    assert PREVIEW_HINT.search(hint) and hint.startswith(f"torchlint: hint: {len(preview_codes())} preview rules"), r
    # With no stable rule the hint says what such a run checks.
    assert ("checked only that the files parse and can be read" in hint) is (not stable), r


def check_rules(r: Run):
    assert r.code == 0 and r.out.startswith("CODE") and all(c in r.out for c in EVERY_CODE), r
    assert "preview" in r.out and "stable" in r.out


def check_version(r: Run):
    from torchlint import __version__

    assert r.code == 0 and r.out == f"torchlint {__version__}\n", r


def check_rule(r: Run):
    assert r.code == 0 and r.out.startswith("# create-then-move (TL104)") and "## What it does" in r.out, r


def check_clean(r: Run):
    assert r.code == 0 and not (r.folder / ".torchlint_cache").exists(), r


def check_stdin(r: Run):
    assert r.code == 1, r  # a finding without a fix remains (TL105)
    assert r.out.startswith(ORIGINAL["train.py"][:40]) and r.out != ORIGINAL["train.py"] and changed(r) == [], r
    assert "Found 4 errors (3 fixed, 1 remaining)." in r.err and "TL105" in r.err  # the rest, on stderr


def check_run(r: Run):
    assert r.code == 1 and "on the simulated GPU" in r.out, r  # it ran, and found what a GPU run would hit
    assert "TL103" in r.out and "a GPU run raises here" in r.out, r


def check_run_cuda(r: Run):
    from torchlint.runtime.cuda import unavailable

    if unavailable() is not None:  # this machine: one line, exit 2
        assert r.code == 2 and r.err.startswith("torchlint: error: no CUDA device: ") and r.out == "", r
        assert r.err.count("\n") == 1 and "leave out `--device cuda`" in r.err, r
    else:
        assert r.code == 1 and "on the GPU (" in r.out and "GPU timings (" in r.out, r


EXPECTED = {
    "torchlint": check_lint,
    "torchlint check data.py train.py": check_files,
    "torchlint --fix .": check_fix,
    "torchlint --fix --unsafe-fixes .": check_unsafe_fix,
    "torchlint --diff .": check_diff,
    "torchlint --select TL1,TL401 .": check_select,
    "torchlint --statistics .": check_statistics,
    "torchlint --fix-only .": check_fix_only,
    "torchlint --add-noqa .": check_add_noqa,
    "torchlint --show-files .": check_show_files,
    "torchlint --show-settings train.py": check_show_settings,
    "torchlint --extend-exclude 'gen/,*_pb2.py' .": check_extend_exclude,
    "torchlint --no-preview .": check_no_preview,
    "torchlint rules": check_rules,
    "torchlint version": check_version,
    "torchlint run train.py --epochs 1": check_run,
    "torchlint run --device cuda train.py": check_run_cuda,
    "torchlint rule TL104": check_rule,
    "torchlint clean": check_clean,
    "cat train.py | torchlint --fix --stdin-filename train.py": check_stdin,
}
WATCH = "torchlint --watch ."


def test_every_usage_command_has_an_expectation():
    commands = [c for c, _ in USAGE]
    assert sorted(commands) == sorted([*EXPECTED, WATCH]), "a Usage line without an expectation here (or gone)"


@pytest.mark.slow
@pytest.mark.parametrize("command", list(EXPECTED))
def test_the_usage_command_does_what_its_comment_says(demo, command):
    if command == "torchlint --extend-exclude 'gen/,*_pb2.py' .":  # what it excludes must be there
        (demo / "gen").mkdir()
        (demo / "gen" / "loader.py").write_text((demo / "data.py").read_text())
        (demo / "model_pb2.py").write_text((demo / "data.py").read_text())
    if command == "torchlint clean":  # a cache to remove
        assert run("torchlint .", demo).code == 1 and (demo / ".torchlint_cache").is_dir()
    EXPECTED[command](run(command, demo))


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT (Ctrl-C) to the watcher")
def test_the_usage_watch_command_lints_again_on_a_change_until_ctrl_c(demo):
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {WATCH}"],
        cwd=demo,
        env=dict(_env(), TORCHLINT_WATCH_INTERVAL="0.1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    try:

        def until(text: str, count: int) -> None:
            hung = time.monotonic() + HANG_S
            while sum(text in line for line in seen) < count:
                if time.monotonic() > hung:
                    pytest.fail(f"--watch never printed {text!r} {count} times: {seen}")
                seen.append(proc.stdout.readline())

        until("Watching for file changes (Ctrl-C to stop).", 1)
        assert any("Found 20 errors." in line for line in seen), seen
        first = len(seen)
        time.sleep(0.3)  # a change after the first look (the watcher polls), not a timing assertion
        (demo / "torchlint.toml").write_text("preview = false\n")  # the configuration counts as a change
        until("Watching for file changes (Ctrl-C to stop).", 2)
        # The second run reports the first one's findings of stable rules (this clone's catalog).
        from torchlint.rules import preview_codes

        n = sum(1 for line in seen[:first] for _, code in FINDING.findall(line) if code not in preview_codes())
        again = f"Found {n} error{'s' if n > 1 else ''}." if n else "All checks passed!"
        assert any(again in line for line in seen[first:]), (again, seen)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=HANG_S)
    assert code == 0, seen  # Ctrl-C is how one leaves watch mode
