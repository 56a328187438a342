from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True)
def every_rule(monkeypatch):
    """The tests exercise every rule, preview ones included: the command line
    (in this process and in subprocesses) reads TORCHLINT_PREVIEW, and the
    library calls get `helpers.EVERY_RULE`. Tests of the default rule set
    unset it (see tests/test_preview.py)."""
    monkeypatch.setenv("TORCHLINT_PREVIEW", "1")
