"""One dry run: the sandbox, the simulated accelerator, the observers, the
user's code, and the report. `run(target, options) -> RunReport`. With
`device="cuda"` (or a `real_device` of a test's own), the same run on a real
device (real.py): nothing simulated, the observers on real tensors, timed.

Ends: the script's end (status OK, or EXITED with its `sys.exit` code), an
exception (FAILED: exit code 1 and a short traceback), `--steps` (STOPPED,
exit 0), `--timeout` (TIMED_OUT, exit 124), Ctrl-C (INTERRUPTED, exit 130).
In each case the observations made up to there are reported.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, cast

from torchlint.runtime.launch import Target, execute, prepared
from torchlint.runtime.observations import LinesRun, RunReport, ScriptError, Site, Status
from torchlint.runtime.sites import UserFiles
from torchlint.runtime.steps import Steps, StopRun

if TYPE_CHECKING:
    from torchlint.runtime.timing import Device

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


class RunTimeout(StopRun):
    pass


@dataclass(frozen=True)
class RunOptions:
    steps: Optional[int] = None  # stop after this many steps
    timeout: Optional[float] = None  # seconds
    fake_data: bool = False  # torchvision's image sets are synthetic
    lines: bool = False  # record the lines that ran (`--compare`)
    isolate: bool = True  # network off, generators seeded
    device: str = "sim"  # "sim": the simulated GPU; "cuda": the real one (cuda.DeviceUnavailable without)
    real_device: Optional["Device"] = None  # a real device of the caller's own (tests): as "cuda"


class _Lines:
    """The user's lines that run (sys.settrace, on the user's frames only)."""

    def __init__(self, files: UserFiles) -> None:
        self.files = files
        self.seen: Dict[str, Set[int]] = {}

    def _global(self, frame: FrameType, event: str, arg: Any) -> Optional[Callable[..., Any]]:
        if event != "call":
            return None
        filename = frame.f_code.co_filename
        if self.files.place(filename) is None:
            return None
        lines = self.seen.setdefault(filename, set())

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                lines.add(frame.f_lineno)
            return local

        return local

    def start(self) -> None:
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(None)

    def result(self) -> Tuple[LinesRun, ...]:
        out = []
        for filename, lines in self.seen.items():
            place = self.files.place(filename)
            if place is not None:
                out.append(LinesRun(place.path, place.cell, tuple(sorted(lines))))
        return tuple(sorted(out, key=lambda e: (e.path, e.cell or 0)))


class _Alarm:
    """`--timeout`: SIGALRM in the main thread raises RunTimeout in the script."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self.previous: Any = None
        self.armed = False

    def start(self) -> None:
        if (
            not self.seconds
            or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()
        ):
            return

        def ring(signum: int, frame: Optional[FrameType]) -> None:
            raise RunTimeout(f"--timeout {self.seconds:g}: stopped after {self.seconds:g} s")

        self.previous = signal.signal(signal.SIGALRM, ring)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        self.armed = True

    def stop(self) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
            self.armed = False


class _ModeStack:
    """The torch function modes and default device as they were before the run:
    the script may leave modes of its own (`torch.set_default_device` keeps a
    DeviceContext at the bottom of the stack); they go with the run."""

    def __init__(self) -> None:
        import torch
        from torch.utils import _device

        self.length = torch._C._len_torch_function_stack()
        self.context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
        self.current = _device.CURRENT_DEVICE

    def restore(self) -> None:
        import torch
        from torch.utils import _device

        while torch._C._len_torch_function_stack() > self.length:
            torch._C._pop_torch_function_stack()
        torch._GLOBAL_DEVICE_CONTEXT.device_context = self.context
        _device.CURRENT_DEVICE = self.current


