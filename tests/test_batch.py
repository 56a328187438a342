"""lint_many: cache + pool + order, as the runner uses them."""
from __future__ import annotations

import pytest

from torchlint import parallel
from torchlint.api import lint_bytes
from torchlint.batch import cache_root_for, lint_many
from torchlint.cache import CACHE_DIR_NAME
from torchlint.config import Settings

BAD = "import torch\nx = torch.randn(3).to('cuda')\n"


@pytest.fixture
def project(tmp_path):
    paths = []
    for i in range(12):
        p = tmp_path / f"m{i:02d}.py"
        p.write_text(BAD if i % 3 == 0 else f"import os\nx = {i}\n")
        paths.append(str(p))
    (tmp_path / "broken.py").write_text("def f(:\n")
    paths.append(str(tmp_path / "broken.py"))
    return tmp_path, paths


def _expected(paths, settings):
    return [lint_bytes(open(p, "rb").read(), p, settings) for p in paths]


def test_same_results_in_order_with_pool_and_cache(project, monkeypatch):
    monkeypatch.setattr(parallel, "MIN_POOL_WEIGHT", 0)
    root, paths = project
    s = Settings()
    expected = _expected(paths, s)
    assert [r.path for r in expected] == paths
    assert lint_many(paths, s, jobs=2) == expected
    assert not (root / CACHE_DIR_NAME).exists()
    assert lint_many(paths, s, jobs=2, cache_root=root) == expected  # cold, fills the cache
    assert (root / CACHE_DIR_NAME / "CACHEDIR.TAG").is_file()
    assert lint_many(paths, s, jobs=1, cache_root=root) == expected  # warm
    codes = [[f.code for f in r.findings] for r in expected]
    assert codes[0] == ["TL104"] and codes[1] == [] and codes[-1] == ["TL000"]


def test_warm_run_does_not_lint_again(project, monkeypatch):
    root, paths = project
    s = Settings()
    first = lint_many(paths, s, cache_root=root)
    import torchlint.batch as batch

    monkeypatch.setattr(batch, "_work", lambda item: (_ for _ in ()).throw(AssertionError("linted")))
    assert lint_many(paths, s, cache_root=root) == first


def test_settings_change_misses(project):
    root, paths = project
    lint_many(paths, Settings(), cache_root=root)
    res = lint_many(paths, Settings(ignore=("TL104",)), cache_root=root)
    assert all(f.code != "TL104" for r in res for f in r.findings)


def test_edited_file_misses(project):
    root, paths = project
    lint_many(paths, Settings(), cache_root=root)
    with open(paths[1], "w") as fh:
        fh.write(BAD)
    assert [f.code for f in lint_many(paths, Settings(), cache_root=root)[1].findings] == ["TL104"]


def test_unreadable_file_is_a_problem(project):
    root, paths = project
    res = lint_many([str(root / "missing.py")] + paths[:1], Settings(), cache_root=root)
    assert res[0].problems and "cannot read" in res[0].problems[0].message
    assert [f.code for f in res[1].findings] == ["TL104"]


def test_fix_mode_returns_fixed_source(project):
    root, paths = project
    (res,) = lint_many(paths[:1], Settings(), fix=True, cache_root=root)
    assert res.fixed_source == "import torch\nx = torch.randn(3, device='cuda')\n"
    assert res.fixes_applied == 1 and res.findings == ()
    (again,) = lint_many(paths[:1], Settings(), fix=True, cache_root=root)
    assert again == res


def test_cache_root_for(tmp_path):
    assert cache_root_for(Settings(root=str(tmp_path))) == str(tmp_path)
