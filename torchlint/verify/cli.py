"""click commands `verify` and `doctor` (registered by torchlint.doors.cli, and by
``python -m torchlint.verify``, which needs nothing but click and torch).

No torch import at import time: only the probe, the doctor and the fixture
subprocesses touch torch, when a command runs."""

from __future__ import annotations

import datetime as _dt
import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import click

from torchlint.verify import fixture_meta, rule_results, runner, script_runs
from torchlint.verify import probe as probe_mod
from torchlint.verify import report as report_mod
from torchlint.verify import verdict as V

DEFAULT_REPEATS = 5
DRY_RUN_DEVICE = "cpu (dry run)"
NOT_REPORTED = "not run: no merged report has this rule (its part never started, or stopped before writing)"
EXIT_OK, EXIT_FAIL, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2, 3


class Stopped(Exception):
    """SIGTERM (e.g. a wall-clock limit): stop, keep what was measured."""


def _run_label(run: Optional[script_runs.Run]) -> str:
    """The progress bar's label for a measured run."""
    return f"{run.rule} {run.script} r{run.repeat}" if run else ""


def _smoke_label(run: Optional[script_runs.Run]) -> str:
    """The progress bar's label for a smoke run."""
    return f"{run.rule} {run.script}" if run else ""


def _err(message: str) -> None:
    click.echo(message, err=True)


class _NoBar:
    """A progress bar that shows nothing (stderr is not a terminal)."""

    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def update(self, n: int, item: Any = None) -> None:
        return None


def _progress(length: int, label: str, item_show_func: Any) -> Any:
    """A progress bar on stderr when it is a terminal; nothing otherwise
    (click's bar prints its label alone on a line when it is not, which is
    noise in a log or a CI job)."""
    if not sys.stderr.isatty():
        return _NoBar()
    return click.progressbar(length=length, label=label, file=sys.stderr, item_show_func=item_show_func)


def _write_outputs(
    report: Dict[str, Any], output: Optional[Path], markdown: Optional[Path], plot: Optional[Path]
) -> None:
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
            _err("cannot write the plot: matplotlib is not installed (pip install matplotlib)")
        else:
            _err(f"wrote {plot}")


def _discover(fixtures_dir: Optional[Path], rules: Sequence[str]) -> List[fixture_meta.Fixture]:
    try:
        fixtures = fixture_meta.discover(fixtures_dir or fixture_meta.default_fixtures_dir(), rules)
    except fixture_meta.FixtureError as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_ERROR)
    if not fixtures:
        _err("error: no fixtures found")
        sys.exit(EXIT_ERROR)
    return fixtures


