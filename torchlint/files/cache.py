"""The results cache: `.torchlint_cache/` at the project root.

An entry holds what the runner produced for one file (a `FileOutcome`, or any
picklable value made of torchlint's own classes and builtins), keyed by

- the blake2b hash of the file's bytes, never by its path: the same file
  linted as `src/a.py` from the project root and as `a.py` from `src/` is one
  entry, and the runner gives a hit the path of the run that reads it
  (`torchlint.engine.outcome.relabel`), so no run ever prints another run's path;
- what the pipeline reads from a path besides its contents (`path_variant`):
  whether it is a notebook, and whether the analysis takes it for a test file;
- the codes enabled for that file (per-file-ignores included: the caller's
  `variant` string) and the run's settings (`settings_key`);
- torchlint's version and a fingerprint of its installed source files (so an
  edited checkout never reads results of older code).

Layout: `.torchlint_cache/CACHEDIR.TAG` (https://bford.info/cachedir/),
`.torchlint_cache/.gitignore` (`*`), and `.torchlint_cache/<version>/<aa>/<key>`
entries. Safe under concurrent runs: every entry is written to a temp file in
the same folder and moved into place with `os.replace`, so a reader sees a
whole old entry, a whole new one, or none. Each entry carries a checksum; a
corrupted or truncated entry reads as a miss and is rewritten by the next
`put`. A cache that cannot be written (read-only folder, full disk) is
silently skipped: it only ever costs speed, never results.

Entries are unpickled with an allow-list (torchlint's classes and plain
builtins only), so a planted file in the cache folder cannot run code.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import shutil
from pathlib import Path
from typing import Any, Iterable, Optional, Union

import click

from torchlint import __version__
from torchlint.files.atomic_write import write_atomic

CACHE_DIR_NAME = ".torchlint_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by torchlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
_MAGIC = b"TLCACHE1"
_DIGEST = 16
_SAFE_BUILTINS = frozenset(
    {"frozenset", "set", "tuple", "list", "dict", "str", "int", "float", "bool", "bytes", "complex", "slice", "range"}
)

_fingerprint: Optional[str] = None


def code_fingerprint() -> str:
    """A hash of torchlint's own source files (path, size, mtime): changes when
    the code that produced a result changes, even at the same version."""
    global _fingerprint
    if _fingerprint is None:
        pkg = Path(__file__).resolve().parents[1]  # the torchlint package
        h = hashlib.blake2b(digest_size=16)
        for p in sorted(pkg.rglob("*.py")):
            try:
                st = p.stat()
            except OSError:
                continue
            h.update(f"{p.relative_to(pkg).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        _fingerprint = h.hexdigest()
    return _fingerprint


def settings_key(
    enabled: Iterable[str], per_file_ignores: Any = (), fix: bool = False, unsafe: bool = False, extra: str = ""
) -> str:
    """A stable string for the settings that change a file's result.

    `enabled`: the run's enabled codes (`Settings.enabled()`); `per_file_ignores`:
    `Settings.per_file_ignores` (the path is in the key too, so this makes the
    per-file selection part of it); `fix`/`unsafe`: the fix mode."""
    pfi = ";".join(f"{pattern}={','.join(sorted(codes))}" for pattern, codes in sorted(per_file_ignores))
    return f"codes={','.join(sorted(set(enabled)))}|pfi={pfi}|fix={int(bool(fix))}|unsafe={int(bool(unsafe))}|{extra}"


def settings_key_for(settings, fix: bool = False, unsafe: bool = False) -> str:
    """`settings_key` for a `torchlint.config.Settings`.

    Uses the selectors as written (upper-cased, sorted) rather than the expanded
    code set: what a selector expands to only changes with torchlint's code,
    which the key already covers, and expanding would import every rule (and
    LibCST) on a run that may need neither."""

    def norm(selectors) -> list:
        return sorted({s.strip().upper() for s in selectors if s.strip()})

    return settings_key(
        [
            "select:" + ",".join(norm(settings.select)),
            "extend:" + ",".join(norm(settings.extend_select)),
            "ignore:" + ",".join(norm(settings.ignore)),
            f"preview:{int(bool(getattr(settings, 'preview', False)))}",
        ],
        settings.per_file_ignores,
        fix,
        unsafe,
    )


# What the pipeline reads from a file's path besides its contents: the suffix
# (a notebook is read as JSON) and the role the path gives the file
# (torchlint/analysis/path_roles.py: a test file, a benchmark script).


def path_variant(path: str) -> str:
    """The part of a file's result that depends on its path rather than its
    contents, as a key: the kind of file and the role its path gives it."""
    from torchlint.analysis.path_roles import path_role

    kind = "ipynb" if path.endswith(".ipynb") else "py"
    return f"{kind}|{path_role(path).value}"


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if module == "torchlint" or module.startswith("torchlint."):
            return super().find_class(module, name)
        if module == "builtins" and name in _SAFE_BUILTINS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"cache entry refers to {module}.{name}: not allowed")


def _loads(data: bytes) -> Any:
    return _SafeUnpickler(io.BytesIO(data)).load()


class Cache:
    """Per-file results under `<root>/.torchlint_cache/`, or under `cache_dir`
    when given (`--cache-dir`, `cache-dir`, `TORCHLINT_CACHE_DIR`)."""

    def __init__(
        self,
        root: Union[str, Path],
        settings_key: str,
        version: str = __version__,
        cache_dir: Union[str, Path, None] = None,
    ) -> None:
        self.root = Path(root)
        self.dir = Path(cache_dir) if cache_dir is not None else self.root / CACHE_DIR_NAME
        self.version = version
        self.settings_key = settings_key
        self._prefix = f"{version}\0{code_fingerprint()}\0{settings_key}\0".encode()
        self._ready = False
        self.disabled = False
        self.hits = 0
        self.misses = 0

    def key(self, content: bytes, variant: str = "") -> str:
        """The entry's key: the contents' hash and `variant` (what else the
        result depends on: `path_variant` and the file's enabled codes)."""
        h = hashlib.blake2b(self._prefix, digest_size=32)
        h.update(variant.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
        h.update(hashlib.blake2b(content, digest_size=32).digest())
        return h.hexdigest()

    def entry_path(self, key: str) -> Path:
        return self.dir / _safe_name(self.version) / key[:2] / key

    def get(self, content: bytes, variant: str = "") -> Optional[Any]:
        """The stored value, or None (missing, corrupted, unreadable)."""
        entry = self.entry_path(self.key(content, variant))
        try:
            data = entry.read_bytes()
        except OSError:
            self.misses += 1
            return None
        value = _decode(data)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        return value[0]

    def put(self, content: bytes, variant: str, value: Any) -> None:
        """Store `value`; never raises for I/O problems (the cache is then off)."""
        if self.disabled:
            return
        try:
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            return  # not plain data: don't cache it
        data = _MAGIC + hashlib.blake2b(payload, digest_size=_DIGEST).digest() + payload
        entry = self.entry_path(self.key(content, variant))
        try:
            self._prepare()
            entry.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(str(entry), data)
        except OSError:
            self.disabled = True

    def _prepare(self) -> None:
        if self._ready:
            return
        ensure_cache_dir(self.dir)
        self._ready = True


def ensure_cache_dir(cache_dir: Path) -> None:
    """Create the cache folder with its CACHEDIR.TAG and `.gitignore`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# Created by torchlint automatically.\n*\n")):
        target = cache_dir / name
        if not target.exists():
            write_atomic(str(target), text.encode())


def _decode(data: bytes):
    """(value,) for a sound entry, None otherwise."""
    if len(data) < len(_MAGIC) + _DIGEST or not data.startswith(_MAGIC):
        return None
    digest = data[len(_MAGIC) : len(_MAGIC) + _DIGEST]
    payload = data[len(_MAGIC) + _DIGEST :]
    if hashlib.blake2b(payload, digest_size=_DIGEST).digest() != digest:
        return None
    try:
        return (_loads(payload),)
    except Exception:
        return None


def _safe_name(version: str) -> str:
    return "".join(c if c.isalnum() or c in ".-_+" else "_" for c in version) or "unknown"


def clean_cache(root: Union[str, Path]) -> bool:
    """Remove `<root>/.torchlint_cache`. True if there was one."""
    cache_dir = Path(root) / CACHE_DIR_NAME
    if not cache_dir.is_dir() or cache_dir.is_symlink():
        if cache_dir.is_symlink():
            cache_dir.unlink()
            return True
        return False
    shutil.rmtree(cache_dir, ignore_errors=True)
    return not cache_dir.exists()


def clean_cache_dir(cache_dir: Union[str, Path]) -> bool:
    """Remove a cache folder given by `--cache-dir`, `cache-dir` or
    `TORCHLINT_CACHE_DIR`, only if torchlint made it (its CACHEDIR.TAG says
    so): a misconfigured path never deletes anything else. True if removed."""
    path = Path(cache_dir)
    try:
        ours = (path / "CACHEDIR.TAG").read_text(encoding="utf-8") == CACHEDIR_TAG
    except (OSError, UnicodeDecodeError):
        return False
    if not ours or path.is_symlink():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()


def configured_cache_dir() -> Optional[str]:
    """The `cache-dir` of the configuration that applies to the current folder, if any."""
    from torchlint.config import ConfigError, load_settings

    try:
        return load_settings(start=str(Path.cwd())).cache_dir
    except ConfigError:
        return None


def default_cache_root() -> Path:
    """The project root the CLI caches under: the folder of the nearest
    configuration file (torchlint.toml, or pyproject.toml with [tool.torchlint]), else the current folder."""
    from torchlint.config import find_config

    found = find_config(Path.cwd())
    return found.parent if found is not None else Path.cwd()


@click.command("clean")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Project folder whose .torchlint_cache to remove (repeatable). "
    "Default: the project root (nearest torchlint.toml, or pyproject.toml with [tool.torchlint]) and the current folder.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="TORCHLINT_CACHE_DIR",
    show_envvar=True,
    help="A cache folder set with `check --cache-dir` to remove too (only if torchlint made it).",
)
def clean_command(roots, cache_dir) -> None:
    """Remove torchlint's cache (.torchlint_cache, and the folder `cache-dir` or --cache-dir names)."""
    targets = list(roots) or _unique([default_cache_root(), Path.cwd()])
    for root in targets:
        folder = Path(root) / CACHE_DIR_NAME
        if clean_cache(root):
            click.echo(f"Removed {folder}")
        else:
            click.echo(f"No cache at {folder}")
    extra = [cache_dir] if cache_dir is not None else []
    if not roots:
        configured = configured_cache_dir()
        if configured:
            extra.append(Path(configured))
    for folder in _unique(extra):
        if clean_cache_dir(folder):
            click.echo(f"Removed {folder}")
        else:
            click.echo(f"No torchlint cache at {folder}")


def _unique(paths):
    out = []
    for p in paths:
        if all(os.path.abspath(p) != os.path.abspath(q) for q in out):
            out.append(p)
    return out