def _error(exc: BaseException, files: UserFiles) -> ScriptError:
    """The exception, with a short traceback: the user's frames and the one that raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    kept = [f for f in frames if files.place(f.filename) is not None]
    if frames and (not kept or kept[-1] is not frames[-1]):
        kept.append(frames[-1])
    lines = ["Traceback (most recent call last, the script's frames):\n"]
    lines.extend(traceback.format_list(kept[-12:]))
    message = "".join(traceback.format_exception_only(type(exc), exc)).splitlines(keepends=True)
    lines.extend(message[:8] + (["    ...\n"] if len(message) > 8 else []))
    site = None
    tb: Optional[TracebackType] = exc.__traceback__
    while tb is not None:  # the innermost user frame
        place = files.place(tb.tb_frame.f_code.co_filename)
        if place is not None:
            site = Site(place.path, tb.tb_lineno, cell=place.cell, function=tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return ScriptError(type(exc).__name__, str(exc)[:2000], "".join(lines), site)


def _exit_code(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run(target: Target, options: RunOptions = RunOptions()) -> RunReport:
    """Run the target on the simulated accelerator (or the real device) and report what it did."""

    from torchlint.runtime.sandbox import Sandbox

    if options.device not in ("sim", "cuda"):
        raise ValueError(f"device: {options.device!r} (sim or cuda)")
    real_device = options.real_device
    if real_device is None and options.device == "cuda":
        from torchlint.runtime.cuda import device as cuda_device

        real_device = cuda_device()  # DeviceUnavailable, with why
    files = UserFiles(target.roots())
    steps = Steps(options.steps)
    real = None
    if real_device is not None:
        from torchlint.runtime.real import RealRun

        real = RealRun(files, steps, real_device)
        recorder = real.recorder
        mode: Any = real.mode
    else:
        from torchlint.runtime.mode import Simulator
        from torchlint.runtime.observers import Recorder

        recorder = Recorder(files, steps)
        mode = Simulator(recorder)
    sandbox = Sandbox()
    sandbox.environment("MPLBACKEND", "Agg")
    if options.isolate:
        sandbox.network_off()
        sandbox.seed()
    if options.fake_data:
        sandbox.fake_data()
    if real is not None:
        patches = real.install()
    else:
        from torchlint.runtime.accelerator import install

        patches = install(recorder)
    recorder.install()
    lines = _Lines(files) if options.lines else None
    alarm = _Alarm(options.timeout)
    status, exit_code, error = Status.OK, 0, None
    start = time.perf_counter()
    modes = _ModeStack()
    imported: List[str] = []
    try:
        with prepared(target, files) as imported:
            cast(Any, mode).__enter__()
            if real is not None:
                real.start()
            alarm.start()
            if lines is not None:
                lines.start()
            try:
                execute(target, files)
            finally:
                if lines is not None:
                    lines.stop()
                alarm.stop()
                modes.restore()
    except RunTimeout as exc:
        status, exit_code, error = Status.TIMED_OUT, EXIT_TIMEOUT, _stopped(exc)
    except StopRun as exc:
        status, exit_code, error = Status.STOPPED, 0, _stopped(exc)
    except KeyboardInterrupt:
        status, exit_code = Status.INTERRUPTED, EXIT_INTERRUPTED
    except SystemExit as exc:
        exit_code = _exit_code(exc.code)
        status = Status.OK if exit_code == 0 else Status.EXITED
    except BaseException as exc:  # the script's own failure is part of the report
        status, exit_code, error = Status.FAILED, 1, _error(exc, files)
    finally:
        sys.stdout.flush()
        if real is not None:
            real.stop()
        recorder.uninstall()
        patches.restore()
        sandbox.restore()
    recorder.finish(complete=status in (Status.OK, Status.EXITED, Status.STOPPED))
    observations = tuple(recorder.observations())
    timings = real.timings(steps.clock, observations) if real is not None else None
    ran = lines.result() if lines is not None else None
    if ran is not None:
        names = tuple(sorted({e.path for e in ran}))
    else:
        names = tuple(sorted({target.name, *imported} if target.kind != "module" else set(imported)))
    return RunReport(
        target=target.name,
        kind=target.kind,
        status=status,
        exit_code=exit_code,
        steps=steps.total,
        clock=steps.clock,
        observations=observations,
        error=error,
        files=names,
        lines_run=ran,
        device_used=recorder.device_used,
        device=real_device.name if real_device is not None else "",
        timings=timings,
        seconds=time.perf_counter() - start,
    )


def _stopped(exc: StopRun) -> ScriptError:
    return ScriptError(type(exc).__name__, exc.reason, "")


def run_script(path: str, argv: List[str] = [], **options: Any) -> RunReport:  # noqa: B006 (read only)
    """Run a script (or a notebook, by its .ipynb path) with `argv` as its arguments."""
    return run(Target.of(path, tuple(argv)), RunOptions(**options))


def run_module(name: str, argv: List[str] = [], **options: Any) -> RunReport:  # noqa: B006 (read only)
    """Run `python -m name argv...`."""
    return run(Target.of(name, tuple(argv), module=True), RunOptions(**options))
