import json
import os
import re
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from torchlint.findings import Applicability, Edit, Finding, Fix
from torchlint.report import FORMATS, ReportData, render, statistics, summary
from torchlint.report.github import escape_data, escape_property
from torchlint.rules import rule_url

HERE = Path(__file__).resolve().parent
VENDORED_SCHEMA = HERE / "data" / "sarif-schema-2.1.0.json"

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
    lines = {
        ("pkg/a.py", None, 3): "    x = torch.randn(3).to(device)",
        ("pkg/a.py", None, 7): "with\tprofiler.profile() as p:",
    }
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


def test_sarif_rule_descriptions_are_never_message_templates():
    """Issue 27: TL100, TL101, TL103 and TL105 (and TL102) showed `{name}`,
    `{names}`, `reach{s}`, `{method}` in SARIF's rule descriptions, which
    GitHub code scanning shows to users."""
    from torchlint.report import sarif
    from torchlint.rules import all_rules

    from helpers import lint_source

    template = re.compile(r"\{\w*\}")  # `{name}`, `reach{s}`
    for rule in all_rules():
        entry = sarif._rule(rule.CODE)
        short = entry["shortDescription"]["text"]
        assert "{" not in short and "}" not in short, (rule.CODE, short)
        assert not template.search(entry.get("fullDescription", {}).get("text", "")), rule.CODE
    # In a whole report too: findings of the templated rules.
    moved = (
        "import torch\nfrom torch.utils.data import DataLoader\ndevice = torch.device('cuda')\n"
        "model = torch.nn.Linear(4, 2).to(device)\nloader = DataLoader(ds)\n"
        "for inputs, targets in loader:\n    out = model(inputs)\n    loss = crit(out, targets)\n"
    )
    unmoved = (
        "import torch\ndevice = torch.device('cuda')\nmodel = torch.nn.Linear(4, 2)\nout = model(x.to(device))\n"
        "t = torch.randn(3)\nt.to(device)\n"
    )
    findings = lint_source(moved, "a.py") + lint_source(unmoved, "b.py")
    assert {"TL101", "TL103", "TL105"} <= {f.code for f in findings}
    doc = json.loads(render("sarif", ReportData(findings=findings)))
    for rule in doc["runs"][0]["tool"]["driver"]["rules"]:
        assert not template.search(json.dumps(rule)), rule


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


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_is_deterministic(fmt, data):
    again = ReportData(findings=list(data.findings), lines=dict(data.lines), cwd=data.cwd)
    assert render(fmt, data) == render(fmt, again)


def test_summary_plurals():
    from torchlint.report import plural

    assert plural(1, "hidden fix") == "1 hidden fix"
    assert plural(4, "hidden fix") == "4 hidden fixes"
    assert plural(2, "error") == "2 errors" and plural(0, "file") == "0 files"


def test_summary_never_claims_success_for_a_run_with_problems_or_no_files():
    assert summary(ReportData(findings=[], problems=1)) == ""
    assert summary(ReportData(findings=[], linted_nothing=True)) == ""
    assert summary(ReportData(findings=[finding()], problems=1)).startswith("Found 1 error.")


def test_summary_without_the_unsafe_hint():
    only_unsafe = ReportData(findings=[finding(fix=Applicability.UNSAFE)], unsafe_hint=False)
    assert summary(only_unsafe) == "Found 1 error.\n"


# --- notebooks: the cell in every format -------------------------------------------------


@pytest.fixture
def nb_data(tmp_path):
    f = replace(finding("nb.ipynb", "TL104", 2, 5), cell=3)
    lines = {("nb.ipynb", 3, 2): "    x = torch.randn(3).to(device)", ("nb.ipynb", 1, 2): "something else"}
    return ReportData(findings=[f], lines=lines, cwd=str(tmp_path))


