"""The seed blocks (a copy of the product's seed documents in tests/data/seeds): every expected TL100-TL105 finding, and no other finding of those codes."""

import json
from pathlib import Path

import pytest

from helpers import lint_source

SEEDS = Path(__file__).resolve().parent / "data" / "seeds"
CODES = {"TL100", "TL101", "TL102", "TL103", "TL104", "TL105"}
LABELS = json.loads((SEEDS / "expected.json").read_text())
NAMES = sorted(k for k in LABELS if not k.startswith("_"))


@pytest.mark.parametrize("name", NAMES)
def test_seed_placement_findings(name):
    label = LABELS[name]
    expect = {tuple(x) for x in label["expect"] if x[0] in CODES}
    optional = {tuple(x) for x in label.get("optional", []) if x[0] in CODES}
    path = SEEDS / "blocks" / name
    # the bare name: a path under tests/ would make every block a test file
    got = {(f.code, f.row) for f in lint_source(path.read_text(), name) if f.code in CODES}
    assert expect - got == set(), "missed"
    assert got - expect - optional == set(), "false positives"
