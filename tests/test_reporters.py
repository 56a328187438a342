import json
import os
from pathlib import Path

import jsonschema
import pytest

from torchlint.findings import Applicability, Edit, Finding, Fix
from torchlint.report import ReportData, render, statistics, summary
from torchlint.report.github import escape_data, escape_property
from torchlint.rules import rule_url

HERE = Path(__file__).resolve().parent
VENDORED_SCHEMA = HERE / "data" / "sarif-schema-2.1.0.json"
SHARED_SCHEMA = HERE.parents[1] / "shared" / "schemas" / "sarif-schema-2.1.0.json"

RUFF_FIELDS = {"cell", "code", "end_location", "filename", "fix", "location", "message", "noqa_row", "url"}


def finding(path="pkg/a.py", code="TL104", row=3, col=5, fix=Applicability.SAFE, message="Tensor moved"):
    f = None
    if fix is not None:
        f = Fix(fix, "Pass `device=`", (Edit(row, col + 10, row, col + 14, ", device="),))
    name = {"TL104": "create-then-move", "TL501": "legacy-profiler", "TL000": "syntax-error"}[code]
    return Finding(code, name, message, path, row, col, row, col + 14, f, noqa_row=row)


@pytest.fixture
def data(tmp_path):
    findings = [
        finding("pkg/a.py", "TL104", 3, 5),
        finding("pkg/a.py", "TL501", 7, 6, fix=Applicability.UNSAFE, message="Legacy profiler"),
        finding("pkg/b.py", "TL000", 1, 1, fix=None, message="SyntaxError: bad, very: bad\nreally 100%"),
    ]
    lines = {("pkg/a.py", 3): "    x = torch.randn(3).to(device)", ("pkg/a.py", 7): "with\tprofiler.profile() as p:"}
    return ReportData(findings=findings, lines=lines, cwd=str(tmp_path))


def test_json_has_ruffs_fields(data, tmp_path):
    items = json.loads(render("json", data))
    assert len(items) == 3
    for item in items:
        assert set(item) == RUFF_FIELDS | {"name"}  # Ruff's schema plus the rule name the issue asks for
        assert set(item["location"]) == set(item["end_location"]) == {"row", "column"}
        assert os.path.isabs(item["filename"])
    first = items[0]
    assert first["filename"] == str(tmp_path / "pkg" / "a.py") or first["filename"].endswith("pkg/a.py")
    assert first["location"] == {"row": 3, "column": 5} and first["end_location"] == {"row": 3, "column": 19}
    assert first["noqa_row"] == 3 and first["cell"] is None
    assert first["fix"] == {
        "applicability": "safe",
        "message": "Pass `device=`",
        "edits": [
            {"content": ", device=", "location": {"row": 3, "column": 15}, "end_location": {"row": 3, "column": 19}}
        ],
    }
    assert items[1]["fix"]["applicability"] == "unsafe"
    assert items[2]["fix"] is None
    assert first["url"] == "https://github.com/torchlint/torchlint/blob/main/docs/rules/create-then-move.md"


def test_json_lines_one_object_per_line(data):
    text = render("json-lines", data)
    lines = text.splitlines()
    assert len(lines) == 3
    assert [json.loads(line)["code"] for line in lines] == ["TL104", "TL501", "TL000"]


def test_json_empty_is_an_empty_array():
    assert json.loads(render("json", ReportData(findings=[]))) == []


def test_rule_url():
    assert rule_url("TL501").endswith("/docs/rules/legacy-profiler.md")
    assert rule_url("TL000").endswith("/docs/rules/syntax-error.md")
    assert rule_url("TL999") is None


def _schema():
    return json.loads(VENDORED_SCHEMA.read_text())


