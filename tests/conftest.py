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


# -- slow tests ---------------------------------------------------------------------------------
# `@pytest.mark.slow` marks a test that starts real tools or subprocesses (a CLI run
# end to end, pre-commit, flake8, Neovim, wheel builds, the fixture scripts with torch)
# or runs for seconds on its own. pyproject.toml's addopts deselect them (`-m "not slow"`),
# so that `python -m pytest` stays a few minutes on two cores; `python -m pytest -m slow`
# runs them, `-m ""` everything, and .ci/run runs both halves.

_slow_deselected = []


def pytest_deselected(items):
    _slow_deselected.extend(item for item in items if item.get_closest_marker("slow") is not None)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _slow_deselected and "slow" in (config.option.markexpr or ""):
        terminalreporter.write_line(
            f"{len(_slow_deselected)} slow tests not run (subprocess CLIs, real tools, fixture scripts with torch): "
            "`python -m pytest -m slow` runs them (CI runs both)"
        )
