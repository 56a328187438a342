"""Every install command in the README and the docs works for a reader
(issues 27 and 40): torchlint is not published yet (not on PyPI, and its
public repository does not exist yet), so it is installed from a clone or a
wheel built from one, and a CPU torch comes from PyTorch's CPU index, never
as a pinned `torch==2.13.0`. The forms are checked statically; the slow tests
run the clone and wheel forms for real, offline."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint import __version__

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
REPO_URL = "https://github.com/torchlint/torchlint"
LOCAL_REQUIREMENT = re.compile(r"^\.(\[[a-z,]+\])?$")
WHEEL = f"dist/torchlint-{__version__}-py3-none-any.whl"
WHEEL_REQUIREMENT = re.compile("^" + re.escape(WHEEL) + r"(\[[a-z,]+\])?$")
# Third-party distributions the docs install by name: all on PyPI.
ON_PYPI = {"torch", "nvidia-ml-py", "matplotlib", "libcst", "click", "pathspec", "tomli", "pre-commit", "flake8"}
WITH_VALUE = {"--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--target", "-t", "-r"}
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _spans(text: str):
    """Code in the docs: each line of a fenced block, and each inline span."""
    fenced = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
    for block in fenced.findall(text):
        yield from re.sub(r"\\\n\s*", " ", block).splitlines()  # lines continued with a backslash
    for span in re.findall(r"`([^`]+)`", fenced.sub("", text)):
        yield " ".join(span.split())


def install_commands():
    """(doc, command) for every `pip install` a reader would run."""
    found = []
    for doc in DOCS:
        for span in _spans(doc.read_text(encoding="utf-8")):
            for part in span.split("&&"):
                part = re.sub(r"^\s*\$\s*", "", part).strip()  # a console prompt
                part = re.sub(r"\s+#.*$", "", part)  # a trailing comment
                part = re.sub(r"^(python3? -m )", "", part)
                if part.startswith("pip install ") and "..." not in part:
                    found.append((doc.relative_to(ROOT).as_posix(), part))
    return found


COMMANDS = install_commands()


def test_the_docs_have_install_commands():
    docs = {doc for doc, _ in COMMANDS}
    assert {"README.md", "CONTRIBUTING.md", "docs/editors.md", "docs/verify.md"} <= docs
    assert ("README.md", "pip install .") in COMMANDS and ("README.md", f"pip install {WHEEL}") in COMMANDS


def test_no_doc_installs_from_the_repository_that_is_not_published_yet():
    """The public URL is named only as where the project will live."""
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert f"git+{REPO_URL}" not in text, doc.name
        for line in text.splitlines():
            if REPO_URL in line and "repo:" not in line:
                assert "not published yet" in text or "once published" in text, (doc.name, line)


@pytest.mark.parametrize("doc,command", COMMANDS, ids=[f"{d}:{c}" for d, c in COMMANDS])
def test_every_install_command_works_outside_this_machine(doc, command):
    args = shlex.split(command)[2:]
    options, requirements = {}, []
    i = 0
    while i < len(args):
        if args[i] in WITH_VALUE:
            options[args[i]] = args[i + 1]
            i += 2
            continue
        if not args[i].startswith("-"):
            requirements.append(args[i])
        i += 1
    assert requirements, command
    for req in requirements:
        name = re.split(r"[\[=<>@ ]", req, maxsplit=1)[0]
        if name == "torchlint":
            raise AssertionError(f"torchlint is not published yet: install it from a clone or a wheel ({command})")
        elif LOCAL_REQUIREMENT.match(req) or WHEEL_REQUIREMENT.match(req):
            continue  # a clone, or the wheel built from one as the README says
        else:
            assert name in ON_PYPI, f"{req!r} is not a distribution on PyPI ({command})"
            if name == "torch":
                assert "==" not in req, f"torch {req} is the local index's build, not on PyPI as a CPU build"
                index = options.get("--index-url", options.get("-i"))
                assert index is None or index.startswith("https://download.pytorch.org/whl/"), command


def test_a_cpu_torch_is_installed_from_the_cpu_index_before_the_quick_start():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme.index("## Quick start")
    assert f"pip install torch --index-url {CPU_INDEX}" in readme[:quick]
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert f"pip install torch --index-url {CPU_INDEX}" in contributing


def test_the_documented_wheel_name_is_the_one_pip_builds():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`pip wheel --no-deps -w dist .`" in readme and WHEEL in readme


def _git(*args, cwd):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t")
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A git repository holding this checkout's files (what a clone has)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the clone and git-URL installs need it")
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout
    repo = tmp_path_factory.mktemp("clone") / "torchlint"
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / rel)
    _git("init", "-q", "-b", "main", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-q", "-m", "snapshot", cwd=repo)
    return repo


def _pip(*args, cwd):
    # Offline: no dependencies and no build isolation (setuptools comes from
    # this environment); what is checked is that the documented form builds
    # and installs torchlint itself.
    cmd = [sys.executable, "-m", "pip", *args, "--no-deps", "--no-build-isolation", "-q"]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)


def _works(target: Path) -> None:
    """The installed copy runs from an empty folder: `--version` and a lint."""
    empty = target.parent / "empty"
    empty.mkdir(exist_ok=True)
    (empty / "a.py").write_text("import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3).to(device)\n")
    env = dict(os.environ, PYTHONPATH=str(target))
    cmd = [sys.executable, "-m", "torchlint"]
    version = subprocess.run([*cmd, "--version"], cwd=empty, env=env, capture_output=True, text=True, timeout=120)
    assert version.stdout == f"torchlint {__version__}\n", version.stderr
    where = subprocess.run(
        [sys.executable, "-c", "import torchlint; print(torchlint.__file__)"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.startswith(str(target)), where.stdout  # the installed copy, not this checkout
    lint = subprocess.run([*cmd, "check", "--no-cache", "a.py"], cwd=empty, env=env, capture_output=True, text=True)
    assert lint.returncode == 1 and "a.py:3:5: TL104" in lint.stdout, lint.stdout + lint.stderr


@pytest.mark.slow
def test_the_readme_wheel_built_from_a_clone_installs_and_runs(clone, tmp_path):
    """`pip wheel --no-deps -w dist .` in a clone writes the wheel the README
    names, and `pip install` of that file gives a working torchlint."""
    work = tmp_path / "clone"
    shutil.copytree(clone, work)
    built = _pip("wheel", "-w", "dist", ".", cwd=work)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (work / WHEEL).is_file(), sorted(p.name for p in (work / "dist").iterdir())
    target = tmp_path / "site"
    installed = _pip("install", "--target", str(target), WHEEL, cwd=work)
    assert installed.returncode == 0, installed.stderr[-3000:]
    _works(target)


@pytest.mark.slow
def test_the_readme_clone_install_works(clone, tmp_path):
    """The README's `pip install .` in a clone gives a working torchlint."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install .              # the linter" in readme
    work = tmp_path / "clone"
    shutil.copytree(clone, work)
    target = tmp_path / "site"
    installed = _pip("install", "--target", str(target), ".", cwd=work)
    assert installed.returncode == 0, installed.stderr[-3000:]
    _works(target)