@click.command("verify")
@click.option("--rule", "rule_opts", multiple=True, metavar="CODE", help="Only this rule's fixture (repeatable).")
@click.option(
    "--rules",
    "rules_opts",
    multiple=True,
    metavar="CODES",
    help="Only these rules, comma-separated (e.g. TL100,TL101).",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=None,
    help=f"Runs of each script (fresh processes) per rule [default: {DEFAULT_REPEATS}; "
    "with --plan: each session part's own].",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the JSON report here (rewritten after every rule). Default: no JSON file.",
)
@click.option(
    "--markdown",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the table as Markdown.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a PNG of bad vs fixed per rule (matplotlib).",
)
@click.option("--smoke", is_flag=True, help="Run every fixture briefly on the CPU; fail if any script errors.")
@click.option(
    "--mechanism",
    is_flag=True,
    help="No GPU needed: run every fixture pair under `torchlint run` (the simulated GPU) and check that "
    "bad.py shows the rule's finding and fixed.py does not.",
)
@click.option(
    "--plan",
    "show_plan",
    is_flag=True,
    help="Print the runs and the estimated GPU time per rule and in total; run nothing.",
)
@click.option(
    "--merge",
    "merge_files",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Merge these reports (repeatable) into --output/--markdown/--plot; measure nothing. "
    "With --rules, a rule no report has is listed as not run.",
)
@click.option(
    "--time-budget",
    type=click.FloatRange(min=1),
    default=None,
    metavar="SECONDS",
    help="Start a rule only when its estimate fits in what is left of this many seconds; "
    "the rest are reported as not run (exit 3). With --plan: the budget the total is held to.",
)
@click.option("--require-gpu", is_flag=True, help="Exit 2 instead of 0 when no CUDA GPU can be used.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Measure on the CPU at smoke sizes: the GPU path's bookkeeping (time budget, partial reports, "
    "merge) without a GPU; the numbers and verdicts mean nothing.",
)
@click.option(
    "--fixtures",
    "fixtures_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Fixtures directory [default: the checkout's fixtures/, else the installed package's].",
)
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Parallel scripts in --smoke and --mechanism.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=script_runs.DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds allowed per script run.",
)
@click.option(
    "--traces",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep each profile window's Chrome trace in this directory.",
)
def verify_command(
    rule_opts: Sequence[str],
    rules_opts: Sequence[str],
    repeats: Optional[int],
    output: Optional[Path],
    markdown: Optional[Path],
    plot: Optional[Path],
    smoke: bool,
    mechanism: bool,
    show_plan: bool,
    merge_files: Sequence[Path],
    time_budget: Optional[float],
    require_gpu: bool,
    dry_run: bool,
    fixtures_dir: Optional[Path],
    jobs: Optional[int],
    timeout: float,
    traces: Optional[Path],
) -> None:
    """Measure on a CUDA GPU that each rule's fix makes the GPU work harder.

    Runs every fixture pair (fixtures/<CODE>-<name>/bad.py and fixed.py) in
    fresh subprocesses and gives a verdict per rule: pass, fail,
    inconclusive, skipped (no GPU) or not-run (left out by --time-budget).
    The JSON report is rewritten after every rule. Exit 0 when nothing
    failed, 1 when a verdict failed (or a --smoke script errored), 2 on a
    usage problem, when CUDA_LAUNCH_BLOCKING is set, or without a GPU under
    --require-gpu, 3 when rules were left out by --time-budget. With
    --mechanism: exit 0 when every observable rule was observed, 1 otherwise.
    """
    root = Path.cwd()
    rules = fixture_meta.split_rules(list(rule_opts) + list(rules_opts))
    if mechanism:
        given = {
            "--smoke": smoke,
            "--plan": show_plan,
            "--merge": bool(merge_files),
            "--dry-run": dry_run,
            "--require-gpu": require_gpu,
            "--repeats": repeats is not None,
            "--time-budget": time_budget is not None,
            "--plot": plot is not None,
            "--traces": traces is not None,
        }
        clash = [name for name, on in given.items() if on]
        if clash:
            raise click.UsageError(f"--mechanism runs no GPU measurement: it does not take {', '.join(clash)}")
        fixtures = _discover(fixtures_dir, rules)
        sys.exit(_mechanism(fixtures, jobs, timeout, output, markdown, root))
    if merge_files:
        expected = (
            [rule_results.not_run_result(fx, NOT_REPORTED, root=root) for fx in _discover(fixtures_dir, rules)]
            if rules
            else []
        )
        sys.exit(_merge(merge_files, output, markdown, plot, expected))
    if show_plan:
        from torchlint.verify import plan as plan_mod

        fixtures = _discover(fixtures_dir, rules)
        text, _ = plan_mod.render(fixtures, repeats, budget_s=time_budget or plan_mod.DEFAULT_BUDGET_S)
        click.echo(text, nl=False)
        sys.exit(EXIT_OK)
    repeats = repeats or DEFAULT_REPEATS
    if smoke:
        fixtures = _discover(fixtures_dir, rules)
        sys.exit(_smoke(fixtures, jobs, timeout, output, markdown, plot, root))

    if probe_mod.launch_blocking():
        _err(
            "error: refusing to measure with CUDA_LAUNCH_BLOCKING set: every kernel launch would wait for the "
            "GPU, so timings and busy fractions would be meaningless. Run: unset CUDA_LAUNCH_BLOCKING"
        )
        sys.exit(EXIT_ERROR)

    # The GPU first: without one, that is the first thing to say.
    p = probe_mod.probe_cuda()
    environment = {
        "torch": p.torch_version,
        "cuda": p.cuda_version,
        "device_count": p.device_count,
        "device": p.devices[0] if p.devices else None,
        "devices": list(p.devices),
    }
    if dry_run:
        environment.update(device=DRY_RUN_DEVICE, device_count=0, devices=[])
        fixtures = _discover(fixtures_dir, rules)
        sys.exit(
            _measure(fixtures, repeats, environment, output, markdown, plot, time_budget, timeout, traces, root, True)
        )
    if not p.available:
        click.echo(f"GPU verification skipped: {p.reason}")
        fixtures = _discover(fixtures_dir, rules)
        results = [rule_results.skipped_result(fx, p.reason, root) for fx in fixtures]
        rep = report_mod.build(
            results, mode="skipped", repeats=repeats, environment=environment, skipped_reason=p.reason
        )
        _write_outputs(rep, output, markdown, plot)
        sys.exit(EXIT_ERROR if require_gpu else EXIT_OK)

    fixtures = _discover(fixtures_dir, rules)
    sys.exit(_measure(fixtures, repeats, environment, output, markdown, plot, time_budget, timeout, traces, root))