def test_sarif_validates_against_official_schema(data):
    doc = json.loads(render("sarif", data))
    jsonschema.validate(doc, _schema())
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["TL000", "TL104", "TL501"]
    assert all(r["helpUri"].startswith("https://") for r in rules)
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
    first = run["results"][0]
    assert first["level"] == "warning"
    loc = first["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/a.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 19}
    tl000 = [r for r in run["results"] if r["ruleId"] == "TL000"][0]
    assert tl000["level"] == "error"


def test_vendored_schema_matches_shared_copy():
    if not SHARED_SCHEMA.is_file():
        pytest.skip(f"no shared schema at {SHARED_SCHEMA}: only the vendored copy is used")
    assert json.loads(SHARED_SCHEMA.read_text()) == _schema()


def test_sarif_empty_run_validates():
    doc = json.loads(render("sarif", ReportData(findings=[])))
    jsonschema.validate(doc, _schema())
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["tool"]["driver"]["rules"] == []


def test_github_escaping():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_format(data):
    lines = render("github", data).splitlines()
    assert lines[0] == (
        "::warning title=torchlint (TL104),file=pkg/a.py,line=3,col=5,endLine=3,endColumn=19::TL104 Tensor moved"
    )
    assert lines[2].startswith("::error title=torchlint (TL000),file=pkg/b.py,line=1,col=1,")
    assert lines[2].endswith("::TL000 SyntaxError: bad, very: bad%0Areally 100%25")


def test_concise_marks_applicable_fixes(data):
    lines = render("concise", data).splitlines()
    assert lines == [
        "pkg/a.py:3:5: TL104 [*] Tensor moved",
        "pkg/a.py:7:6: TL501 Legacy profiler",
        "pkg/b.py:1:1: TL000 SyntaxError: bad, very: bad",
        "really 100%",
    ]
    data.unsafe_fixes = True
    assert render("concise", data).splitlines()[1] == "pkg/a.py:7:6: TL501 [*] Legacy profiler"


def test_full_has_frame_caret_and_help(data):
    text = render("full", data)
    assert (
        "pkg/a.py:3:5: TL104 [*] Tensor moved\n"
        "  |\n"
        "3 |     x = torch.randn(3).to(device)\n"
        "  |     ^^^^^^^^^^^^^^ TL104\n"
        "  |\n"
        "  = help: Pass `device=`\n"
    ) in text
    # tabs are kept before the caret so it lines up
    assert "7 | with\tprofiler.profile() as p:\n  |     \t^" in text
    assert "= help: Pass `device=` (unsafe: needs --unsafe-fixes)" in text


def test_summary_counts_fixable_and_hidden(data):
    assert summary(data) == (
        "Found 3 errors.\n[*] 1 fixable with the `--fix` option "
        "(1 hidden fix can be enabled with the `--unsafe-fixes` option).\n"
    )
    data.unsafe_fixes = True
    assert summary(data) == "Found 3 errors.\n[*] 2 fixable with the `--fix` option.\n"
    only_unsafe = ReportData(findings=[finding(fix=Applicability.UNSAFE)])
    assert summary(only_unsafe) == (
        "Found 1 error.\nNo fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).\n"
    )
    assert summary(ReportData(findings=[])) == "All checks passed!\n"
    fixed = ReportData(findings=[finding(fix=None)], mode="fix", fixes_applied=2)
    assert summary(fixed) == "Found 3 errors (2 fixed, 1 remaining).\n"


def test_statistics_sorted_by_count_then_code():
    findings = [
        finding(code="TL501"),
        finding(code="TL104"),
        finding(code="TL104", fix=None),
        finding(code="TL000", fix=None),
    ]
    d = ReportData(findings=findings)
    assert (
        statistics.render(d)
        == "2\tTL104\t[*] create-then-move\n1\tTL000\t[ ] syntax-error\n1\tTL501\t[*] legacy-profiler\n"
    )
    assert json.loads(statistics.render(d, as_json=True))[0] == {
        "code": "TL104",
        "name": "create-then-move",
        "count": 2,
        "fixable": True,
    }


@pytest.mark.parametrize("fmt", ["full", "concise", "json", "json-lines", "github", "sarif"])
def test_output_is_deterministic(fmt, data):
    again = ReportData(findings=list(data.findings), lines=dict(data.lines), cwd=data.cwd)
    assert render(fmt, data) == render(fmt, again)


def test_summary_plurals():
    from torchlint.report import plural

    assert plural(1, "hidden fix") == "1 hidden fix"
    assert plural(4, "hidden fix") == "4 hidden fixes"
    assert plural(2, "error") == "2 errors" and plural(0, "file") == "0 files"
