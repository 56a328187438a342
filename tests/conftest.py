import os
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def root() -> Path:
    return ROOT


class Summarised(List[str]):
    """The paths the project pass summarised (`project_pass.summarize_bytes`), in order."""

    def names(self) -> List[str]:
        return [os.path.basename(p) for p in self]

    def relative(self, root: Path) -> List[str]:
        return [os.path.relpath(p, root) for p in self]


@pytest.fixture
def summarised(monkeypatch) -> Summarised:
    """Record every file the project pass summarises from here on."""
    from torchlint.files import project_pass

    found = Summarised()
    real = project_pass.summarize_bytes

    def spy(path, data):
        found.append(path)
        return real(path, data)

    monkeypatch.setattr(project_pass, "summarize_bytes", spy)
    return found


@pytest.fixture(autouse=True)
def every_rule(monkeypatch):
    """The tests exercise every rule, preview ones included: the command line
    (in this process and in subprocesses) reads TORCHLINT_PREVIEW, and the
    library calls get `helpers.EVERY_RULE`. Tests of the default rule set
    unset it (see tests/test_preview.py)."""
    monkeypatch.setenv("TORCHLINT_PREVIEW", "1")


# -- rule status ---------------------------------------------------------------------------------
# Which rules are stable is measured (torchlint/rules/catalog.py, generated from the judged
# rounds) and changes with every round. A test of what a stable or a preview rule does in the
# default set (no preview mode) sets the status it needs with one of these fixtures instead of
# assuming one; a test about the real catalog reads torchlint.rules (status_of, preview_codes).
# `torchlint.rules.status_of` reads the STATUS dict at each call and nothing caches a result of
# it (preview_codes, Settings.enabled and the hints compute it again), so patching the dict is
# enough in this process; a subprocess (the slow CLI tests) sees the real catalog.

STABLE_RULE = "TL303"  # loader-no-pin-memory: one finding per loader, with a safe fix


def _judged_codes():
    from torchlint.rules import CATALOG
    from torchlint.rules.stability import ALWAYS_REPORTED

    return sorted(set(CATALOG) - ALWAYS_REPORTED)


@pytest.fixture
def stable_rule(monkeypatch) -> str:
    """TL303 stable (on without preview mode), whatever the catalog says; the
    other rules keep their recorded status. Returns the code."""
    from torchlint.rules import catalog, status_of
    from torchlint.rules.stability import RuleStatus, Stability

    monkeypatch.setitem(
        catalog.STATUS, STABLE_RULE, RuleStatus(Stability.STABLE, judged=20, tp=20, fixes_wrong=0, rounds=(8, 9))
    )
    assert not status_of(STABLE_RULE).is_preview
    return STABLE_RULE


@pytest.fixture
def only_stable_rule(stable_rule, monkeypatch) -> str:
    """TL303 the one stable judged rule (every other judged rule preview)."""
    from torchlint.rules import catalog
    from torchlint.rules.stability import RuleStatus, Stability

    for code in _judged_codes():
        if code != stable_rule:
            monkeypatch.setitem(catalog.STATUS, code, RuleStatus(Stability.PREVIEW))
    return stable_rule


@pytest.fixture
def no_stable_rule(monkeypatch) -> None:
    """Every judged rule preview: the default set holds only TL000 and TL001."""
    from torchlint.rules import catalog, preview_codes
    from torchlint.rules.stability import RuleStatus, Stability

    for code in _judged_codes():
        monkeypatch.setitem(catalog.STATUS, code, RuleStatus(Stability.PREVIEW))
    assert preview_codes() == frozenset(_judged_codes())


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