def _measure(
    fixtures: List[fixture_meta.Fixture],
    repeats: int,
    environment: Dict[str, Any],
    output: Optional[Path],
    markdown: Optional[Path],
    plot: Optional[Path],
    time_budget: Optional[float],
    timeout: float,
    traces: Optional[Path],
    root: Path,
    dry_run: bool = False,
) -> int:
    """Measure `fixtures` least certain first, rewriting `output` after every rule;
    the exit code. A dry run measures on the CPU at smoke sizes."""
    from torchlint.verify import plan as plan_mod

    expected_device = "cpu" if dry_run else "cuda"
    started = time.monotonic()
    extra: Dict[str, Any] = {
        "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "time_budget_s": time_budget,
        "requested_rules": [fx.rule for fx in fixtures],
        "argv": sys.argv[1:],
    }
    results: Dict[str, Dict[str, Any]] = {
        str(fx.path): rule_results.not_run_result(fx, "not run yet: the run was stopped before this rule", root=root)
        for fx in fixtures
    }
    measured = list(fixtures)
    if not dry_run:  # a dry run checks every script on the CPU; a GPU run measures what the machine can show
        for fx in fixtures:
            why = fixture_meta.too_few_gpus(fx, int(environment.get("device_count") or 0))
            if why is not None:
                results[str(fx.path)] = rule_results.skipped_result(fx, why, root)
                measured.remove(fx)

    def write() -> Dict[str, Any]:
        rep = report_mod.build(
            [results[str(fx.path)] for fx in fixtures],
            mode="dry-run" if dry_run else "gpu",
            repeats=repeats,
            environment=environment,
            elapsed_s=round(time.monotonic() - started, 1),
            **extra,
        )
        if output is not None:
            report_mod.write_json(rep, output)
        return rep

    def on_rule(rr: runner.RuleRuns) -> None:
        fx = rr.fixture
        if rr.complete:
            results[str(fx.path)] = rule_results.rule_result(fx, rr.runs, expected_device, root, repeats=repeats)
        elif rr.runs:
            results[str(fx.path)] = rule_results.cut_result(fx, rr.runs, rr.reason, repeats, expected_device, root)
        else:
            results[str(fx.path)] = rule_results.not_run_result(fx, rr.reason, rr.runs, root)
        write()

    sampler = runner.NvmlSampler()
    environment["nvml"] = False if dry_run else sampler.start()
    write()
    if output is not None:
        _err(f"writing {output} after every rule")
    total = len(runner.plan(measured, repeats))

    def stop(signum: int, frame: Any) -> None:
        raise Stopped()

    previous = signal.signal(signal.SIGTERM, stop)
    stopped = False
    try:
        with _progress(total, "verify", _run_label) as bar:
            runner.measure(
                fixture_meta.run_order(measured),
                repeats,
                progress=lambda run: bar.update(1, run),
                nvml=sampler,
                timeout=timeout,
                traces=traces,
                budget_s=time_budget,
                estimate=plan_mod.estimator(repeats),
                on_rule=on_rule,
                smoke=dry_run,
            )
    except (Stopped, KeyboardInterrupt):
        stopped = True
    finally:
        sampler.stop()
        signal.signal(signal.SIGTERM, previous)
    rep = write()
    if stopped:
        held = f"{output} holds" if output is not None else "the table below shows"
        _err(f"stopped: {held} the rules finished so far")
    click.echo(report_mod.to_text(rep), nl=False)
    _write_outputs(rep, None, markdown, plot)
    not_run = rep["rules_not_run"]
    if not_run:
        _err(
            f"not run: {', '.join(not_run)}; measure them with: --rules {','.join(not_run)} "
            "(then combine the reports with --merge)"
        )
    if any(r["verdict"] == V.FAIL for r in rep["rules"]):
        return EXIT_FAIL
    return EXIT_INCOMPLETE if not_run else EXIT_OK


