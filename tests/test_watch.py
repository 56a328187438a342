"""`torchlint check --watch`: lint again when a file or the configuration
changes. The end-to-end test drives a real `torchlint check --watch` process
with file writes and reads its report; deadlines there are guards against a
hang, never measurements."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.doors.cli import main
from torchlint.files import watch

from helpers import CLEAN_SRC, TL104_SRC

ROOT = Path(__file__).resolve().parents[1]
GUARD_S = 120  # a hang fails the test instead of blocking the suite


def test_snapshot_and_changed(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    first = watch.snapshot([str(a), str(b)])
    assert list(first) == [str(a)]  # a missing file is simply absent
    b.write_text("y = 2\n")
    a.write_text("x = 10\n")  # another size: a change whatever the clock's resolution
    second = watch.snapshot([str(a), str(b)])
    assert watch.changed(first, second) == (str(a), str(b))
    assert watch.changed(second, second) == ()


def test_wait_for_change_waits_for_the_files_to_settle(tmp_path):
    """A change is reported once the files stay the same for one more look."""
    a = tmp_path / "a.py"
    a.write_text("x = 1\n")
    start = watch.snapshot([str(a)])
    looks = []
    writes = {2: "x = 22\n", 3: "x = 333\n"}  # an editor writing in two steps

    def sleep(_seconds):
        looks.append(1)
        if len(looks) in writes:
            a.write_text(writes[len(looks)])

    snap, what = watch.wait_for_change(lambda: watch.snapshot([str(a)]), start, 0.0, sleep=sleep)
    assert what == (str(a),)
    assert snap == watch.snapshot([str(a)]) and a.read_text() == "x = 333\n"
    assert len(looks) == 4  # nothing, first write, second write, settled


def test_tree_finds_files_again_within_its_budget(tmp_path):
    """Discovery runs again when due: at once for a fast discovery, after ten
    times its own duration for a slow one; `refresh` runs it now."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 1\n")
    found = [[str(a)]]
    now = [0.0]
    calls = []

    def discover():
        calls.append(now[0])
        now[0] += 2.0  # a slow discovery: 2 s
        return found[0]

    tree = watch.Tree(discover, lambda: [str(tmp_path / "pyproject.toml")], clock=lambda: now[0])
    assert list(tree.look()) == [str(a)] and calls == [0.0]
    found[0] = [str(a), str(b)]
    now[0] = 21.0  # due at 2 + 10 * 2 = 22
    assert list(tree.look()) == [str(a)] and len(calls) == 1
    now[0] = 22.0
    assert sorted(tree.look()) == [str(a), str(b)] and len(calls) == 2
    (tmp_path / "pyproject.toml").write_text("")
    assert str(tmp_path / "pyproject.toml") in tree.look()  # extra paths: every look
    tree.refresh()
    assert len(calls) == 3


def test_interval_from_env(monkeypatch):
    monkeypatch.setenv("TORCHLINT_WATCH_INTERVAL", "0.05")
    assert watch.interval_from_env() == 0.05
    for bad in ("", "soon", "-1"):
        monkeypatch.setenv("TORCHLINT_WATCH_INTERVAL", bad)
        assert watch.interval_from_env() == watch.DEFAULT_INTERVAL


@pytest.mark.parametrize("other", [["--diff"], ["--add-noqa"], ["--stdin-filename", "a.py"], ["--show-files"]])
def test_watch_refuses_modes_it_cannot_repeat(tmp_path, monkeypatch, other):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["check", "--watch", *other, "."], input="")
    assert r.exit_code == 2 and "--watch cannot be used with" in r.output


class Watcher:
    """A `torchlint check --watch` process and its output, stderr merged into
    stdout so that lines come in the order they were written (the report on
    stdout, then the status line on stderr)."""

    def __init__(self, folder: Path, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), TORCHLINT_WATCH_INTERVAL="0.1")
        env.pop("TORCHLINT_OUTPUT_FORMAT", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torchlint", "check", "--watch", "-j", "1", "--output-format", "concise", *args],
            cwd=str(folder),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: "queue.Queue[str]" = queue.Queue()
        self.seen: list = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def report(self) -> list:
        """The lines of the next run's report (up to its status line)."""
        out = []
        while True:
            try:
                line = self.lines.get(timeout=GUARD_S)
            except queue.Empty:
                self.stop()
                pytest.fail(f"no complete report from --watch; so far {out}, before {self.seen}")
            self.seen.append(line)
            if "Watching for file changes (Ctrl-C to stop)." in line:
                return [x for x in out if x]
            out.append(line)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=GUARD_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("--watch did not stop on Ctrl-C")


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT (Ctrl-C) to the watcher")
def test_watch_lints_again_when_a_file_or_the_configuration_changes(tmp_path):
    """Issue 27: `--watch` re-lints on change. The test writes files the way
    a user saves them and reads each new report."""
    a = tmp_path / "a.py"
    a.write_text(CLEAN_SRC)
    w = Watcher(tmp_path, "--no-cache", ".")
    try:
        assert w.report() == ["All checks passed!"]
        a.write_text(TL104_SRC)  # a mistake appears
        first = w.report()
        assert first[0].startswith("a.py:3:5: TL104 [*] ") and "Found 1 error." in first, first
        (tmp_path / "b.py").write_text(TL104_SRC.replace("zeros", "ones"))  # a new file counts
        second = w.report()
        assert [line.split(" ")[0] for line in second if " TL104 " in line] == ["a.py:3:5:", "b.py:3:5:"], second
        (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL104"]\n')  # the configuration
        assert w.report() == ["All checks passed!"]
        (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL104"\n')  # broken: keep going
        broken = w.report()
        assert len(broken) == 2 and "invalid TOML" in broken[0] and "keeping the previous settings" in broken[0]
        assert broken[1] == "All checks passed!"
    finally:
        code = w.stop()
    assert code == 0  # Ctrl-C is how one leaves watch mode: not an error
    assert not any("Traceback" in line or "interrupted" in line for line in w.seen), w.seen


def test_watch_with_fix_takes_its_snapshot_after_writing(tmp_path, monkeypatch):
    """With --fix, the files are looked at after the run has written its
    fixes, so its own writes never start another run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCHLINT_OUTPUT_FORMAT", raising=False)
    a = tmp_path / "a.py"
    a.write_text(TL104_SRC)
    seen = []

    def wait(look, since, interval, **kwargs):
        seen.append((since, a.read_text()))
        raise KeyboardInterrupt  # Ctrl-C after the first run

    monkeypatch.setattr(watch, "wait_for_change", wait)
    r = CliRunner().invoke(main, ["check", "--watch", "--fix", "--no-cache", "-j", "1", "."])
    assert r.exit_code == 0, r.output
    assert "Found 1 error (1 fixed, 0 remaining)." in r.stdout
    ((since, text),) = seen
    assert "device=device" in text
    assert since[str(a)] == watch.snapshot([str(a)])[str(a)]  # the fixed file, as written
