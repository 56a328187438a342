"""The pre-commit hooks in .pre-commit-hooks.yaml, run through the real `pre-commit`.

`try-repo` installs torchlint from a git repository into an isolated virtualenv
(pip, so it needs the package index), once per test session: the session
fixture snapshots the working tree (committed or not) into one temporary
repository, so every run uses the same repo and revision and pre-commit's
cache (a temporary PRE_COMMIT_HOME) is reused.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TL104_FIXED, TL104_SRC

pytestmark = pytest.mark.slow

BAD, CLEAN, FIXED = TL104_SRC, TL104_FIXED, TL104_FIXED

NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": 1,
            "metadata": {},
            "outputs": [],
            "source": ["%matplotlib inline\n", "import torch\n", "device = torch.device('cuda')"],
        },
        {"cell_type": "markdown", "metadata": {}, "source": ["Noise:"]},
        {
            "cell_type": "code",
            "execution_count": 2,
            "metadata": {},
            "outputs": [],
            "source": ["!nvidia-smi\n", "x = torch.zeros(3).to(device)"],
        },
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def _git(*args, cwd, env=None):
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)


def _pre_commit(*args, cwd, env):
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def test_manifest_is_valid(root):
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", ".pre-commit-hooks.yaml"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_manifest_declares_both_hooks(root):
    import yaml  # pre-commit depends on PyYAML

    hooks = {h["id"]: h for h in yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"torchlint", "torchlint-fix"}
    # --force-exclude, as in Ruff's hooks: pre-commit names every file, and
    # `exclude` in [tool.torchlint] must still apply to them.
    assert hooks["torchlint"]["entry"] == "torchlint check --force-exclude"
    assert hooks["torchlint-fix"]["entry"] == "torchlint check --fix --force-exclude"
    for h in hooks.values():
        assert h["language"] == "python"
        assert h["types_or"] == ["python", "pyi", "jupyter"]
        assert h["require_serial"] is True


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory):
    """A one-commit git repository holding this working tree (committed or not)."""
    root = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = dict(os.environ, **GIT_ENV)
    try:
        listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=root).stdout
    except subprocess.CalledProcessError:
        pytest.skip("not a git checkout: try-repo needs the project in git")
    snap = tmp_path_factory.mktemp("hook-repo")
    for rel in filter(None, listed.split("\0")):
        src = root / rel
        if src.is_file():
            (snap / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, snap / rel)
    _git("init", "-q", "-b", "main", cwd=snap, env=env)  # the branch the documented `rev: main` names
    _git("add", "-A", cwd=snap, env=env)
    _git("commit", "-q", "-m", "snapshot", cwd=snap, env=env)
    return snap


@pytest.fixture(scope="session")
def pc_env(tmp_path_factory):
    env = dict(os.environ, **GIT_ENV)
    env["PRE_COMMIT_HOME"] = str(tmp_path_factory.mktemp("pre-commit-home"))
    env.pop("PYTHONPATH", None)  # the hook must run the installed copy, not this checkout
    return env


@pytest.fixture
def user_repo(tmp_path, pc_env):
    repo = tmp_path / "user"
    repo.mkdir()
    _git("init", "-q", cwd=repo, env=pc_env)
    (repo / "bad.py").write_text(BAD)
    (repo / "clean.py").write_text(CLEAN)
    (repo / "nb.ipynb").write_text(json.dumps(NOTEBOOK, indent=1) + "\n")
    # preview: the hooks read the project's configuration, and TL104 is a preview rule
    (repo / "pyproject.toml").write_text('[tool.torchlint]\npreview = true\nextend-exclude = ["gen/"]\n')
    (repo / "gen").mkdir()
    (repo / "gen" / "generated.py").write_text(BAD)  # excluded: the hooks must skip it though named
    _git("add", "-A", cwd=repo, env=pc_env)
    return repo


def test_try_repo_fails_on_a_mistake_and_passes_on_clean_code(hook_repo, user_repo, pc_env):
    bad = _pre_commit("try-repo", str(hook_repo), "torchlint", "--files", "bad.py", cwd=user_repo, env=pc_env)
    out = bad.stdout + bad.stderr
    assert bad.returncode == 1, out
    assert "TL104" in out and "bad.py" in out, out
    clean = _pre_commit("try-repo", str(hook_repo), "torchlint", "--files", "clean.py", cwd=user_repo, env=pc_env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert (user_repo / "bad.py").read_text() == BAD  # the lint hook never writes


def test_try_repo_fix_hook_rewrites_the_file(hook_repo, user_repo, pc_env):
    proc = _pre_commit("try-repo", str(hook_repo), "torchlint-fix", "--files", "bad.py", cwd=user_repo, env=pc_env)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # pre-commit fails when a hook modifies files
    assert (user_repo / "bad.py").read_text() == FIXED
    again = _pre_commit("try-repo", str(hook_repo), "torchlint-fix", "--files", "bad.py", cwd=user_repo, env=pc_env)
    assert again.returncode == 0, again.stdout + again.stderr


def test_try_repo_lints_notebooks(hook_repo, user_repo, pc_env):
    """`types_or` includes jupyter, so notebooks reach the hook, which lints their cells."""
    proc = _pre_commit("try-repo", str(hook_repo), "torchlint", "--files", "nb.ipynb", cwd=user_repo, env=pc_env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "TL104" in out and "nb.ipynb" in out and "TL000" not in out, out


# --- the snippets the README documents, run as written ------------------------------------

# The README's remote form names "your clone": the tests put a local copy of this repository there.
UPSTREAM = "/path/to/torchlint"


def _yaml_blocks(path):
    return re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def _documented(root, marker):
    """The README's pre-commit snippet holding `marker`; docs/integrations.md
    must give the same one."""
    (block,) = [b for b in _yaml_blocks(root / "README.md") if marker in b]
    assert block in _yaml_blocks(root / "docs" / "integrations.md"), "README and integrations.md differ"
    return block


def _commit_config(repo, text, env):
    (repo / ".pre-commit-config.yaml").write_text(text)
    _git("add", "-A", cwd=repo, env=env)


def test_readme_remote_hook_pinned_by_autoupdate_works(root, hook_repo, user_repo, pc_env):
    """The README's form: `rev: main`, then `pre-commit autoupdate --freeze`
    pins the latest commit (there are no release tags). The clone's path is
    a local copy of this repository."""
    block = _documented(root, f"repo: {UPSTREAM}")
    assert "rev: main" in block and "v0.1.0" not in block
    _commit_config(user_repo, block.replace(UPSTREAM, str(hook_repo)), pc_env)
    update = _pre_commit("autoupdate", "--freeze", cwd=user_repo, env=pc_env)
    assert update.returncode == 0, update.stdout + update.stderr
    sha = _git("rev-parse", "HEAD", cwd=hook_repo).stdout.strip()
    config = (user_repo / ".pre-commit-config.yaml").read_text()
    assert f"rev: {sha}" in config, config
    _git("add", "-A", cwd=user_repo, env=pc_env)
    proc = _pre_commit("run", "--files", "bad.py", "clean.py", "gen/generated.py", cwd=user_repo, env=pc_env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "TL104" in out and "bad.py" in out and "clean.py" not in out, out
    assert "generated.py" not in out, out


def test_readme_local_hook_works_as_written(root, user_repo, pc_env):
    """The README's `repo: local` form, byte for byte: it runs the torchlint
    installed beside this Python."""
    block = _documented(root, "repo: local")
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "torchlint").exists():
        pytest.skip("no `torchlint` command beside this Python: install the package (pip install -e .)")
    env = dict(pc_env, PATH=f"{bin_dir}{os.pathsep}{pc_env.get('PATH', '')}")
    _commit_config(user_repo, block, env)
    proc = _pre_commit("run", "--all-files", cwd=user_repo, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "bad.py:3:5: TL104" in out and "nb.ipynb:cell 3:2:5: TL104" in out and "clean.py" not in out, out
    assert "generated.py" not in out, out  # extend-exclude applies to the files pre-commit names
    clean = _pre_commit("run", "--files", "clean.py", cwd=user_repo, env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
