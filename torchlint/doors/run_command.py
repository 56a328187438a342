"""`torchlint run`: the user's script, run on a simulated GPU (torchlint/runtime/), or
with `--device cuda` on the real one, timed.

    torchlint run [OPTIONS] SCRIPT.py [ARGS...]
    torchlint run [OPTIONS] -m MODULE [ARGS...]
    torchlint run [OPTIONS] NOTEBOOK.ipynb

Options go before the script; everything after it is the script's.
Exit code: the script's own when it did not succeed (1 when it raised, its
`sys.exit` code, 124 on `--timeout`, 130 on Ctrl-C); when it succeeded (or
`--steps` stopped it), 1 if anything was reported and 0 if not, as `check`
(0 with `--exit-zero`); 2 for a usage error (and `--device cuda` without a CUDA
device). torch is imported only once the
run starts: importing this module does not.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional, Tuple

import click

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
_FORMATS = ("text", "full", "concise", "json", "json-lines", "github", "gitlab", "junit", "pylint", "rdjson", "sarif")


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("-m", "module", metavar="MODULE", help="Run a module as `python -m MODULE` does.")
@click.option(
    "--steps", type=click.IntRange(min=1), help="Stop after N steps (optimizer steps, else batches), then report."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop after this long, then report.",
)
@click.option(
    "--output-format",
    type=click.Choice(_FORMATS),
    default="text",
    show_default=True,
    help="As `check`'s; json and sarif add a `runtime` object to each finding.",
)
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), help="Write the report to this file.")
@click.option(
    "--compare",
    is_flag=True,
    help="Also lint the files that ran (every rule) and say which static findings the run confirmed, contradicted or never reached.",
)
@click.option(
    "--compare-output",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the comparison and how the run ended to FILE as JSON (implies --compare).",
)
@click.option(
    "--fake-data",
    is_flag=True,
    help="torchvision's downloadable image sets (MNIST, CIFAR10...) give small synthetic sets.",
)
@click.option(
    "--device",
    type=click.Choice(("sim", "cuda")),
    default="sim",
    show_default=True,
    help="sim: a simulated GPU on this CPU; cuda: the real GPU, with timings (experimental).",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 when the script succeeded, even with findings.")
@click.argument("target", required=False, metavar="SCRIPT")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run_command(
    module: Optional[str],
    steps: Optional[int],
    timeout: Optional[float],
    output_format: str,
    output_file: Optional[str],
    compare: bool,
    compare_output: Optional[str],
    fake_data: bool,
    device: str,
    exit_zero: bool,
    target: Optional[str],
    args: Tuple[str, ...],
) -> None:
    """Run SCRIPT (or -m MODULE, or a NOTEBOOK's cells in order) on a simulated GPU with real values, and
    report what a GPU run would trip on, at its line, with how often: device mismatches, host syncs,
    copies, graphs kept alive, data loading. Network is off; Ctrl-C ends it with the report so far."""
    if module is not None:
        args = ((target,) if target is not None else ()) + tuple(args)
        name = module
    elif target is None:
        raise click.UsageError("give a script, a notebook, or -m MODULE")
    else:
        name = target
        if not os.path.isfile(name):
            click.echo(f"torchlint: error: {name}: no such file", err=True)
            raise click.exceptions.Exit(EXIT_ERROR)
    compare = compare or compare_output is not None
    from torchlint.runtime.cuda import DeviceUnavailable
    from torchlint.runtime.launch import Target
    from torchlint.runtime.report import render_report, status_line, timings_line
    from torchlint.runtime.session import RunOptions, run

    try:
        report = run(
            Target.of(name, tuple(args), module=module is not None),
            RunOptions(steps=steps, timeout=timeout, fake_data=fake_data, lines=compare, device=device),
        )
    except DeviceUnavailable as exc:
        click.echo(
            f"torchlint: error: no CUDA device: {exc}; use the default simulated GPU (leave out `--device cuda`)",
            err=True,
        )
        raise click.exceptions.Exit(EXIT_ERROR) from None
    cwd = os.getcwd()
    text = render_report(report, output_format, cwd)
    comparison = None
    if compare:
        from torchlint.runtime.compare import compare as link
        from torchlint.runtime.compare import render_text, static_findings, to_json

        comparison = link(report, static_findings(report.files))
        if compare_output:
            from torchlint.runtime.compare import document

            with open(compare_output, "w", encoding="utf-8") as fh:
                json.dump(document(report, comparison, cwd), fh, indent=2)
                fh.write("\n")
        if output_format == "text":
            text += "\n" + render_text(comparison, cwd)
    if output_file:
        with open(output_file, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.flush()
        click.echo(text, nl=False)
    if output_format != "text":  # machine formats: the run's end (and the comparison) on stderr
        click.echo(status_line(report, cwd), err=True)
        timings = timings_line(report)
        if timings is not None:
            click.echo(timings, err=True)
        if comparison is not None and not compare_output:
            click.echo(json.dumps(to_json(comparison, cwd), indent=2), err=True)
        if report.error is not None and report.error.traceback:
            click.echo(report.error.traceback.rstrip(), err=True)
    raise click.exceptions.Exit(exit_code(report.exit_code, report.status.value, bool(report.findings), exit_zero))


def exit_code(script: int, status: str, found: bool, exit_zero: bool) -> int:
    """The script's code when it did not succeed; else 1 for findings (0 with --exit-zero)."""
    if status not in ("ok", "stopped"):
        return script if script else EXIT_FINDINGS
    return EXIT_FINDINGS if found and not exit_zero else EXIT_OK
