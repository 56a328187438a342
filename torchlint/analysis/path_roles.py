"""What a file's path says about its role, read without LibCST: the analysis
uses it (torchlint/analysis/roles.py) and so does the results cache's key
(torchlint/files/cache.py), which must not import LibCST or the rest of the
analysis (this module and torchlint/analysis/__init__.py import neither)."""

from __future__ import annotations

import enum
import re

# pytest's own collection rules: `test_*.py`, `*_test.py`, `conftest.py`, and files under a
# `tests/`, `testing/` or `test_utils/` folder (test support). A tutorial's `test.py` that
# evaluates a model on a test set is not a unit test.
TEST_PATH = re.compile(
    r"(^|[\\/])(test_[^\\/]*|[^\\/]*_test|conftest)\.(py|ipynb)$|(^|[\\/])(tests?|testing|test_utils)[\\/]"
)
# A file whose name says it benchmarks or profiles (`benchmarks.py`, `latency.py`): tooling.
BENCHMARK_FILE = re.compile(r"(^|[\\/])[^\\/]*(bench|latency|throughput|profil)[^\\/]*\.(py|ipynb)$", re.I)


class PathRole(enum.Enum):
    TEST = "test"
    BENCHMARK = "benchmark"
    CODE = "code"


def path_role(path: str) -> PathRole:
    """The role a file's path gives it."""
    posix = path.replace("\\", "/")
    if TEST_PATH.search(posix):
        return PathRole.TEST
    if BENCHMARK_FILE.search(posix):
        return PathRole.BENCHMARK
    return PathRole.CODE
