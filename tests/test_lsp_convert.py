"""Unit tests for the language server's plain conversions."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchlint.doors.lsp.convert import (
    UTF8,
    UTF16,
    UTF32,
    ClientSettings,
    TextLines,
    fix_data,
    kind_wanted,
    overlaps,
    parse_client_settings,
    settings_section,
)
from torchlint.findings import Applicability, Edit, Finding, Fix

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("encoding, expected", [(UTF16, 13), (UTF8, 17), (UTF32, 12)])
def test_positions_count_code_units_of_the_negotiated_encoding(encoding, expected):
    # `y` is code point 12 of the line: the emoji before it is 2 UTF-16 units and
    # 4 UTF-8 bytes, the CJK character 1 UTF-16 unit and 3 UTF-8 bytes.
    line = "s = 'a😀数b'; y"
    assert line.index("y") == 12
    lines = TextLines("x = 1\n" + line + "\n", encoding)
    assert lines.position(2, 13) == (1, expected)
    assert lines.position(2, 1) == (1, 0)


def test_positions_ascii_and_end_of_file():
    lines = TextLines("ab\ncd\n")
    assert lines.position(1, 1) == (0, 0)
    assert lines.position(2, 3) == (1, 2)
    assert lines.position(3, 1) == (2, 0)  # after the last newline
    assert lines.position(9, 1) == (2, 0)  # past the end: clamped to the end


def test_overlaps_is_inclusive():
    assert overlaps(((1, 0), (1, 5)), ((1, 5), (1, 5)))
    assert not overlaps(((1, 0), (1, 5)), ((1, 6), (2, 0)))


def test_kind_filter_follows_the_hierarchy():
    assert kind_wanted("source.fixAll.torchlint", None)
    assert kind_wanted("source.fixAll.torchlint", ["source"])
    assert kind_wanted("source.fixAll.torchlint", ["source.fixAll"])
    assert not kind_wanted("source.fixAll.torchlint", ["quickfix"])
    assert not kind_wanted("source.fixAll.torchlint", ["source.fix"])  # not a dot-boundary prefix
    assert kind_wanted("quickfix", ["quickfix"])


def test_fix_data_is_ruff_shaped():
    fix = Fix(Applicability.UNSAFE, "do it", (Edit(1, 2, 1, 4, "zz"),))
    f = Finding("TL104", "create-then-move", "m", "p.py", 1, 1, 1, 5, fix, noqa_row=1)
    assert fix_data(f) == {
        "code": "TL104",
        "fix": {
            "applicability": "unsafe",
            "message": "do it",
            "edits": [{"content": "zz", "location": {"row": 1, "column": 2}, "end_location": {"row": 1, "column": 4}}],
        },
        "noqa_row": 1,
    }
    assert fix_data(Finding("TL000", "syntax-error", "m", "p.py", 1, 1, 1, 1))["fix"] is None


def test_client_settings_shapes_and_errors():
    assert parse_client_settings(None) == (ClientSettings(), [])
    for raw in ({"ignore": ["TL501"]}, {"torchlint": {"ignore": "TL501"}}, {"settings": {"ignore": ["TL501"]}}):
        assert parse_client_settings(raw)[0] == ClientSettings(ignore=("TL501",)), raw
    settings, errors = parse_client_settings({"select": "TL1, TL5", "extendSelect": ["TL4"], "unsafeFixes": False})
    assert settings == ClientSettings(select=("TL1", "TL5"), extend_select=("TL4",), unsafe_fixes=False)
    assert errors == []
    assert settings_section({"python": {"analysis": 1}}) is None  # another tool's settings
    assert settings_section({}) == {}
    settings, errors = parse_client_settings({"select": 3, "unsafeFixes": "no"})
    assert settings == ClientSettings() and len(errors) == 2


def test_server_module_is_cheap_to_import():
    """`torchlint.doors.server` (what the CLI registers) must not import pygls or torch."""
    import subprocess
    import sys

    code = (
        "import sys, torchlint.doors.server as s; assert s.server_command.name == 'server'; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
