"""The command line: `torchlint [check] PATH...`, `torchlint rules`, `torchlint rule CODE`.

A thin shell over `torchlint.runner`; heavy modules (LibCST, the rules) are
imported only when a command runs, and torch never.
Exit codes: 0 nothing found (or all fixed), 1 findings remain, 2 usage,
configuration or internal error.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import click

from torchlint import __version__

FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif")
EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def fail(message: str) -> "click.exceptions.Exit":
    click.echo(f"torchlint: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


class DefaultGroup(click.Group):
    """A group whose default command is `check`: `torchlint PATH` == `torchlint check PATH`.
    Unexpected exceptions become one line and exit 2 (traceback with TORCHLINT_DEBUG=1)."""

    default_command = "check"

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

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
        except KeyboardInterrupt:
            raise fail("interrupted") from None
        except Exception as exc:
            if os.environ.get("TORCHLINT_DEBUG"):
                raise
            raise fail(f"internal error: {type(exc).__name__}: {exc} (set TORCHLINT_DEBUG=1 for a traceback)") from None


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="torchlint")
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
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--select",
    multiple=True,
    metavar="CODES",
    help="Only these codes or prefixes (comma-separated; replaces the config's select).",
)
@click.option("--extend-select", multiple=True, metavar="CODES", help="Add codes or prefixes to the selection.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Codes or prefixes to leave out.")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply (and count as fixable) unsafe fixes.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing; exit 1 if any.")
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
@click.option("--no-cache", is_flag=True, help="Do not read or write the cache.")
@click.option(
    "-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True, help="Worker processes (0: one per core)."
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Use this pyproject.toml.")
@click.option("--show-fixes", is_flag=True, help="List the fixes applied per file.")
@click.option("--stdin-filename", metavar="PATH", help="The path to report (and configure) for source read from `-`.")
@click.option("--force-exclude", is_flag=True, help="Apply exclusions to paths named on the command line too.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
def check_command(
    paths,
    select,
    extend_select,
    ignore,
    fix,
    unsafe_fixes,
    diff,
    output_format,
    output_file,
    statistics,
    exit_zero,
    no_cache,
    jobs,
    config_path,
    show_fixes,
    stdin_filename,
    force_exclude,
    quiet,
):
    """Lint PATHS (default: the current folder); `-` reads source from stdin."""
    from torchlint.config import ConfigError, load_settings

    paths = list(paths) or ["."]
    use_stdin = "-" in paths
    if use_stdin and len(paths) > 1:
        raise click.UsageError("`-` (stdin) cannot be combined with other paths")
    if use_stdin:
        start = (os.path.dirname(stdin_filename) or ".") if stdin_filename else "."
    else:
        start = paths[0]
    try:
        settings = load_settings(
            config=config_path,
            start=start,
            select=_codes(select) or None,
            extend_select=_codes(extend_select),
            ignore=_codes(ignore),
        )
    except ConfigError as exc:
        raise fail(str(exc)) from None
    opts = _Opts(
        mode="diff" if diff else ("fix" if fix else "lint"),
        unsafe=unsafe_fixes,
        output_format=output_format,
        output_file=output_file,
        statistics=statistics,
        show_fixes=show_fixes,
        quiet=quiet,
        no_cache=no_cache,
    )
    if use_stdin:
        code = _check_stdin(settings, stdin_filename or "-", opts)
    else:
        code = _check_paths(paths, settings, opts, jobs, force_exclude)
    if exit_zero and code == EXIT_FINDINGS:
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


def _report(opts: _Opts, findings, lines, fixes_applied=0, fixed_per_file=None) -> str:
    from torchlint.report import ReportData, fixes_summary, render, summary

    data = ReportData(
        findings=findings,
        lines=lines,
        mode=opts.mode,
        unsafe_fixes=opts.unsafe,
        fixes_applied=fixes_applied,
        fixed_per_file=fixed_per_file or {},
        show_fixes=opts.show_fixes,
    )
    if opts.statistics:
        from torchlint.report import statistics as stats

        return stats.render(data, as_json=opts.output_format in ("json", "json-lines"))
    text = render(opts.output_format, data)
    if opts.output_format in ("full", "concise") and not opts.quiet:
        text += ("\n" if text and opts.output_format == "concise" else "") + summary(data)
        if opts.show_fixes:
            text += fixes_summary(data)
    return text


def _problems_out(problems) -> int:
    """Print problems on stderr (after the report); EXIT_ERROR if any."""
    for p in problems:
        click.echo(f"torchlint: error: {p}", err=True)
    return EXIT_ERROR if problems else EXIT_OK


def _check_paths(paths, settings, opts: _Opts, jobs: int, force_exclude: bool) -> int:
    from torchlint import api

    cache_root = None if opts.no_cache else settings.root
    result = api.run(
        paths,
        settings,
        mode=opts.mode,
        unsafe=opts.unsafe,
        jobs=jobs,
        force_exclude=force_exclude,
        cache_root=cache_root,
    )
    if opts.mode == "diff":
        _write_output("".join(d for _, d in result.diffs), opts.output_file)
        fixes = sum(o.fixes_applied for o in result.outcomes if o.diff)
        if not opts.quiet:
            from torchlint.report import plural

            click.echo(f"Would fix {plural(fixes, 'error')} in {plural(len(result.diffs), 'file')}.", err=True)
        return _problems_out(result.problems) or (EXIT_FINDINGS if result.diffs else EXIT_OK)
    fixed_per_file = {o.path: o.fixes_applied for o in result.outcomes if o.written and o.fixes_applied}
    _write_output(_report(opts, result.findings, result.lines, result.fixes_applied, fixed_per_file), opts.output_file)
    return _problems_out(result.problems) or (EXIT_FINDINGS if result.findings else EXIT_OK)


def _check_stdin(settings, filename: str, opts: _Opts) -> int:
    """Lint source from stdin. With --fix: fixed source on stdout, findings on stderr."""
    from torchlint import api

    data = sys.stdin.buffer.read()
    outcome = api.process_bytes(data, filename, settings, mode=opts.mode, unsafe=opts.unsafe)
    lines = {(outcome.path, r): t for r, t in outcome.lines}
    if opts.mode == "diff":
        _write_output(outcome.diff or "", opts.output_file)
        return _problems_out(outcome.problems) or (EXIT_FINDINGS if outcome.diff else EXIT_OK)
    report = _report(opts, outcome.findings, lines, outcome.fixes_applied)
    if opts.mode == "fix":
        sys.stdout.flush()
        sys.stdout.buffer.write(outcome.new_data if outcome.new_data is not None else data)
        sys.stdout.buffer.flush()
        click.echo(report, nl=False, err=True)
    else:
        _write_output(report, opts.output_file)
    return _problems_out(outcome.problems) or (EXIT_FINDINGS if outcome.findings else EXIT_OK)


# --- rules / rule -----------------------------------------------------------


@main.command("rules")
@click.option("--output-format", type=click.Choice(("text", "json")), default="text", show_default=True)
def rules_command(output_format):
    """List every rule: code, name and fix availability."""
    import json

    from torchlint import ruledocs

    if output_format == "json":
        click.echo(json.dumps(ruledocs.rules_table_json(), indent=2))
        return
    click.echo(ruledocs.rules_table_text())


@main.command("rule")
@click.argument("code")
@click.option("--output-format", type=click.Choice(("text", "json")), default="text", show_default=True)
def rule_command(code, output_format):
    """Print a rule's documentation."""
    import json

    from torchlint import ruledocs

    try:
        if output_format == "json":
            click.echo(json.dumps(ruledocs.render_rule_json(code.strip()), indent=2))
        else:
            click.echo(ruledocs.render_rule_markdown(code.strip()))
    except KeyError:
        raise fail(f"unknown rule code {code.strip()!r} (see `torchlint rules`)") from None


def _register_subcommands() -> None:
    """Commands that live with their feature; none imports torch or pygls at import time."""
    from torchlint.cache import clean_command
    from torchlint.server import server_command
    from torchlint.verify.cli import doctor_command, verify_command

    for command in (server_command, verify_command, doctor_command, clean_command):
        main.add_command(command)


_register_subcommands()
