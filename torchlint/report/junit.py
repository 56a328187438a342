"""`junit`: JUnit XML, as CI systems read test reports.

One `<testsuite>` per file (its path) with one `<testcase>` per finding:
`name="org.torchlint.TL104"`, `classname` (the path without its suffix),
`line` and `column`, and a `<failure>` with the message (a notebook
finding's starts with its cell). A clean run is one suite with one passing
test case, `No errors found`. Attribute and element order is fixed, so the
same findings give the same bytes.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from itertools import groupby
from typing import List

from torchlint.findings import Finding
from torchlint.report import ReportData, cell_prefix

PACKAGE = "org.torchlint"
# Characters XML 1.0 cannot hold at all, even escaped (a TL000 message may
# quote them): shown as U+FFFD.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _suite(name: str, findings: List[Finding]) -> ET.Element:
    return ET.Element(
        "testsuite",
        {
            "name": _xml(name),
            "tests": str(len(findings)),
            "disabled": "0",
            "errors": "0",
            "failures": str(len(findings)),
            "package": PACKAGE,
        },
    )


def to_xml(data: ReportData) -> ET.Element:
    n = len(data.findings)
    root = ET.Element("testsuites", {"name": "torchlint", "tests": str(max(n, 1)), "failures": str(n), "errors": "0"})
    if not n:
        suite = _suite("torchlint", [])
        suite.set("tests", "1")
        ET.SubElement(suite, "testcase", {"name": "No errors found", "classname": "torchlint"})
        root.append(suite)
        return root
    for path, group in groupby(data.findings, key=lambda f: f.path):
        findings = list(group)
        rel = data.relpath(path).replace("\\", "/")
        suite = _suite(rel, findings)
        classname = os.path.splitext(rel)[0]
        for f in findings:
            case = ET.SubElement(
                suite,
                "testcase",
                {
                    "name": f"{PACKAGE}.{f.code}",
                    "classname": _xml(classname),
                    "line": str(f.row),
                    "column": str(f.column),
                },
            )
            message = cell_prefix(f) + f.message
            where = f"cell {f.cell}, " if f.cell is not None else ""
            failure = ET.SubElement(case, "failure", {"message": _xml(message), "type": f.code})
            failure.text = _xml(f"{where}line {f.row}, col {f.column}, {f.message}")
        root.append(suite)
    return root


def render(data: ReportData) -> str:
    root = to_xml(data)
    ET.indent(root, space="    ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
