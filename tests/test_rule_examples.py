"""Tests generated from every rule's inline VALID / INVALID examples."""

import libcst as cst
import pytest

from torchlint.config import Settings
from torchlint.rules import all_rules

from helpers import fix_source, lint_source

VALID = [(r.CODE, i, src) for r in all_rules() for i, src in enumerate(r.VALID)]
INVALID = [(r.CODE, i, ex) for r in all_rules() for i, ex in enumerate(r.INVALID)]


# TL001 is about reading a file, not its contents: no source can trigger it
# (tests/test_rule_docs.py::test_io_error_page_shows_what_the_runner_reports
# and the CLI tests read an unreadable file instead).
NOT_FROM_CONTENTS = ("TL001",)


def test_every_rule_has_examples():
    for rule in all_rules():
        assert rule.VALID, f"{rule.CODE} has no valid examples"
        assert rule.INVALID or rule.CODE in NOT_FROM_CONTENTS, f"{rule.CODE} has no invalid examples"


@pytest.mark.parametrize("code,i,src", VALID, ids=[f"{c}-valid-{i}" for c, i, _ in VALID])
def test_valid_example_is_clean(code, i, src):
    assert [f for f in lint_source(src, "example.py") if f.code == code] == []


def only(code):
    """Each example is about its own rule: other rules' fixes must not interfere."""
    return Settings(select=(code,), preview=True)


@pytest.mark.parametrize("code,i,ex", INVALID, ids=[f"{c}-invalid-{i}" for c, i, _ in INVALID])
def test_invalid_example_is_flagged_and_fixed(code, i, ex):
    found = [f for f in lint_source(ex.code, "example.py") if f.code == code]
    assert found, f"{code} missed its invalid example {i}"
    if ex.line is not None:
        assert found[0].row == ex.line
    fixed, remaining = fix_source(ex.code, "example.py", only(code), unsafe=ex.unsafe)
    if ex.fixed is None:
        assert (
            all(f.fix is None for f in found)
            or not ex.unsafe
            and all(f.fix.applicability.value == "unsafe" for f in found if f.fix)
        )
        return
    assert fixed == ex.fixed
    cst.parse_module(fixed)  # parses
    assert not [f for f in remaining if f.code == code], "the fix did not clear the finding"
    again, _ = fix_source(fixed, "example.py", only(code), unsafe=ex.unsafe)
    assert again == fixed, "the fix is not idempotent"
    if not ex.unsafe:
        # Safe-only fixing must reach the same result.
        safe_only, _ = fix_source(ex.code, "example.py", only(code))
        assert safe_only == ex.fixed
    else:
        safe_only, _ = fix_source(ex.code, "example.py", only(code))
        assert safe_only == ex.code, "an unsafe fix was applied without --unsafe-fixes"


def test_catalog_matches_the_rule_classes():
    """CATALOG (used without importing the rules) names exactly the discovered rules."""
    from torchlint.rules import CATALOG

    assert CATALOG == {r.CODE: r.NAME for r in all_rules()}