def _merge(
    files: Sequence[Path],
    output: Optional[Path],
    markdown: Optional[Path],
    plot: Optional[Path],
    expected: Sequence[Dict[str, Any]] = (),
) -> int:
    try:
        merged, warnings = report_mod.merge([(str(f), report_mod.load_json(f)) for f in files], expected)
    except report_mod.MergeError as exc:
        _err(f"error: {exc}")
        return EXIT_ERROR
    for w in warnings:
        _err(f"warning: {w}")
    click.echo(report_mod.to_text(merged), nl=False)
    _write_outputs(merged, output, markdown, plot)
    if merged["rules_not_run"]:
        _err(f"still not measured: {', '.join(merged['rules_not_run'])}")
    if any(r["verdict"] == V.FAIL for r in merged["rules"]):
        return EXIT_FAIL
    return EXIT_INCOMPLETE if merged["rules_not_run"] else EXIT_OK


def _smoke(
    fixtures: List[fixture_meta.Fixture],
    jobs: Optional[int],
    timeout: float,
    output: Optional[Path],
    markdown: Optional[Path],
    plot: Optional[Path],
    root: Path,
) -> int:
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # one line, not one error per script
        click.echo(
            "smoke run skipped: torch is not installed, and every fixture script needs it "
            "(a CPU build: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
        )
        return EXIT_ERROR
    with _progress(2 * len(fixtures), "smoke", _smoke_label) as bar:
        runs = script_runs.smoke(fixtures, jobs or 0, progress=lambda r: bar.update(1, r), timeout=min(timeout, 300.0))
    failed = [r for r in runs if not r.ok]
    for fx in fixtures:
        for r in (r for r in runs if r.fixture == str(fx.path)):
            status = "ok" if r.ok else "FAILED"
            line = f"{status:<6} {fx.path.name}/{r.script}.py  {r.seconds:.1f} s"
            click.echo(line + (f"  {r.error}" if r.error else ""))
    click.echo(f"smoke: {len(runs) - len(failed)}/{len(runs)} scripts ran and emitted metrics")
    if output is not None or markdown is not None:
        rep = report_mod.build([rule_results.smoke_result(fx, runs, root) for fx in fixtures], mode="smoke", repeats=1)
        if output is not None:
            report_mod.write_json(rep, output)
        if markdown is not None:
            lines = ["| Rule | Fixture | Smoke |", "|---|---|---|"]
            lines += [f"| {r['rule']} | {r['fixture']} | {r['verdict']} |" for r in rep["rules"]]
            markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if plot is not None:
        _err("--plot is ignored with --smoke (nothing is measured)")
    return EXIT_FAIL if failed else EXIT_OK


def _mechanism(
    fixtures: List[fixture_meta.Fixture],
    jobs: Optional[int],
    timeout: float,
    output: Optional[Path],
    markdown: Optional[Path],
    root: Path,
) -> int:
    """Each fixture pair under `torchlint run`; the table, the reports, the exit code."""
    import importlib.metadata
    import importlib.util

    from torchlint.verify import mechanism as M

    if importlib.util.find_spec("torch") is None:
        click.echo(
            "mechanism check skipped: torch is not installed, and `torchlint run` needs it "
            "(a CPU build: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
        )
        return EXIT_ERROR
    torch_version = importlib.metadata.version("torch")  # the scripts' torch, without importing it here

    started = time.monotonic()
    with _progress(M.planned_runs(fixtures), "mechanism", _smoke_label) as bar:
        results = M.check(fixtures, jobs or 0, timeout, progress=lambda r: bar.update(1, r), root=root)
    rep = report_mod.build(
        results,
        mode=report_mod.MECHANISM_MODE,
        repeats=1,
        environment={"torch": torch_version, "device": M.DEVICE},
        elapsed_s=round(time.monotonic() - started, 1),
        requested_rules=[fx.rule for fx in fixtures],
        argv=sys.argv[1:],
    )
    click.echo(report_mod.to_text(rep), nl=False)
    counts = rep["summary"]
    observable = [r for r in results if r["verdict"] != M.NOT_OBSERVABLE]
    line = f"mechanism: {counts.get(M.OBSERVED, 0)} of {len(observable)} observable rules observed"
    unobservable = [r["rule"] for r in results if r["verdict"] == M.NOT_OBSERVABLE]
    if unobservable:
        line += f" ({', '.join(unobservable)}: not observable by a run)"
    click.echo(line)
    for r in results:
        if r["verdict"] not in (M.OBSERVED, M.NOT_OBSERVABLE):
            click.echo(f"  {r['rule']} {r['verdict']}: {r['reason']}")
    _write_outputs(rep, output, markdown, None)
    return EXIT_OK if M.passed(results) else EXIT_FAIL


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
