"""The command line: `torchlint [check] PATH...`, `torchlint rules`, `torchlint rule CODE`.

A thin shell over `torchlint.files.runner`; heavy modules (LibCST, the rules) are
imported only when a command runs, and torch never.
Exit codes: 0 nothing found (or all fixed), 1 findings remain, 2 usage,
configuration or internal error.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence, Tuple

import click

from torchlint import __version__

FORMATS = ("full", "concise", "json", "json-lines", "github", "gitlab", "junit", "pylint", "rdjson", "sarif")
EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


def fail(message: str) -> "click.exceptions.Exit":
    click.echo(f"torchlint: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


def warn(message: str) -> None:
    click.echo(f"torchlint: warning: {message}", err=True)


class DefaultGroup(click.Group):
    """A group whose default command is `check`: `torchlint PATH` == `torchlint check PATH`.
    Unexpected exceptions become one line and exit 2 (traceback with TORCHLINT_DEBUG=1)."""

    default_command = "check"

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version", "-V")):
            if args:
                self._reject_misspelt_command(args[0])
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def _reject_misspelt_command(self, word: str) -> None:
        """`torchlint chek .`: a bare first word that is neither a command nor
        a path on disk, and reads like a command, is a usage error (as Ruff's
        "unrecognized subcommand"), not a missing path to lint."""
        import difflib

        if word.startswith("-") or os.sep in word or "/" in word or "." in word or os.path.lexists(word):
            return
        close = difflib.get_close_matches(word, sorted(self.commands), n=1, cutoff=0.6)
        if close:
            raise click.UsageError(
                f"unrecognized subcommand '{word}'; did you mean '{close[0]}'? "
                f"(to lint a path named {word}, run `torchlint check {word}`)"
            )

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except BrokenPipeError:  # `torchlint . | head`: the reader went away
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            raise click.exceptions.Exit(EXIT_FINDINGS) from None
        except KeyboardInterrupt:  # one line, however many worker processes were running
            click.echo("torchlint: error: interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if os.environ.get("TORCHLINT_DEBUG"):
                raise
            raise fail(f"internal error: {type(exc).__name__}: {exc} (set TORCHLINT_DEBUG=1 for a traceback)") from None


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"torchlint {__version__}")
    ctx.exit()


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version (`torchlint 0.1.0`) and exit.",
)
def main() -> None:
    """torchlint: find and fix the PyTorch mistakes that leave a GPU idle.

    `torchlint PATH...` is short for `torchlint check PATH...`.
    """


def _codes(values: Sequence[str]) -> Tuple[str, ...]:
    return tuple(c.strip() for v in values for c in v.split(",") if c.strip())


def _write_output(text: str, output_file: Optional[str]) -> None:
    if output_file:
        try:
            with open(output_file, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
        except OSError as exc:
            raise fail(f"cannot write {output_file}: {exc.strerror or exc}") from None
    elif text:
        click.echo(text, nl=False)


@main.command("check")
# readable=False: a file that cannot be read is linted as TL001, not refused as a usage error.
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@click.option(
    "--select",
    multiple=True,
    metavar="CODES",
    help="Only these codes or prefixes (comma-separated; replaces the config's select).",
)
@click.option("--extend-select", multiple=True, metavar="CODES", help="Add codes or prefixes to the selection.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Codes or prefixes to leave out.")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option(
    "--unsafe-fixes/--no-unsafe-fixes",
    default=None,
    help="Also apply (and count as fixable) unsafe fixes; --no-unsafe-fixes overrides `unsafe-fixes = true`.",
)
@click.option("--fix-only", is_flag=True, help="Apply fixes; do not report or exit non-zero for what remains.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a fix was applied, even if nothing remains.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing; exit 1 if any.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with findings; report nothing else.")
@click.option(
    "--output-format",
    type=click.Choice(FORMATS),
    default="full",
    envvar="TORCHLINT_OUTPUT_FORMAT",
    show_default=True,
    show_envvar=True,
)
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), help="Write the report to this file.")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of each finding.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--show-files", is_flag=True, help="List the files that would be linted, and exit.")
@click.option("--show-settings", is_flag=True, help="Print the settings used for the first file, and exit.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the cache.")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="TORCHLINT_CACHE_DIR",
    show_envvar=True,
    help="Keep the cache here instead of <project>/.torchlint_cache.",
)
@click.option(
    "-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True, help="Worker processes (0: one per core)."
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, readable=False),
    metavar="FILE",
    help="Use this configuration file: a pyproject.toml ([tool.torchlint]) or a torchlint.toml (top-level keys).",
)
@click.option("--show-fixes", is_flag=True, help="List the fixes applied per file.")
@click.option(
    "--stdin-filename",
    metavar="PATH",
    help="Read the source from stdin and report (and configure) it as PATH.",
)
@click.option(
    "--exclude", multiple=True, metavar="PATTERNS", help="Exclude these (replaces `exclude`; comma-separated)."
)
@click.option("--extend-exclude", multiple=True, metavar="PATTERNS", help="Also exclude these (comma-separated).")
@click.option(
    "--force-exclude/--no-force-exclude",
    default=None,
    help="Apply exclusions to paths named on the command line too.",
)
@click.option(
    "--respect-gitignore/--no-respect-gitignore",
    default=None,
    help="Skip what .gitignore files ignore (default: on).",
)
@click.option(
    "--preview/--no-preview",
    default=None,
    envvar="TORCHLINT_PREVIEW",
    show_envvar=True,
    help="Also run preview rules (not yet stable on code they were never tuned on); see `torchlint rules`.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option(
    "-w", "--watch", is_flag=True, help="Lint again whenever a file or the configuration changes (Ctrl-C to stop)."
)
def check_command(
    paths,
    select,
    extend_select,
    ignore,
    fix,
    unsafe_fixes,
    fix_only,
    exit_non_zero_on_fix,
    diff,
    add_noqa,
    output_format,
    output_file,
    statistics,
    exit_zero,
    show_files,
    show_settings,
    no_cache,
    cache_dir,
    jobs,
    config_path,
    show_fixes,
    stdin_filename,
    exclude,
    extend_exclude,
    force_exclude,
    respect_gitignore,
    preview,
    quiet,
    watch,
):
    """Lint PATHS (default: the current folder); `-` or `--stdin-filename` reads source from stdin."""
    from torchlint.config import ConfigError, load_settings

    paths = list(paths)
    # As in Ruff, --stdin-filename means "read stdin", with or without `-`:
    # editors call `--stdin-filename a.py` alone, and must never get the
    # current folder linted (or fixed) instead.
    use_stdin = stdin_filename is not None or paths == ["-"]
    if stdin_filename is not None:
        for other in (p for p in paths if p != "-"):
            warn(f"ignoring {other} in favor of standard input (--stdin-filename)")
    elif "-" in paths and not use_stdin:
        raise click.UsageError("`-` (stdin) cannot be combined with other paths")
    if add_noqa:
        for flag, given in (("--fix", fix), ("--fix-only", fix_only), ("--diff", diff), ("stdin", use_stdin)):
            if given:
                raise click.UsageError(f"--add-noqa cannot be used with {flag}")
    if watch:
        others = (("--diff", diff), ("--add-noqa", add_noqa), ("stdin", use_stdin))
        others += (("--show-files", show_files), ("--show-settings", show_settings))
        for flag, given in others:
            if given:
                raise click.UsageError(f"--watch cannot be used with {flag}")
    paths = paths or ["."]
    if use_stdin:
        start = (os.path.dirname(stdin_filename) or ".") if stdin_filename else "."
    else:
        start = paths[0]

    def load():
        return load_settings(
            config=config_path,
            start=start,
            select=_codes(select) or None,
            extend_select=_codes(extend_select),
            ignore=_codes(ignore),
            exclude=_codes(exclude) or None,
            extend_exclude=_codes(extend_exclude),
            force_exclude=force_exclude,
            respect_gitignore=respect_gitignore,
            unsafe_fixes=unsafe_fixes,
            cache_dir=cache_dir,
            preview=preview,
        )

    try:
        settings = load()
    except ConfigError as exc:
        raise fail(str(exc)) from None
    for message in settings.preview_warnings():
        warn(message)
    if show_settings:
        raise click.exceptions.Exit(_show_settings(paths, settings, stdin_filename if use_stdin else None))
    if show_files:
        if use_stdin:
            excluded = settings.force_exclude and stdin_filename and settings.is_excluded(stdin_filename)
            if not excluded:
                click.echo(stdin_filename or "-")
            raise click.exceptions.Exit(EXIT_OK)
        raise click.exceptions.Exit(_show_files(paths, settings))
    fix = fix or fix_only
    mode = "add-noqa" if add_noqa else ("diff" if diff else ("fix" if fix else "lint"))
    opts = _Opts(
        mode=mode,
        unsafe=bool(settings.unsafe_fixes),
        output_format=output_format,
        output_file=output_file,
        statistics=statistics,
        show_fixes=show_fixes,
        quiet=quiet,
        no_cache=no_cache,
        fix_only=fix_only and not diff,
        unsafe_hint=settings.unsafe_fixes is not False,
        docs_url=settings.docs_url,
        preview_off=len(settings.preview_rules_off()),
        only_always_reported=settings.runs_only_always_reported(),
    )
    if watch:
        raise click.exceptions.Exit(_watch(paths, settings, load, opts, jobs))
    if use_stdin:
        code, fixed = _check_stdin(settings, stdin_filename or "-", opts)
    elif add_noqa:
        code, fixed = _add_noqa(paths, settings, opts, jobs), 0
    else:
        code, fixed = _check_paths(paths, settings, opts, jobs)
    if code == EXIT_OK and exit_non_zero_on_fix and fixed:
        code = EXIT_FINDINGS
    if exit_zero and code == EXIT_FINDINGS:  # as in Ruff, --exit-zero wins
        code = EXIT_OK
    raise click.exceptions.Exit(code)


@dataclass(frozen=True)
class _Opts:
    mode: str
    unsafe: bool
    output_format: str
    output_file: Optional[str]
    statistics: bool
    show_fixes: bool
    quiet: bool
    no_cache: bool = False
    fix_only: bool = False
    unsafe_hint: bool = True
    docs_url: Optional[str] = None
    # Preview rules the selection leaves off for want of preview mode: the
    # end-of-run hint says how many (0: no hint; the watch turns it off after its first run).
    preview_off: int = 0
    # The selection runs no rule but TL000 and TL001 (every rule it selects is a preview
    # rule): the hint says that the run checked only that the files parse and can be read.
    only_always_reported: bool = False


def _report(opts: _Opts, findings, lines, fixes_applied=0, fixed_per_file=None, problems=0, files=None) -> str:
    from torchlint.report import ReportData, fixes_summary, plural, render, summary

    data = ReportData(
        findings=findings,
        lines=lines,
        mode=opts.mode,
        unsafe_fixes=opts.unsafe,
        fixes_applied=fixes_applied,
        fixed_per_file=fixed_per_file or {},
        show_fixes=opts.show_fixes,
        unsafe_hint=opts.unsafe_hint,
        problems=problems,
        linted_nothing=files == 0,
        docs_url=opts.docs_url,
    )
    if opts.fix_only:  # what was fixed, never what remains
        text = ""
        if fixes_applied and not opts.quiet:
            text = f"Fixed {plural(fixes_applied, 'error')}.\n"
        if opts.show_fixes:
            text += fixes_summary(data)
        return text
    if opts.statistics:
        from torchlint.report import statistics as stats

        as_json = opts.output_format in ("json", "json-lines")
        table = stats.render(data, as_json=as_json)
        # As in Ruff: the table, then the summary ("Found 3 errors.", what --fix would fix).
        return table if as_json or opts.quiet else table + summary(data)
    text = render(opts.output_format, data)
    if opts.output_format in ("full", "concise") and not opts.quiet:
        text += ("\n" if text and opts.output_format == "concise" else "") + summary(data)
        if opts.show_fixes:
            text += fixes_summary(data)
    return text


def _warnings_out(warnings, opts: _Opts) -> None:
    if not opts.quiet:
        for w in warnings:
            warn(str(w))


def _preview_hint(opts: _Opts, files: int) -> None:
    """Once per run, last on stderr: how many preview rules the selection
    leaves off, and how to turn them on; when they are all it selects, that
    the run checked only that the files parse and can be read. Never with -q,
    on stdin (an editor's call) or for a run that linted nothing; stdout stays
    the report alone."""
    if opts.quiet or not opts.preview_off or not files:
        return
    n = opts.preview_off
    rules = "1 preview rule is" if n == 1 else f"{n} preview rules are"
    only = ", so this run checked only that the files parse and can be read"
    click.echo(
        f"torchlint: hint: {rules} off{only if opts.only_always_reported else ''}; "
        "`--preview` (or `preview = true` in the configuration) turns them on",
        err=True,
    )


def _problems_out(problems) -> int:
    """Print problems on stderr (after the report); EXIT_ERROR if any."""
    for p in problems:
        click.echo(f"torchlint: error: {p}", err=True)
    return EXIT_ERROR if problems else EXIT_OK


def _nothing_found(result, opts: _Opts) -> None:
    """Say so when a run linted no file (and no path was missing to explain it)."""
    if result.files == 0 and not result.problems and not opts.quiet:
        warn("No Python files found under the given path(s)")


def _check_paths(paths, settings, opts: _Opts, jobs: int, written: Optional[list] = None) -> Tuple[int, int]:
    """Lint, fix or diff files; (exit code, fixes applied). `written` gets the
    paths of the files fixes were written to."""
    from torchlint import api

    cache_root = None if opts.no_cache else settings.root
    result = api.run(
        paths,
        settings,
        mode=opts.mode,
        unsafe=opts.unsafe,
        jobs=jobs,
        cache_root=cache_root,
        cache_dir=settings.cache_dir,
    )
    _nothing_found(result, opts)
    if opts.mode == "diff":
        _write_output("".join(d for _, d in result.diffs), opts.output_file)
        fixes = sum(o.fixes_applied for o in result.outcomes if o.diff)
        if not opts.quiet:
            click.echo(_diff_summary(fixes, len(result.diffs), result.findings, opts), err=True)
        _warnings_out(result.warnings, opts)
        code = _problems_out(result.problems) or (EXIT_FINDINGS if result.diffs else EXIT_OK)
        _preview_hint(opts, result.files)
        return code, 0
    fixed_per_file = {o.path: o.fixes_applied for o in result.outcomes if o.written and o.fixes_applied}
    if written is not None:
        written.extend(o.path for o in result.outcomes if o.written)
    report = _report(
        opts,
        result.findings,
        result.lines,
        result.fixes_applied,
        fixed_per_file,
        problems=len(result.problems),
        files=result.files,
    )
    _write_output(report, opts.output_file)
    _warnings_out(result.warnings, opts)
    fixed = sum(fixed_per_file.values())
    remaining = EXIT_FINDINGS if result.findings and not opts.fix_only else EXIT_OK
    code = _problems_out(result.problems) or remaining
    _preview_hint(opts, result.files)
    return code, fixed


def _watch(paths, settings, load, opts: _Opts, jobs: int) -> int:
    """`--watch`: lint (or fix) `paths`, then again after every change to the
    files a run would lint or to the configuration file, until Ctrl-C (exit 0).
    The report goes to stdout as in one run (the screen is cleared first on a
    terminal); a status line goes to stderr. torchlint/files/watch.py says how
    changes are found."""
    from torchlint import api
    from torchlint.config import CONFIG_FILES, ConfigError
    from torchlint.files import watch as watching

    interval = watching.interval_from_env()
    current = [settings]

    def config_files():
        config = current[0].config_path
        return [config] if config else [os.path.join(os.getcwd(), name) for name in CONFIG_FILES]

    tree = watching.Tree(lambda: api.discover(paths, current[0]).files, config_files)
    tty = sys.stdout.isatty() and not opts.output_file
    before = tree.look()
    try:
        while True:
            if tty:
                click.clear()
            written: list = []
            _check_paths(paths, current[0], opts, jobs, written)
            opts = replace(opts, preview_off=0)  # the hint once, after the first run
            # A change made while the run went on starts the next run (the
            # snapshot is from before it), but the run's own fixes do not.
            before.update(watching.snapshot(written))
            tree.refresh()
            click.echo(f"[{watching.clock()}] Watching for file changes (Ctrl-C to stop).", err=True)
            before, what = watching.wait_for_change(tree.look, before, interval)
            configs = {os.path.abspath(p) for p in config_files()}
            if configs & set(what):
                try:
                    current[0] = load()
                except ConfigError as exc:
                    click.echo(f"torchlint: error: {exc} (keeping the previous settings)", err=True)
    except KeyboardInterrupt:  # the way to leave watch mode: not an error
        return EXIT_OK


def _diff_summary(fixes: int, files: int, remaining, opts: _Opts) -> str:
    """`--diff`'s closing line, as in Ruff: what it would fix and, unless
    `unsafe-fixes = false`, how many more fixes `--unsafe-fixes` would apply
    (never "Would fix 0 errors in 0 files." when only unsafe fixes exist)."""
    from torchlint.findings import Applicability
    from torchlint.report import plural

    hidden = 0
    if not opts.unsafe and opts.unsafe_hint:
        hidden = sum(1 for f in remaining if f.fix is not None and f.fix.applicability == Applicability.UNSAFE)
    if fixes:
        extra = f" ({plural(hidden, 'additional fix')} available with `--unsafe-fixes`)" if hidden else ""
        return f"Would fix {plural(fixes, 'error')} in {plural(files, 'file')}{extra}."
    if hidden:
        return f"No errors would be fixed ({plural(hidden, 'fix')} available with `--unsafe-fixes`)."
    return "No errors would be fixed."


def _add_noqa(paths, settings, opts: _Opts, jobs: int) -> int:
    """`--add-noqa`: suppression comments for every finding; exit 0 unless a problem."""
    from torchlint import api
    from torchlint.report import plural

    result = api.run(paths, settings, mode="add-noqa", jobs=jobs)
    _nothing_found(result, opts)
    added = sum(o.fixes_applied for o in result.outcomes if o.written)
    if not opts.quiet:
        click.echo(f"Added {plural(added, 'noqa directive')}.", err=True)
    _warnings_out(result.warnings, opts)
    code = _problems_out(result.problems)
    _preview_hint(opts, result.files)
    return code


def _check_stdin(settings, filename: str, opts: _Opts) -> Tuple[int, int]:
    """Lint source from stdin. With --fix: fixed source on stdout, findings on
    stderr. (exit code, fixes applied)"""
    from torchlint import api

    data = sys.stdin.buffer.read()
    if settings.force_exclude and filename != "-" and settings.is_excluded(filename):
        # An excluded file is not linted, as in Ruff: its source goes back unchanged.
        if opts.mode == "fix":
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        return EXIT_OK, 0
    outcome = api.process_bytes(data, filename, settings, mode=opts.mode, unsafe=opts.unsafe)
    lines = {(outcome.path, cell, r): t for cell, r, t in outcome.lines}
    _warnings_out(outcome.warnings, opts)
    if opts.mode == "diff":
        _write_output(outcome.diff or "", opts.output_file)
        return _problems_out(outcome.problems) or (EXIT_FINDINGS if outcome.diff else EXIT_OK), 0
    report = _report(opts, outcome.findings, lines, outcome.fixes_applied, problems=len(outcome.problems))
    fixed = outcome.fixes_applied if outcome.new_data is not None and outcome.new_data != data else 0
    if opts.mode == "fix":
        sys.stdout.flush()
        sys.stdout.buffer.write(outcome.new_data if outcome.new_data is not None else data)
        sys.stdout.buffer.flush()
        click.echo(report, nl=False, err=True)
    else:
        _write_output(report, opts.output_file)
    remaining = EXIT_FINDINGS if outcome.findings and not opts.fix_only else EXIT_OK
    return _problems_out(outcome.problems) or remaining, fixed


def _show_files(paths, settings) -> int:
    """`--show-files`: the files a run would lint, one per line, sorted."""
    from torchlint import api

    found = api.discover(paths, settings)
    for path in found.files:
        click.echo(path)
    if not found.files and not found.problems:
        warn("No Python files found under the given path(s)")
    return _problems_out(found.problems)


def _show_settings(paths, settings, stdin_filename: Optional[str]) -> int:
    """`--show-settings`: the settings for the first file the run would lint
    (or the stdin filename), as `key = value` lines."""
    from torchlint import api
    from torchlint.config import DEFAULT_EXCLUDE

    if stdin_filename is not None:
        target = stdin_filename
    else:
        found = api.discover(paths, settings)
        if found.problems:
            return _problems_out(found.problems)
        if not found.files:
            raise fail("--show-settings: no Python file found under the given path(s)")
        target = found.files[0]

    def show(values) -> str:
        return "[" + ", ".join(f'"{v}"' for v in values) + "]"

    exclude = settings.exclude
    lines = [
        f"Resolved settings for: {os.path.abspath(target)}",
        f"Settings path: {os.path.abspath(settings.config_path) if settings.config_path else '(none: defaults)'}",
        f"Project root: {os.path.abspath(settings.root)}",
        "",
        f"select = {show(settings.select)}",
        f"extend-select = {show(settings.extend_select)}",
        f"ignore = {show(settings.ignore)}",
        "per-file-ignores = {"
        + ", ".join(f'"{pattern}" = {show(codes)}' for pattern, codes in settings.per_file_ignores)
        + "}",
        f"enabled = {show(sorted(settings.enabled_for(target)))}",
        f"exclude = {'(defaults) ' if exclude == DEFAULT_EXCLUDE else ''}{show(exclude)}",
        f"extend-exclude = {show(settings.extend_exclude)}",
        f"cli-exclude = {show(settings.cli_exclude) if settings.cli_exclude is not None else '(not given)'}",
        f"cli-extend-exclude = {show(settings.cli_extend_exclude)}",
        f"force-exclude = {str(settings.force_exclude).lower()}",
        f"respect-gitignore = {str(settings.respect_gitignore).lower()}",
        f"unsafe-fixes = {'(not set)' if settings.unsafe_fixes is None else str(settings.unsafe_fixes).lower()}",
        f"preview = {str(settings.preview).lower()}",
        f"cache-dir = {settings.cache_dir or os.path.join(os.path.abspath(settings.root), '.torchlint_cache')}",
    ]
    click.echo("\n".join(lines))
    return EXIT_OK


# --- version / rules / rule -------------------------------------------------


@main.command("version")
@click.option("--output-format", type=click.Choice(("text", "json")), default="text", show_default=True)
def version_command(output_format):
    """Print torchlint's version (as `torchlint --version` and `-V` do)."""
    if output_format == "json":
        import json

        click.echo(json.dumps({"version": __version__}))
        return
    click.echo(f"torchlint {__version__}")


@main.command("rules")
@click.option("--output-format", type=click.Choice(("text", "json")), default="text", show_default=True)
def rules_command(output_format):
    """List every rule: code, name and fix availability."""
    import json

    from torchlint.doors import rule_docs as ruledocs

    if output_format == "json":
        click.echo(json.dumps(ruledocs.rules_table_json(), indent=2))
        return
    import shutil

    # Wrapped to the terminal, as `ruff rule --all` is (80 columns when piped, or $COLUMNS).
    click.echo(ruledocs.rules_table_text(width=shutil.get_terminal_size((80, 24)).columns))


@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Every rule's documentation, in code order.")
@click.option("--output-format", type=click.Choice(("text", "json")), default="text", show_default=True)
def rule_command(code, show_all, output_format):
    """Print a rule's documentation (or every rule's, with --all)."""
    import json

    from torchlint.doors import rule_docs as ruledocs

    if show_all == (code is not None):
        raise click.UsageError("give a rule code or --all (not both)")
    if show_all:
        rules = ruledocs.documented_rules()
        if output_format == "json":
            click.echo(json.dumps([ruledocs.render_rule_json(r) for r in rules], indent=2))
        else:  # Markdown pages one after the other, as `ruff rule --all` prints them
            click.echo("\n".join(ruledocs.render_rule_markdown(r) for r in rules), nl=False)
        return
    try:
        if output_format == "json":
            click.echo(json.dumps(ruledocs.render_rule_json(code.strip()), indent=2))
        else:
            click.echo(ruledocs.render_rule_markdown(code.strip()))
    except KeyError:
        raise fail(f"unknown rule code {code.strip()!r} (see `torchlint rules`)") from None


def _register_subcommands() -> None:
    """Commands that live with their feature; none imports torch or pygls at import time."""
    from torchlint.doors.run_command import run_command
    from torchlint.doors.server import server_command
    from torchlint.files.cache import clean_command
    from torchlint.verify.cli import doctor_command, verify_command

    for command in (server_command, verify_command, doctor_command, clean_command, run_command):
        main.add_command(command)


_register_subcommands()
