import codecs
import os
import stat

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from torchlint.config import Settings
from torchlint.engine import checker, pipeline
from torchlint.files import runner
from torchlint.files.runner import FileJob, process_bytes, process_file, run
from torchlint.findings import Applicability
from torchlint.rules import all_rules
from torchlint.rules.base import Rule

from helpers import BAD_SYNTAX, CLEAN_SRC, TL104_FIXED, TL104_SRC, UNSAFE_SRC, code, lint_paths, notebook

ALL = Settings(preview=True).enabled()  # every rule


def job(path, mode="lint", unsafe=False):
    return FileJob(str(path), ALL, mode, unsafe)


def test_lint_reports_without_writing(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(TL104_SRC)
    out = process_file(job(f))
    assert [x.code for x in out.findings] == ["TL104"]
    assert out.lines == ((None, 3, "x = torch.zeros(3).to(device)"),)
    assert not out.needs_write and f.read_text() == TL104_SRC


def test_fix_writes_and_is_idempotent(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(TL104_SRC)
    out = process_file(job(f, "fix"))
    assert out.written and out.fixes_applied == 1 and out.findings == ()
    assert f.read_text() == TL104_FIXED
    again = process_file(job(f, "fix"))
    assert not again.written and again.fixes_applied == 0 and f.read_text() == TL104_FIXED


def test_fix_keeps_bom_crlf_and_mode(tmp_path):
    f = tmp_path / "a.py"
    data = codecs.BOM_UTF8 + TL104_SRC.replace("\n", "\r\n").encode()
    f.write_bytes(data)
    os.chmod(f, 0o640)
    process_file(job(f, "fix"))
    assert f.read_bytes() == codecs.BOM_UTF8 + TL104_FIXED.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o640


def test_fix_keeps_pep263_encoding(tmp_path):
    f = tmp_path / "a.py"
    src = "# -*- coding: latin-1 -*-\n# caf\u00e9\n" + TL104_SRC
    f.write_bytes(src.encode("latin-1"))
    process_file(job(f, "fix"))
    assert f.read_bytes() == ("# -*- coding: latin-1 -*-\n# caf\u00e9\n" + TL104_FIXED).encode("latin-1")


@pytest.mark.parametrize(
    "data", [b"x = '\xff\xfe'\n", b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR", b"# coding: nonsense\nx = 1\n"]
)
def test_undecodable_or_binary_is_tl000(data):
    out = process_bytes(data, FileJob("bin.py", frozenset({"TL104"})))
    assert [f.code for f in out.findings] == ["TL000"]  # TL000 is reported whatever the selection
    assert out.findings[0].message.startswith("cannot decode file")
    assert out.problems == ()


def test_diff_mode_writes_nothing(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(TL104_SRC)
    out = process_file(job(f, "diff"))
    assert f.read_text() == TL104_SRC
    assert "-x = torch.zeros(3).to(device)\n+x = torch.zeros(3, device=device)\n" in out.diff
    assert out.diff.startswith(f"--- {f}\n+++ {f}\n")
    assert not out.needs_write


def test_unsafe_fix_needs_unsafe(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(UNSAFE_SRC)
    assert not process_file(job(f, "fix")).written
    assert f.read_text() == UNSAFE_SRC
    assert process_file(job(f, "fix", unsafe=True)).written
    assert "torch.profiler.profile(" in f.read_text()


def test_read_only_file_is_a_problem_and_others_still_fixed(tmp_path):
    ro, rw = tmp_path / "ro.py", tmp_path / "rw.py"
    ro.write_text(TL104_SRC)
    rw.write_text(TL104_SRC)
    os.chmod(ro, 0o444)
    try:
        result = run([str(tmp_path)], Settings(root=str(tmp_path), preview=True), mode="fix")
    finally:
        os.chmod(ro, 0o644)
    assert ro.read_text() == TL104_SRC and rw.read_text() == TL104_FIXED
    assert [(p.path, p.message) for p in result.problems] == [(str(ro), "file is read-only; fixes not written")]
    assert result.fixes_applied == 1
    # the unfixed file's findings are still reported
    assert [(os.path.basename(f.path), f.code) for f in result.findings] == [("ro.py", "TL104")]


def test_vanished_file_is_a_tl001_finding(tmp_path):
    """A file that cannot be read is a TL001 finding (in every output format,
    as Ruff's E902), or a problem where no findings are reported (--diff)."""
    out = process_file(job(tmp_path / "gone.py"))
    assert out.problems == ()
    assert [(f.code, f.name, f.message, f.row) for f in out.findings] == [
        ("TL001", "io-error", "The file vanished before it could be read", 1)
    ]
    out = process_file(job(tmp_path / "gone.py", "diff"))
    assert out.findings == () and out.problems[0].message == "the file vanished before it could be read"


def test_same_contents_at_two_paths_share_a_cache_entry(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(TL104_SRC)
    settings = Settings(root=str(tmp_path), preview=True)
    run([str(a)], settings, cache_root=str(tmp_path))
    b.write_text(TL104_SRC)

    def no_lint(fn, items):
        raise AssertionError(f"linted again: {[job.path for job, _ in items]}")

    warm = run([str(b)], settings, cache_root=str(tmp_path), mapper=no_lint)
    assert [(f.path, f.code) for f in warm.findings] == [(str(b), "TL104")]


def test_never_writes_code_that_does_not_parse(tmp_path, monkeypatch):
    """A rule whose fix breaks the code: the file is left as it was."""

    class Garbage(cst.Name):
        def _codegen_impl(self, state, default_semicolon=False):
            state.add_token("def (:")

    class BreaksCode(Rule):
        CODE, NAME, MESSAGE, FIX_TITLE = "TL996", "breaks-code", "m", "break it"
        APPLICABILITY = Applicability.SAFE
        TRIGGERS = r"."

        def check(self, ctx):
            for node in ctx.facts.calls:
                ctx.report(node.node, replacements={node.node: Garbage("x")})

    monkeypatch.setattr(checker, "all_rules", lambda: tuple(all_rules()) + (BreaksCode,))
    f = tmp_path / "a.py"
    f.write_text(CLEAN_SRC)
    out = process_file(FileJob(str(f), ALL | {"TL996"}, "fix"))
    assert f.read_text() == CLEAN_SRC and not out.written
    assert {(p.rule, p.message) for p in out.problems} == {
        ("TL996", "a fix produced code that does not parse; it was not applied")
    }
    assert [x.code for x in out.findings] == ["TL996"]


def test_internal_error_in_one_file_is_a_problem(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text(TL104_SRC)

    def boom(*a, **k):
        raise RuntimeError("kaput")

    monkeypatch.setattr(pipeline, "lint_text", boom)
    out = process_file(job(f))
    assert out.problems[0].message == "internal error: RuntimeError: kaput"


def test_run_reports_tl000_and_still_lints_other_files(tmp_path):
    (tmp_path / "bad.py").write_text(BAD_SYNTAX)
    (tmp_path / "good.py").write_text(TL104_SRC)
    (tmp_path / "clean.py").write_text(CLEAN_SRC)
    result = run([str(tmp_path)], Settings(root=str(tmp_path), preview=True))
    assert [(os.path.basename(f.path), f.code) for f in result.findings] == [("bad.py", "TL000"), ("good.py", "TL104")]
    assert result.files == 3 and result.problems == ()


def test_notebooks_are_linted_and_fixed_in_place(tmp_path):
    nb = tmp_path / "n.ipynb"
    nb.write_bytes(notebook(code("import torch\n"), code("device = 'cuda'\n"), code("x = torch.zeros(3).to(device)\n")))
    result = run([str(tmp_path)], Settings(root=str(tmp_path), preview=True))
    assert [(f.code, f.cell, f.row) for f in result.findings] == [("TL104", 3, 1)]
    result = run([str(tmp_path)], Settings(root=str(tmp_path), preview=True), mode="fix")
    assert result.fixes_applied == 1 and result.findings == ()
    assert "torch.zeros(3, device=device)" in nb.read_text()


def test_lint_paths_api(tmp_path):
    (tmp_path / "a.py").write_text(TL104_SRC)
    result = lint_paths([str(tmp_path)], Settings(root=str(tmp_path), preview=True))
    assert [f.code for f in result.findings] == ["TL104"]
    result = lint_paths([str(tmp_path)], Settings(root=str(tmp_path), preview=True), fix=True)
    assert result.fixes_applied == 1 and result.findings == ()


def test_custom_mapper_receives_pure_jobs(tmp_path):
    (tmp_path / "a.py").write_text(TL104_SRC)
    (tmp_path / "b.py").write_text(TL104_SRC)
    seen = []

    def mapper(fn, items):
        seen.extend(items)
        return [fn(i) for i in reversed(items)]  # order must not matter

    result = run([str(tmp_path)], Settings(root=str(tmp_path), preview=True), mapper=mapper)
    # Lint mode hands over (job, contents read once by the parent); fix mode hands over jobs.
    assert all(isinstance(job, FileJob) and isinstance(data, bytes) for job, data in seen)
    assert [os.path.basename(f.path) for f in result.findings] == ["a.py", "b.py"]


@hsettings(max_examples=60, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_any_bytes_give_findings_not_exceptions(data):
    for mode in ("lint", "fix"):
        out = process_bytes(data, FileJob("fuzz.py", ALL, mode))
        assert all(f.row >= 1 and f.column >= 1 for f in out.findings)
        if out.new_data is not None:
            # whatever the fix produced must decode and parse
            from torchlint.api import decode_source
            from torchlint.source.parsing import parse

            parse(decode_source(out.new_data).text)


def test_file_changed_while_fixing_is_not_overwritten(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text(TL104_SRC)
    real = runner.process_bytes

    def edit_meanwhile(data, job):
        out = real(data, job)
        f.write_text(TL104_SRC + "# edited\n")
        return out

    monkeypatch.setattr(runner, "process_bytes", edit_meanwhile)
    out = process_file(job(f, "fix"))
    assert f.read_text() == TL104_SRC + "# edited\n"
    assert out.problems[0].message == "file changed while being fixed; fixes not written"


def test_cache_answers_unchanged_files_and_relints_changed_ones(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(TL104_SRC)
    b.write_text(CLEAN_SRC)
    settings = Settings(root=str(tmp_path), preview=True)
    cold = run([str(tmp_path)], settings, cache_root=str(tmp_path))
    assert (tmp_path / ".torchlint_cache" / "CACHEDIR.TAG").is_file()

    def no_lint(fn, items):
        raise AssertionError(f"a cached file was linted again: {[job.path for job, _ in items]}")

    warm = run([str(tmp_path)], settings, cache_root=str(tmp_path), mapper=no_lint)
    assert warm.findings == cold.findings and [f.code for f in warm.findings] == ["TL104"]
    b.write_text(TL104_SRC + "# b\n")  # a changed file is linted again, the other still comes from the cache
    seen = []

    def record(fn, items):
        seen.extend(job.path for job, _ in items)
        return [fn(item) for item in items]

    again = run([str(tmp_path)], settings, cache_root=str(tmp_path), mapper=record)
    assert seen == [str(b)] and [f.code for f in again.findings] == ["TL104", "TL104"]


def test_no_cache_root_writes_no_cache(tmp_path):
    (tmp_path / "a.py").write_text(TL104_SRC)
    run([str(tmp_path)], Settings(root=str(tmp_path), preview=True))
    assert not (tmp_path / ".torchlint_cache").exists()


def test_a_fix_the_files_encoding_cannot_hold_is_not_applied_by_any_door(tmp_path, monkeypatch):
    """One branch for it: the CLI's runner and api.fix_bytes keep the file and
    report the original findings; the runner says why."""
    from torchlint.rules import rule_by_code

    from helpers import api

    def check(self, ctx):
        for call in ctx.facts.calls:
            if call.method == "cuda":
                ctx.report(call.node, replacements={call.node: cst.Name("caf\u00e9")})

    monkeypatch.setattr(rule_by_code("TL104"), "check", check)
    data = b"# -*- coding: ascii -*-\nimport torch\nx = torch.zeros(2).cuda()\n"
    f = tmp_path / "a.py"
    f.write_bytes(data)
    out = process_file(job(f, "fix"))
    assert f.read_bytes() == data and not out.written and out.fixes_applied == 0
    assert [p.message for p in out.problems] == [
        "fixed code cannot be encoded as ascii: ordinal not in range(128); not fixed"
    ]
    new, remaining = api.fix_bytes(data, "a.py")
    assert new == data
    assert [(x.code, x.row) for x in remaining] == [(x.code, x.row) for x in out.findings] == [("TL104", 3)]
