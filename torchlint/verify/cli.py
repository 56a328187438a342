"""click commands `verify` and `doctor` (registered by torchlint.cli).

No torch import at import time: only the probe, the doctor and the fixture
subprocesses touch torch, when a command runs."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import click

from torchlint.verify import probe as probe_mod
from torchlint.verify import report as report_mod
from torchlint.verify import runner

DEFAULT_OUTPUT = "torchlint-verify.json"
EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


def _err(message: str) -> None:
    click.echo(message, err=True)


def _write_outputs(report: Dict[str, Any], output: Optional[Path], markdown: Optional[Path],
                   plot: Optional[Path]) -> None:
    if output is not None:
        report_mod.write_json(report, output)
        _err(f"wrote {output}")
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(report_mod.to_markdown(report), encoding="utf-8")
        _err(f"wrote {markdown}")
    if plot is not None:
        try:
            report_mod.write_plot(report, plot)
        except ImportError:
            _err("cannot write the plot: matplotlib is not installed (pip install 'torchlint[verify]')")
        else:
            _err(f"wrote {plot}")


@click.command("verify")
@click.option("--rule", "rules", multiple=True, metavar="CODE", help="Only this rule's fixture (repeatable).")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True,
              help="Runs of each script per pass.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=f"JSON report path [default: {DEFAULT_OUTPUT}; none with --smoke].")
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the table as Markdown.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a PNG of bad vs fixed per rule (matplotlib).")
@click.option("--smoke", is_flag=True, help="Run every fixture briefly on the CPU; fail if any script errors.")
@click.option("--require-gpu", is_flag=True, help="Exit 2 instead of 0 when no CUDA GPU can be used.")
@click.option("--fixtures", "fixtures_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Fixtures directory [default: the repository's fixtures/].")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Parallel scripts in --smoke.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Seconds allowed per script run.")
@click.option("--traces", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep each profile pass's Chrome trace in this directory.")
def verify_command(rules: Sequence[str], repeats: int, output: Optional[Path], markdown: Optional[Path],
                   plot: Optional[Path], smoke: bool, require_gpu: bool, fixtures_dir: Optional[Path],
                   jobs: Optional[int], timeout: float, traces: Optional[Path]) -> None:
    """Measure on a CUDA GPU that each rule's fix makes the GPU work harder.

    Runs every fixture pair (fixtures/<CODE>-<name>/bad.py and fixed.py) in
    fresh subprocesses and gives a verdict per rule: pass, fail,
    inconclusive or skipped. Exit 0 when nothing failed, 1 when a verdict
    failed (or a --smoke script errored), 2 on a usage problem, when
    CUDA_LAUNCH_BLOCKING is set, or without a GPU under --require-gpu.
    """
    root = Path.cwd()
    try:
        fixtures = runner.discover(fixtures_dir or runner.default_fixtures_dir(), rules)
    except runner.FixtureError as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_ERROR)
    if not fixtures:
        _err("error: no fixtures found")
        sys.exit(EXIT_ERROR)

    if smoke:
        sys.exit(_smoke(fixtures, jobs, timeout, output, markdown, plot, root))

    if probe_mod.launch_blocking():
        _err("error: refusing to measure with CUDA_LAUNCH_BLOCKING set: every kernel launch would wait for the "
             "GPU, so timings and busy fractions would be meaningless. Run: unset CUDA_LAUNCH_BLOCKING")
        sys.exit(EXIT_ERROR)

    output = output or Path(DEFAULT_OUTPUT)
    p = probe_mod.probe_cuda()
    environment = {"torch": p.torch_version, "cuda": p.cuda_version, "device_count": p.device_count,
                   "device": p.devices[0] if p.devices else None, "devices": list(p.devices)}
    if not p.available:
        click.echo(f"GPU verification skipped: {p.reason}")
        results = [runner.skipped_result(fx, p.reason, root) for fx in fixtures]
        rep = report_mod.build(results, mode="skipped", repeats=repeats, environment=environment,
                               skipped_reason=p.reason)
        _write_outputs(rep, output, markdown, plot)
        sys.exit(EXIT_ERROR if require_gpu else EXIT_OK)

    sampler = runner.NvmlSampler()
    environment["nvml"] = sampler.start()
    total = len(runner.plan(fixtures, repeats))
    try:
        with click.progressbar(length=total, label="verify", file=sys.stderr,
                               item_show_func=lambda r: f"{r.rule} {r.script} {r.pass_name}" if r else "") as bar:
            def progress(run: runner.Run) -> None:
                bar.update(1, run)

            runs = runner.measure(fixtures, repeats, progress=progress, nvml=sampler, timeout=timeout,
                                  traces=traces)
    finally:
        sampler.stop()
    results = [runner.rule_result(fx, runs[str(fx.path)], "cuda", root) for fx in fixtures]
    rep = report_mod.build(results, mode="gpu", repeats=repeats, environment=environment)
    click.echo(report_mod.to_text(rep), nl=False)
    _write_outputs(rep, output, markdown, plot)
    sys.exit(EXIT_FAIL if any(r["verdict"] == "fail" for r in results) else EXIT_OK)


def _smoke(fixtures: List[runner.Fixture], jobs: Optional[int], timeout: float, output: Optional[Path],
           markdown: Optional[Path], plot: Optional[Path], root: Path) -> int:
    with click.progressbar(length=2 * len(fixtures), label="smoke", file=sys.stderr,
                           item_show_func=lambda r: f"{r.rule} {r.script}" if r else "") as bar:
        runs = runner.smoke(fixtures, jobs or 0, progress=lambda r: bar.update(1, r), timeout=min(timeout, 300.0))
    failed = [r for r in runs if not r.ok]
    for fx in fixtures:
        for r in (r for r in runs if r.fixture == str(fx.path)):
            status = "ok" if r.ok else "FAILED"
            line = f"{status:<6} {fx.path.name}/{r.script}.py  {r.seconds:.1f} s"
            click.echo(line + (f"  {r.error}" if r.error else ""))
    click.echo(f"smoke: {len(runs) - len(failed)}/{len(runs)} scripts ran and emitted metrics")
    if output is not None or markdown is not None:
        rep = report_mod.build([runner.smoke_result(fx, runs, root) for fx in fixtures], mode="smoke", repeats=1)
        if output is not None:
            report_mod.write_json(rep, output)
        if markdown is not None:
            lines = ["| Rule | Fixture | Smoke |", "|---|---|---|"]
            lines += [f"| {r['rule']} | {r['fixture']} | {r['verdict']} |" for r in rep["rules"]]
            markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if plot is not None:
        _err("--plot is ignored with --smoke (nothing is measured)")
    return EXIT_FAIL if failed else EXIT_OK


@click.command("doctor")
def doctor_command() -> None:
    """Check that torch can use a CUDA GPU here; print each problem with its fix.

    Exit 1 when the GPU cannot be used, 0 otherwise."""
    from torchlint.verify import doctor

    checks = doctor.diagnose()
    click.echo(doctor.render(checks), nl=False)
    if doctor.usable(checks):
        click.echo("GPU ready for torchlint verify.")
        sys.exit(EXIT_OK)
    click.echo("GPU cannot be used: fix the FAIL lines above.")
    sys.exit(EXIT_FAIL)
