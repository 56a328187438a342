import os
from pathlib import Path

import pytest

from torchlint.config import Settings
from torchlint.files import discovery
from torchlint.files.discovery import discover


def touch(path: Path, text: str = "x = 1\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def names(result, root: Path):
    return [Path(p).relative_to(root).as_posix() for p in result.files]


def settings(root: Path, **kw) -> Settings:
    return Settings(root=str(root), **kw)


def test_recurses_py_and_ipynb_sorted(tmp_path):
    for rel in ["b.py", "a/z.py", "a/m.ipynb", "a/readme.md", "c.pyc", "a/b/deep.py"]:
        touch(tmp_path / rel)
    got = discover([str(tmp_path)], settings(tmp_path))
    assert names(got, tmp_path) == ["a/b/deep.py", "a/m.ipynb", "a/z.py", "b.py"]
    assert got.problems == ()


def test_skips_git_pycache_venvs_and_default_excludes(tmp_path):
    touch(tmp_path / "keep.py")
    touch(tmp_path / ".git" / "hook.py")
    touch(tmp_path / "pkg" / "__pycache__" / "mod.py")
    touch(tmp_path / "myenv" / "pyvenv.cfg", "home = /usr\n")
    touch(tmp_path / "myenv" / "lib" / "site.py")
    touch(tmp_path / "build" / "gen.py")
    got = discover([str(tmp_path)], settings(tmp_path))
    assert names(got, tmp_path) == ["keep.py"]


def test_exclude_and_extend_exclude(tmp_path):
    touch(tmp_path / "a.py")
    touch(tmp_path / "gen" / "b.py")
    touch(tmp_path / "c_pb2.py")
    got = discover([str(tmp_path)], settings(tmp_path, extend_exclude=("gen/", "*_pb2.py")))
    assert names(got, tmp_path) == ["a.py"]


def test_explicit_file_is_included_even_if_excluded_unless_forced(tmp_path):
    f = touch(tmp_path / "gen" / "b.py")
    s = settings(tmp_path, extend_exclude=("gen/",))
    assert discover([str(f)], s).files == (str(f),)
    assert discover([str(f)], s, force_exclude=True).files == ()


def test_gitignore_nested_and_negated(tmp_path):
    touch(tmp_path / ".gitignore", "ignored/\n*_gen.py\n")
    touch(tmp_path / "ok.py")
    touch(tmp_path / "ignored" / "x.py")
    touch(tmp_path / "model_gen.py")
    touch(tmp_path / "sub" / ".gitignore", "!keep_gen.py\nlocal.py\n")
    touch(tmp_path / "sub" / "keep_gen.py")
    touch(tmp_path / "sub" / "other_gen.py")
    touch(tmp_path / "sub" / "local.py")
    touch(tmp_path / "local.py")  # the nested file's pattern does not apply above it
    got = discover([str(tmp_path)], settings(tmp_path))
    assert names(got, tmp_path) == ["local.py", "ok.py", "sub/keep_gen.py"]


def test_gitignore_above_walked_folder_applies_inside_git_repo(tmp_path):
    (tmp_path / ".git").mkdir()
    touch(tmp_path / ".gitignore", "secret.py\n")
    touch(tmp_path / "src" / "secret.py")
    touch(tmp_path / "src" / "main.py")
    got = discover([str(tmp_path / "src")], settings(tmp_path))
    assert names(got, tmp_path) == ["src/main.py"]


def test_gitignore_above_walked_folder_ignored_outside_git_repo(tmp_path):
    touch(tmp_path / ".gitignore", "secret.py\n")
    touch(tmp_path / "src" / "secret.py")
    got = discover([str(tmp_path / "src")], settings(tmp_path))
    assert names(got, tmp_path) == ["src/secret.py"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks on this platform")
def test_symlink_loop_terminates_and_files_listed_once(tmp_path):
    touch(tmp_path / "a" / "m.py")
    os.symlink(tmp_path, tmp_path / "a" / "loop")
    os.symlink(tmp_path / "a" / "m.py", tmp_path / "alias.py")
    got = discover([str(tmp_path)], settings(tmp_path))
    assert names(got, tmp_path) == ["a/m.py"]
    assert got.problems == ()


def test_missing_path_and_broken_symlink_are_problems(tmp_path):
    os.symlink(tmp_path / "nowhere.py", tmp_path / "broken.py")
    got = discover([str(tmp_path / "missing.py"), str(tmp_path / "broken.py")], settings(tmp_path))
    assert got.files == ()
    msgs = sorted(p.message for p in got.problems)
    assert msgs == [
        f"broken symlink (its target {str(tmp_path / 'nowhere.py')!r} does not exist)",
        "no such file or directory",
    ]
    # a broken symlink found while walking is skipped silently
    assert discover([str(tmp_path)], settings(tmp_path)).problems == ()


def test_unreadable_directory_is_a_problem_not_a_crash(tmp_path, monkeypatch):
    touch(tmp_path / "ok.py")
    touch(tmp_path / "locked" / "x.py")
    real = os.scandir

    def scandir(path):
        if os.path.basename(str(path)) == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(discovery.os, "scandir", scandir)
    got = discover([str(tmp_path)], settings(tmp_path))
    assert names(got, tmp_path) == ["ok.py"]
    assert len(got.problems) == 1 and "Permission denied" in got.problems[0].message


def test_relative_paths_are_normalised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "pkg" / "a.py")
    assert discover(["."], settings(tmp_path)).files == (os.path.join("pkg", "a.py"),)
    assert discover(["./pkg/"], settings(tmp_path)).files == (os.path.join("pkg", "a.py"),)


def test_excludes_above_an_explicit_folder_do_not_apply(tmp_path):
    project = tmp_path / "project"
    lib = tmp_path / "venv" / "lib" / "site-packages" / "pkg"
    touch(lib / "mod.py")
    touch(lib / "build" / "skip.py")
    s = settings(project)
    # outside the root: only what lies below the named folder is matched
    assert names(discover([str(lib)], s), lib) == ["mod.py"]
    # inside the root but explicitly named although excluded
    inner = project / ".venv" / "lib" / "pkg"
    touch(inner / "m.py")
    assert names(discover([str(inner)], s), inner) == ["m.py"]
    # the folder holding it is still excluded when the root is walked
    assert discover([str(project)], s).files == ()


def test_root_anchored_exclude(tmp_path, monkeypatch):
    touch(tmp_path / "gen" / "a.py")
    touch(tmp_path / "src" / "gen" / "b.py")
    s = settings(tmp_path, extend_exclude=("/gen/",))
    assert names(discover([str(tmp_path)], s), tmp_path) == ["src/gen/b.py"]
    assert names(discover([str(tmp_path / "src")], s), tmp_path) == ["src/gen/b.py"]


def test_named_folder_is_walked_though_a_gitignore_above_ignores_it(tmp_path):
    (tmp_path / ".git").mkdir()
    touch(tmp_path / ".gitignore", "data/\n*.tmp.py\n")
    touch(tmp_path / "data" / "checkouts" / "a.py")
    touch(tmp_path / "data" / "checkouts" / "b.tmp.py")
    touch(tmp_path / "data" / "checkouts" / "sub" / "c.py")
    inner = tmp_path / "data" / "checkouts"
    got = discover([str(inner)], settings(tmp_path))
    assert names(got, tmp_path) == ["data/checkouts/a.py", "data/checkouts/sub/c.py"]
    assert discover([str(tmp_path)], settings(tmp_path)).files == ()


def test_patterns_match_each_entry_by_its_own_path(tmp_path):
    (tmp_path / ".git").mkdir()
    touch(tmp_path / ".gitignore", "data*\n")
    touch(tmp_path / "data" / "data_loader.py")  # its own name matches: ignored
    touch(tmp_path / "data" / "model.py")  # only its folder matches, and that folder was named
    assert names(discover([str(tmp_path / "data")], settings(tmp_path)), tmp_path) == ["data/model.py"]


def test_respect_gitignore_off(tmp_path):
    touch(tmp_path / ".gitignore", "ignored/\n")
    touch(tmp_path / "ignored" / "a.py")
    touch(tmp_path / "sub" / ".gitignore", "*.py\n")
    touch(tmp_path / "sub" / "b.py")
    assert discover([str(tmp_path)], settings(tmp_path)).files == ()
    got = discover([str(tmp_path)], settings(tmp_path, respect_gitignore=False))
    assert names(got, tmp_path) == ["ignored/a.py", "sub/b.py"]


def test_force_exclude_applies_to_named_folders(tmp_path):
    touch(tmp_path / "gen" / "a.py")
    s = settings(tmp_path, extend_exclude=("gen/",))
    assert names(discover([str(tmp_path / "gen")], s), tmp_path) == ["gen/a.py"]
    assert discover([str(tmp_path / "gen")], s, force_exclude=True).files == ()
    assert (
        discover([str(tmp_path / "gen")], settings(tmp_path, extend_exclude=("gen/",), force_exclude=True)).files == ()
    )


def test_cli_exclusions_are_relative_to_their_own_folder(tmp_path):
    touch(tmp_path / "gen" / "a.py")
    touch(tmp_path / "pkg" / "gen" / "b.py")
    s = settings(tmp_path, cli_extend_exclude=("/gen",), cli_root=str(tmp_path / "pkg"))
    assert names(discover([str(tmp_path)], s), tmp_path) == ["gen/a.py"]
    replaced = settings(tmp_path, cli_exclude=("gen",), cli_root=str(tmp_path))
    touch(tmp_path / "build" / "c.py")  # a default exclude, gone once --exclude replaces them
    assert names(discover([str(tmp_path)], replaced), tmp_path) == ["build/c.py"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_special_files_and_symlink_loops_named_explicitly(tmp_path):
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    os.mkfifo(tmp_path / "pipe.py")
    got = discover([str(tmp_path / "loop"), str(tmp_path / "pipe.py")], settings(tmp_path))
    assert got.files == ()
    assert sorted(p.message for p in got.problems) == [
        "not a regular file: a FIFO (named pipe); skipped",
        "symlink loop (too many levels of symbolic links)",
    ]
    # found while walking, both are skipped silently (and the FIFO never opened)
    assert discover([str(tmp_path)], settings(tmp_path)) == discovery.Discovered((), ())


def test_a_folder_removed_during_the_walk_is_skipped_not_a_problem(tmp_path, monkeypatch):
    """Like a broken link found while walking: a folder listed by its parent
    and gone (or replaced by a file) before it is read is skipped silently;
    a folder the user named that cannot be read is still a problem."""
    touch(tmp_path / "keep" / "a.py")
    touch(tmp_path / "gone" / "b.py")
    touch(tmp_path / "swapped" / "c.py")
    real_scandir = os.scandir

    def racing(path):
        name = os.path.basename(os.fspath(path))
        if name == "gone":
            raise FileNotFoundError(2, "No such file or directory")
        if name == "swapped":
            raise NotADirectoryError(20, "Not a directory")
        return real_scandir(path)

    monkeypatch.setattr(discovery.os, "scandir", racing)
    got = discover([str(tmp_path)], settings(tmp_path))
    assert names(got, tmp_path) == ["keep/a.py"] and got.problems == ()
    got = discover([str(tmp_path / "gone")], settings(tmp_path))
    assert [p.message for p in got.problems] == ["cannot read directory: No such file or directory"]
