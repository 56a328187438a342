"""Settings: `[tool.torchlint]` in the nearest pyproject.toml, overridden by the CLI.

Selection precedence (docs/linter.md): start from `select` (the CLI's if given,
else the file's, else every rule), add `extend-select` (file and CLI), remove
`ignore` (file and CLI), then remove `per-file-ignores` for matching files.
A selector is a code or a prefix of codes ("TL4", "TL401") or "ALL".
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on old Pythons only
    import tomli as tomllib

import pathspec

KNOWN_KEYS = ("select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude")

DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".mypy_cache",
    ".nox",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    "venv",
    "__pypackages__",
    "__pycache__",
    "_build",
    "buck-out",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    ".ipynb_checkpoints",
    ".torchlint_cache",
)


class ConfigError(Exception):
    """A bad setting: reported as one line, exit code 2."""


def known_codes() -> List[str]:
    from torchlint.rules import all_codes

    return all_codes()


def _expand(selectors: Iterable[str], where: str) -> FrozenSet[str]:
    codes = known_codes()
    out = set()
    for raw in selectors:
        sel = raw.strip().upper()
        if not sel:
            continue
        if sel == "ALL":
            out.update(codes)
            continue
        matched = [c for c in codes if c.startswith(sel)]
        if not matched:
            raise ConfigError(f"unknown rule selector {raw.strip()!r} in {where} (known codes: {', '.join(codes)})")
        out.update(matched)
    return frozenset(out)


@dataclass(frozen=True)
class Settings:
    """Effective settings for a run. Hashable, so it keys caches."""

    select: Tuple[str, ...] = ("ALL",)
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    exclude: Tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: Tuple[str, ...] = ()
    # The folder patterns are relative to (the pyproject.toml's, or the cwd).
    root: str = "."
    config_path: Optional[str] = None

    def enabled(self) -> FrozenSet[str]:
        return _enabled(self.select, self.extend_select, self.ignore)

    def enabled_for(self, path: str) -> FrozenSet[str]:
        codes = self.enabled()
        if not self.per_file_ignores:
            return codes
        rel = self.relative(path)
        for pattern, ignored in self.per_file_ignores:
            if _spec((pattern,)).match_file(rel):
                codes = codes - _expand(ignored, "per-file-ignores")
        return codes

    def relative(self, path: str) -> str:
        try:
            return Path(os.path.abspath(path)).relative_to(os.path.abspath(self.root)).as_posix()
        except ValueError:
            return Path(path).as_posix()

    def is_excluded(self, path: str) -> bool:
        rel = self.relative(path)
        spec = self.exclude_spec()
        return spec.match_file(rel) or spec.match_file(rel + "/")

    def exclude_spec(self) -> pathspec.PathSpec:
        """`exclude` + `extend-exclude` as one gitignore-style spec."""
        return _spec(self.exclude + self.extend_exclude)

    def validate(self) -> "Settings":
        """Raise ConfigError for unknown codes anywhere."""
        _expand(self.select, "select")
        _expand(self.extend_select, "extend-select")
        _expand(self.ignore, "ignore")
        for _, codes in self.per_file_ignores:
            _expand(codes, "per-file-ignores")
        return self


@lru_cache(maxsize=256)
def _enabled(select, extend_select, ignore) -> FrozenSet[str]:
    return (_expand(select, "select") | _expand(extend_select, "extend-select")) - _expand(ignore, "ignore")


@lru_cache(maxsize=64)
def _spec(patterns: Tuple[str, ...]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def find_pyproject(start: Path) -> Optional[Path]:
    """The nearest pyproject.toml at or above `start` that has [tool.torchlint];
    failing that, None."""
    start = start.resolve()
    if start.is_file():
        start = start.parent
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                raw = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            try:
                data = tomllib.loads(raw)
            except tomllib.TOMLDecodeError:
                if "tool.torchlint" in raw:
                    return candidate  # ours but broken: load_settings reports it
                continue
            if "torchlint" in data.get("tool", {}):
                return candidate
    return None


def _str_list(value: Any, key: str, where: str) -> Tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    return tuple(value)


def settings_from_table(table: Mapping[str, Any], where: str, root: str) -> Dict[str, Any]:
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} in [tool.torchlint] (known: {', '.join(KNOWN_KEYS)})")
    out: Dict[str, Any] = {"root": root, "config_path": where}
    for key in ("select", "ignore", "extend-select", "extend-exclude"):
        if key in table:
            out[key.replace("-", "_")] = _str_list(table[key], key, where)
    if "exclude" in table:
        out["exclude"] = _str_list(table["exclude"], "exclude", where)
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{where}: `per-file-ignores` must be a table of pattern = [codes]")
        out["per_file_ignores"] = tuple(
            (pattern, _str_list(codes, f"per-file-ignores.{pattern}", where)) for pattern, codes in sorted(pfi.items())
        )
    return out


def load_settings(
    config: Optional[str] = None,
    start: Optional[str] = None,
    select: Optional[Sequence[str]] = None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    extend_exclude: Sequence[str] = (),
) -> Settings:
    """Build the effective settings: the config file, then CLI overrides."""
    path: Optional[Path]
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ConfigError(f"config file not found: {config}")
    else:
        path = find_pyproject(Path(start or "."))
    values: Dict[str, Any] = {"root": os.getcwd()}
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        table = data.get("tool", {}).get("torchlint", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.torchlint] must be a table")
        values = settings_from_table(table, str(path), str(path.resolve().parent))
    settings = Settings(**values)
    if select is not None:
        settings = replace(settings, select=tuple(select))
    settings = replace(
        settings,
        extend_select=settings.extend_select + tuple(extend_select),
        ignore=settings.ignore + tuple(ignore),
        extend_exclude=settings.extend_exclude + tuple(extend_exclude),
    )
    return settings.validate()