def test_full_shows_a_code_frame_for_a_notebook_finding(nb_data):
    text = render("full", nb_data)
    assert text.startswith(
        "nb.ipynb:cell 3:2:5: TL104 [*] Tensor moved\n"
        "  |\n"
        "2 |     x = torch.randn(3).to(device)\n"
        "  |     ^^^^^^^^^^^^^^ TL104\n"
    )


def test_github_names_the_cell(nb_data):
    line = render("github", nb_data).strip()
    assert line == (
        "::warning title=torchlint (TL104),file=nb.ipynb,line=2,col=5,endLine=2,endColumn=19::cell 3: TL104 Tensor moved"
    )


def test_sarif_names_the_cell_in_the_message_and_properties(nb_data):
    doc = json.loads(render("sarif", nb_data))
    jsonschema.validate(doc, _schema())
    (result,) = doc["runs"][0]["results"]
    assert result["message"]["text"] == "cell 3: Tensor moved"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region["properties"] == {"cell": 3} and result["properties"] == {"cell": 3}
    assert "fixes" not in result  # cell-relative edits are not the file's


@pytest.mark.parametrize(
    "fmt, expected",
    [
        ("pylint", "nb.ipynb:2: [TL104] cell 3: Tensor moved"),
        ("gitlab", "TL104: cell 3: Tensor moved"),
        ("rdjson", "cell 3: Tensor moved"),
        ("junit", 'message="cell 3: Tensor moved"'),
    ],
)
def test_ci_formats_name_the_cell(nb_data, fmt, expected):
    assert expected in render(fmt, nb_data)


# --- pylint, gitlab, rdjson, junit -------------------------------------------------------


def test_pylint_format(data):
    assert render("pylint", data).splitlines() == [
        "pkg/a.py:3: [TL104] Tensor moved",
        "pkg/a.py:7: [TL501] Legacy profiler",
        "pkg/b.py:1: [TL000] SyntaxError: bad, very: bad",
        "really 100%",
    ]


# The shape of a GitLab Code Quality report, as GitLab documents it
# (https://docs.gitlab.com/ee/ci/testing/code_quality.html#code-quality-report-format).
GITLAB_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string", "minLength": 1},
                    "lines": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1}, "end": {"type": "integer"}},
                    },
                },
            },
        },
    },
}


def test_gitlab_code_quality_shape(data):
    issues = json.loads(render("gitlab", data))
    jsonschema.validate(issues, GITLAB_SCHEMA)
    first = issues[0]
    assert first["check_name"] == "TL104" and first["description"] == "TL104: Tensor moved"
    assert first["location"] == {"path": "pkg/a.py", "lines": {"begin": 3, "end": 3}}
    assert first["severity"] == "major" and issues[2]["severity"] == "critical"  # TL000
    assert len({i["fingerprint"] for i in issues}) == 3


def test_gitlab_fingerprint_is_stable_across_rows_and_distinct_for_twins(data, tmp_path):
    moved = replace(data.findings[0], row=30, end_row=30)
    twin = ReportData(
        findings=[moved, replace(moved, row=31, end_row=31)],
        lines={
            ("pkg/a.py", None, 30): "    x = torch.randn(3).to(device)",
            ("pkg/a.py", None, 31): "  x = torch.randn(3).to(device)",
        },
        cwd=data.cwd,
    )
    original = json.loads(render("gitlab", data))[0]["fingerprint"]
    first, second = (i["fingerprint"] for i in json.loads(render("gitlab", twin)))
    assert first == original  # the same line moved down: the same issue
    assert second != first  # the same text again in the file: another issue
    changed = ReportData(findings=[data.findings[0]], lines={("pkg/a.py", None, 3): "y = torch.randn(3).to(device)"})
    assert json.loads(render("gitlab", changed))[0]["fingerprint"] != original


def test_gitlab_paths_relative_to_ci_project_dir(data, tmp_path, monkeypatch):
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path / "pkg"))
    f = replace(data.findings[0], path=str(tmp_path / "pkg" / "a.py"))
    assert json.loads(render("gitlab", ReportData(findings=[f], cwd=data.cwd)))[0]["location"]["path"] == "a.py"


