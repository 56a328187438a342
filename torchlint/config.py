"""Settings: the nearest configuration file, overridden by the CLI.

The configuration file (docs/linter.md, "Configuration"), nearest first: in
each folder from the linted path up, `.torchlint.toml`, then `torchlint.toml`
(settings at the top level, as Ruff reads `ruff.toml`), then a
`pyproject.toml` with a `[tool.torchlint]` table.

Selection precedence (docs/linter.md): start from `select` (the CLI's if given,
else the file's, else every rule), add `extend-select` (file and CLI), remove
`ignore` (file and CLI), then remove `per-file-ignores` for matching files.
A selector is a code or a prefix of codes ("TL4", "TL401") or "ALL".
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on old Pythons only
    import tomli as tomllib

import pathspec

KNOWN_KEYS = (
    "select",
    "ignore",
    "extend-select",
    "per-file-ignores",
    "exclude",
    "extend-exclude",
    "force-exclude",
    "respect-gitignore",
    "unsafe-fixes",
    "cache-dir",
    "preview",
    "docs-url",
)
# In one folder, the first of these that applies is the configuration file
# (Ruff: `.ruff.toml`, `ruff.toml`, `pyproject.toml`). The first two hold the
# settings at the top level; a pyproject.toml counts only with [tool.torchlint].
CONFIG_FILES = (".torchlint.toml", "torchlint.toml", "pyproject.toml")
# Where each rule's page lives: `<docs-url><rule name>.md`. `docs-url` in the
# configuration or TORCHLINT_DOCS_URL moves it (a mirror, a local clone's
# docs/rules/ as a file:// URL); `torchlint rule CODE` prints a page offline.
DEFAULT_DOCS_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules/"
DOCS_URL_ENV = "TORCHLINT_DOCS_URL"
_LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude")
_BOOL_KEYS = ("force-exclude", "respect-gitignore", "unsafe-fixes", "preview")

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


def preview_from_env() -> Optional[bool]:
    """TORCHLINT_PREVIEW as the CLI reads it (click's boolean flag values);
    None when unset, for the doors that have no command line (the language
    server, the flake8 plugin)."""
    value = os.environ.get("TORCHLINT_PREVIEW", "").strip().lower()
    if not value:
        return None
    return value in ("1", "true", "t", "yes", "y", "on")


def preview_codes() -> FrozenSet[str]:
    from torchlint.rules import preview_codes as codes

    return codes()


def known_codes() -> List[str]:
    from torchlint.rules import all_codes

    return all_codes()


def _expand(selectors: Iterable[str], where: str, source: Optional[str] = None) -> FrozenSet[str]:
    """The codes `selectors` stand for; an error names them by `where`
    ("`select`", "--select") and the file they come from (`source`)."""
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
            prefix = f"{source}: " if source else ""
            raise ConfigError(
                f"{prefix}unknown rule selector {raw.strip()!r} in {where} (known codes: {', '.join(codes)})"
            )
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
    # Command-line `--exclude` (replaces `exclude`, defaults included) and
    # `--extend-exclude`: patterns relative to `cli_root`, the current folder.
    cli_exclude: Optional[Tuple[str, ...]] = None
    cli_extend_exclude: Tuple[str, ...] = ()
    cli_root: str = "."
    force_exclude: bool = False
    respect_gitignore: bool = True
    # None: unsafe fixes are off and the reports hint at them; False: off, no hint.
    unsafe_fixes: Optional[bool] = None
    cache_dir: Optional[str] = None
    # Preview rules (torchlint/rules/stability.py) are on only in preview mode.
    preview: bool = False
    # The rule pages' base URL (None: DEFAULT_DOCS_URL); see rule_url.
    docs_url: Optional[str] = None

    def enabled(self) -> FrozenSet[str]:
        codes = _enabled(self.select, self.extend_select, self.ignore)
        return codes if self.preview else codes - preview_codes()

    def preview_warnings(self) -> List[str]:
        """As in Ruff: a selector that names only preview rules (an exact code,
        `TL401`, or a prefix, `TL1`) has no effect without preview mode, and the
        user is told. `ALL`, `TL` and prefixes that also hold a stable rule
        select something, and say nothing."""
        if self.preview:
            return []
        preview = preview_codes()
        out = []
        seen = set()
        for raw in self.select + self.extend_select:
            sel = raw.strip().upper()
            if not sel or sel == "ALL" or sel in seen:
                continue
            seen.add(sel)
            matched = {c for c in known_codes() if c.startswith(sel)}
            if matched and matched <= preview:
                what = "" if sel in matched else "it selects only preview rules; "
                out.append(
                    f"selection `{raw.strip()}` has no effect because preview is not enabled "
                    f"({what}use --preview or `preview = true`)"
                )
        return out

    def preview_rules_off(self) -> FrozenSet[str]:
        """The preview rules this selection would run in preview mode and does
        not run now (empty in preview mode): what the end-of-run hint counts."""
        if self.preview:
            return frozenset()
        return _enabled(self.select, self.extend_select, self.ignore) & preview_codes()

    def runs_only_always_reported(self) -> bool:
        """The selection runs no rule but TL000 and TL001 (reported whatever
        is selected): without preview mode, every rule it selects is a
        preview rule (the default set when no rule is stable)."""
        from torchlint.rules.stability import ALWAYS_REPORTED

        return not (self.enabled() - ALWAYS_REPORTED)

    def rule_url(self, code: str) -> Optional[str]:
        """The URL of a rule's page (`docs-url` + its name + `.md`); None for an
        unknown code."""
        from torchlint.rules import CATALOG

        name = CATALOG.get(code.upper())
        return f"{self.docs_url or DEFAULT_DOCS_URL}{name}.md" if name else None

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
        return _relative_to(path, self.root)

    def is_excluded(self, path: str) -> bool:
        """Whether `path` matches the exclusions (itself, not through a folder above it)."""
        for base, spec in self.exclude_specs():
            rel = _relative_to(path, base)
            if spec.match_file(rel) or spec.match_file(rel + "/"):
                return True
        return False

    def exclude_specs(self) -> Tuple[Tuple[str, pathspec.PathSpec], ...]:
        """The exclusions as (folder the patterns are relative to, gitignore-style
        spec): the configuration's `exclude` (or the defaults) and `extend-exclude`
        relative to `root`; the command line's relative to `cli_root`. A
        command-line `--exclude` replaces `exclude` and the defaults."""
        own = self.extend_exclude if self.cli_exclude is not None else self.exclude + self.extend_exclude
        specs = [(self.root, _spec(own))]
        cli = (self.cli_exclude or ()) + self.cli_extend_exclude
        if cli:
            specs.append((self.cli_root, _spec(cli)))
        return tuple(specs)

    def validate(self) -> "Settings":
        """Raise ConfigError for unknown codes anywhere."""
        _expand(self.select, "`select`")
        _expand(self.extend_select, "`extend-select`")
        _expand(self.ignore, "`ignore`")
        for _, codes in self.per_file_ignores:
            _expand(codes, "`per-file-ignores`")
        return self


def _relative_to(path: str, base: str) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(base)).as_posix()
    except ValueError:
        return Path(path).as_posix()


@lru_cache(maxsize=256)
def _enabled(select, extend_select, ignore) -> FrozenSet[str]:
    return (_expand(select, "select") | _expand(extend_select, "extend-select")) - _expand(ignore, "ignore")


@lru_cache(maxsize=64)
def _spec(patterns: Tuple[str, ...]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def find_config(start: Path) -> Optional[Path]:
    """The nearest configuration file at or above `start`: in each folder,
    `.torchlint.toml`, then `torchlint.toml`, then a `pyproject.toml` that has
    [tool.torchlint] (CONFIG_FILES); failing that, None."""
    # realpath, not Path.resolve: a symlink loop must not raise (the path's own
    # problem is reported by discovery).
    start = Path(os.path.realpath(start))
    try:
        if not start.is_dir():
            start = start.parent
    except OSError:
        start = start.parent
    for folder in (start, *start.parents):
        for name in CONFIG_FILES[:-1]:
            candidate = folder / name
            try:
                if candidate.is_file():
                    return candidate  # ours by its name, whatever it holds: load_settings reports a problem
            except OSError:
                pass
        candidate = folder / "pyproject.toml"
        try:
            found = candidate.is_file()
        except OSError:
            found = False
        if found:
            try:
                data_bytes = candidate.read_bytes()
            except OSError:
                continue
            try:
                raw = data_bytes.decode("utf-8")
                data = tomllib.loads(raw)
            except (UnicodeDecodeError, tomllib.TOMLDecodeError):
                if b"tool.torchlint" in data_bytes:
                    return candidate  # ours but broken: load_settings reports it
                continue
            if "torchlint" in data.get("tool", {}):
                return candidate
    return None


# The name it had when only pyproject.toml was read (bench/ and older callers).
find_pyproject = find_config


def is_pyproject(path: Union[str, Path]) -> bool:
    """Whether `path` is read as a pyproject.toml (settings under
    [tool.torchlint]) rather than as a torchlint.toml (settings at the top
    level): by its name, as Ruff tells pyproject.toml from ruff.toml."""
    return Path(path).name == "pyproject.toml"


def config_table(data: Mapping[str, Any], path: Union[str, Path], named: bool) -> Optional[Mapping[str, Any]]:
    """The settings table of a parsed configuration file: `[tool.torchlint]` of
    a pyproject.toml, the top level of any other file. A file given with
    `--config` (`named`) that has no settings for torchlint is an error, not
    an empty configuration; a pyproject.toml found by the search without the
    table is None (not a configuration)."""
    tool = data.get("tool")
    if is_pyproject(path) or (isinstance(tool, dict) and "torchlint" in tool):
        table = tool.get("torchlint") if isinstance(tool, dict) else None
        if table is None:
            if named:
                raise ConfigError(
                    f"{path}: no [tool.torchlint] table (a pyproject.toml holds torchlint's settings there; "
                    "a torchlint.toml holds them at the top level)"
                )
            return None
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.torchlint] must be a table")
        return table
    if isinstance(tool, dict) or "project" in data or "build-system" in data:
        # A pyproject.toml under another name: its keys are not torchlint's.
        raise ConfigError(
            f"{path}: no [tool.torchlint] table, and a file not named pyproject.toml is read as a torchlint.toml "
            "(settings at the top level, as in `select = [...]`)"
        )
    return data


_TOML_WHERE = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$")


def toml_error(path: Union[str, Path], text: str, exc: Exception) -> str:
    """`path:LINE:COLUMN: invalid TOML: what` for a TOMLDecodeError, always
    with a line and column: tomllib says "(at end of document)" for an error
    at the very end (an unclosed `[` or string), which names no line."""
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    m = _TOML_WHERE.search(message)
    line = getattr(exc, "lineno", None)  # Python 3.14's TOMLDecodeError has them
    column = getattr(exc, "colno", None)
    if m is not None:
        message = message[: m.start()]
        if m.group(1):
            line, column = int(m.group(1)), int(m.group(2))
        else:
            message += " (at the end of the file)"
    if line is None or column is None:
        line, column = _line_column(text, len(text))
    return f"{path}:{line}:{column}: invalid TOML: {message}"


def _line_column(text: Union[str, bytes], offset: int) -> Tuple[int, int]:
    """1-based (line, column) of `offset` in `text`."""
    nl = "\n" if isinstance(text, str) else b"\n"
    line_start = text.rfind(nl, 0, offset) + 1  # type: ignore[arg-type]
    return text.count(nl, 0, offset) + 1, offset - line_start + 1  # type: ignore[arg-type]


def _type_name(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _str_list(value: Any, key: str, where: str) -> Tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        hint = f" (write `{key} = [{value!r}]`)".replace("'", '"') if isinstance(value, str) else ""
        got = _type_name(value) if not isinstance(value, list) else "a list with a non-string item"
        raise ConfigError(f"{where}: `{key}` must be a list of strings, not {got}{hint}")
    return tuple(value)


def _table_name(path: Path, data: Mapping[str, Any]) -> str:
    """How errors name the table the settings came from."""
    return "[tool.torchlint]" if is_pyproject(path) or "tool" in data else path.name


def settings_from_table(
    table: Mapping[str, Any], where: str, root: str, name: str = "[tool.torchlint]"
) -> Dict[str, Any]:
    """Settings values from a `[tool.torchlint]` table (or a torchlint.toml's
    top level, `name`) read from `where`; every error names that file."""
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} in {name} (known: {', '.join(KNOWN_KEYS)})")
    out: Dict[str, Any] = {"root": root, "config_path": where}
    for key in _LIST_KEYS:
        if key in table:
            out[key.replace("-", "_")] = _str_list(table[key], key, where)
    for key in ("select", "ignore", "extend-select"):
        if key in table:
            _expand(table[key], f"`{key}`", where)
    for key in _BOOL_KEYS:
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{where}: `{key}` must be true or false, not {_type_name(table[key])}")
            out[key.replace("-", "_")] = table[key]
    if "cache-dir" in table:
        value = table["cache-dir"]
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: `cache-dir` must be a path (a string), not {_type_name(value)}")
        out["cache_dir"] = os.path.join(root, os.path.expanduser(value))
    if "docs-url" in table:
        value = table["docs-url"]
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: `docs-url` must be a URL (a string), not {_type_name(value)}")
        out["docs_url"] = _docs_base(value)
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{where}: `per-file-ignores` must be a table of pattern = [codes]")
        items = []
        for pattern, codes in sorted(pfi.items()):
            key = f"per-file-ignores.{_toml_key(pattern)}"
            items.append((pattern, _str_list(codes, key, where)))
            _expand(codes, f"`{key}`", where)
        out["per_file_ignores"] = tuple(items)
    return out


def _docs_base(url: str) -> str:
    """A docs base URL that a rule page's file name can follow."""
    url = url.strip()
    return url if url.endswith("/") else url + "/"


def docs_url_from_env() -> Optional[str]:
    """TORCHLINT_DOCS_URL, the rule pages' base URL (wins over `docs-url`)."""
    value = os.environ.get(DOCS_URL_ENV, "").strip()
    return _docs_base(value) if value else None


def _toml_key(text: str) -> str:
    """A TOML key as written in a table header: bare when it can be, else quoted."""
    if text and all(c.isalnum() or c in "-_" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def load_settings(
    config: Optional[str] = None,
    start: Optional[str] = None,
    select: Optional[Sequence[str]] = None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    extend_exclude: Sequence[str] = (),
    exclude: Optional[Sequence[str]] = None,
    force_exclude: Optional[bool] = None,
    respect_gitignore: Optional[bool] = None,
    unsafe_fixes: Optional[bool] = None,
    cache_dir: Optional[str] = None,
    preview: Optional[bool] = None,
) -> Settings:
    """Build the effective settings: the config file, then the command line's
    overrides (None or empty: not given). Exclusion patterns given here are
    relative to the current folder."""
    path: Optional[Path]
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ConfigError(f"config file not found: {config}")
    else:
        path = find_config(Path(start or "."))
    values: Dict[str, Any] = {"root": os.getcwd()}
    if path is not None:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line, column = _line_column(raw, exc.start)
            message = f"invalid TOML: byte {raw[exc.start]:#04x} is not UTF-8 (TOML files are UTF-8)"
            raise ConfigError(f"{path}:{line}:{column}: {message}") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(toml_error(path, text, exc)) from None
        table = config_table(data, path, named=config is not None)
        if table is not None:
            values = settings_from_table(table, str(path), str(path.resolve().parent), _table_name(path, data))
    settings = Settings(**values)
    for key, selectors in (("--select", select or ()), ("--extend-select", extend_select), ("--ignore", ignore)):
        _expand(selectors, key)
    if select is not None:
        settings = replace(settings, select=tuple(select))
    settings = replace(
        settings,
        extend_select=settings.extend_select + tuple(extend_select),
        ignore=settings.ignore + tuple(ignore),
        cli_exclude=tuple(exclude) if exclude is not None else None,
        cli_extend_exclude=tuple(extend_exclude),
        cli_root=os.getcwd(),
    )
    if force_exclude is not None:
        settings = replace(settings, force_exclude=force_exclude)
    if respect_gitignore is not None:
        settings = replace(settings, respect_gitignore=respect_gitignore)
    if unsafe_fixes is not None:
        settings = replace(settings, unsafe_fixes=unsafe_fixes)
    if preview is not None:
        settings = replace(settings, preview=preview)
    if cache_dir:
        settings = replace(settings, cache_dir=os.path.abspath(os.path.expanduser(cache_dir)))
    env_docs = docs_url_from_env()
    if env_docs:
        settings = replace(settings, docs_url=env_docs)
    return settings.validate()