# The Reviewdog Diagnostic Format (reviewdog/proto/rdf/reviewdog.proto), the
# parts torchlint writes.
_POSITION = {
    "type": "object",
    "required": ["line"],
    "properties": {"line": {"type": "integer", "minimum": 1}, "column": {"type": "integer", "minimum": 1}},
}
_RANGE = {"type": "object", "required": ["start"], "properties": {"start": _POSITION, "end": _POSITION}}
RDJSON_SCHEMA = {
    "type": "object",
    "required": ["source", "diagnostics"],
    "properties": {
        "source": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "url": {"type": "string"}},
        },
        "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
        "diagnostics": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["message", "location"],
                "properties": {
                    "message": {"type": "string"},
                    "location": {
                        "type": "object",
                        "required": ["path"],
                        "properties": {"path": {"type": "string"}, "range": _RANGE},
                    },
                    "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
                    "code": {
                        "type": "object",
                        "required": ["value"],
                        "properties": {"value": {"type": "string"}, "url": {"type": "string"}},
                    },
                    "suggestions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["range", "text"],
                            "properties": {"range": _RANGE, "text": {"type": "string"}},
                        },
                    },
                },
            },
        },
    },
}


def test_rdjson_shape(data):
    doc = json.loads(render("rdjson", data))
    jsonschema.validate(doc, RDJSON_SCHEMA)
    first = doc["diagnostics"][0]
    assert first["location"] == {
        "path": "pkg/a.py",
        "range": {"start": {"line": 3, "column": 5}, "end": {"line": 3, "column": 19}},
    }
    assert first["code"] == {"value": "TL104", "url": rule_url("TL104")}
    assert first["suggestions"] == [
        {"range": {"start": {"line": 3, "column": 15}, "end": {"line": 3, "column": 19}}, "text": ", device="}
    ]
    assert doc["diagnostics"][2]["severity"] == "ERROR" and first["severity"] == "WARNING"
    assert doc["source"]["name"] == "torchlint"


def test_rdjson_columns_count_utf8_bytes():
    f = finding("u.py", "TL104", 1, 6)  # after "é = " and "ü": 2 two-byte characters before column 6
    data = ReportData(findings=[f], lines={("u.py", None, 1): "é = ü(torch.randn(3).to(device))"})
    start = json.loads(render("rdjson", data))["diagnostics"][0]["location"]["range"]["start"]
    assert start == {"line": 1, "column": 8}


def test_junit_xml_parses_one_suite_per_file_one_case_per_finding(data):
    import xml.etree.ElementTree as ET

    root = ET.fromstring(render("junit", data))
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "3"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["pkg/a.py", "pkg/b.py"]
    assert [s.get("tests") for s in suites] == ["2", "1"]
    case = suites[0].find("testcase")
    assert case.attrib == {"name": "org.torchlint.TL104", "classname": "pkg/a", "line": "3", "column": "5"}
    failure = case.find("failure")
    assert failure.get("message") == "Tensor moved" and failure.text == "line 3, col 5, Tensor moved"
    tl000 = suites[1].find("testcase/failure")
    assert tl000.get("message") == "SyntaxError: bad, very: bad\nreally 100%"


def test_junit_clean_run_and_unprintable_characters():
    import xml.etree.ElementTree as ET

    root = ET.fromstring(render("junit", ReportData(findings=[])))
    (suite,) = root.findall("testsuite")
    assert suite.find("testcase").get("name") == "No errors found" and root.get("failures") == "0"
    odd = finding("pkg/b.py", "TL000", 1, 1, fix=None, message="SyntaxError: bad \x0c\x00 byte")
    root = ET.fromstring(render("junit", ReportData(findings=[odd])))
    assert root.find("testsuite/testcase/failure").get("message") == "SyntaxError: bad \ufffd\ufffd byte"
