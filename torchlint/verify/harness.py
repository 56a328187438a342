"""The tiny API fixture scripts use (imported by fixtures, never by the linter).

A fixture script::

    from torchlint.verify.harness import Harness

    h = Harness(__file__)            # parses --smoke / TORCHLINT_SMOKE=1
    device = h.device                # cuda if available (never in smoke mode), else cpu
    model = ...                      # small model, synthetic seeded data

    def train(steps):                # runs `steps` training (or inference) steps
        for step in range(steps):
            ...
            h.count(batch_size)      # samples processed

    for steps in h.steps():          # warm-up chunks, then one call per measured window
        train(steps)
    h.emit()                         # print the metrics line for the runner

`h.steps()` is a generator: it times the warm-up chunks and wraps each
window (synchronize, profiler, sync debug mode) around the script's own call,
so the script calls its training function itself, as real code does.

One process measures several *windows*, each a separate call of the step
function (the runner chooses which through TORCHLINT_VERIFY_PASSES; the
script does not change), always in this order so that instrumentation never
perturbs a later measurement of time:

- ``timing``: no instrumentation: wall time, samples/s, peak memory;
- ``profile``: a torch.profiler trace of the window: GPU busy fraction,
  kernel and copy counts (the profiler starts after the timing window and runs
  a few settling steps before the window opens);
- ``sync``: the sync debug mode counts synchronizing calls.

Warm-up and windows are sized by time, not by steps: the warm-up runs until
at least ``warmup_s`` (0.3 s) of wall time and ``warmup_min`` steps have
passed (GPU clocks ramp up from idle under load), and it measures the step
time, from which each window's step count is chosen to last about its target
time (within its minimum and maximum step counts). A slow CPU-side script
therefore runs a few steps, a fast GPU one many.

In smoke mode (``--smoke`` / TORCHLINT_SMOKE=1) sizes are the scripts' tiny
ones, everything runs on the CPU, the warm-up is one step and each window two.

In mechanism mode (TORCHLINT_VERIFY_MECHANISM=1: `torchlint verify
--mechanism` runs the script under `torchlint run`) sizes are the smoke ones,
the device is the one torch offers (the simulated GPU), and the harness
instruments nothing (no synchronize, no profiler, no sync debug mode): one
warm-up step, then one window of ``MECHANISM_STEPS`` steps, so that what the
run observes is the script's own doing, over enough steps to judge "per step".

With TORCHLINT_SMOKE_DEVICE=cuda too, a smoke run uses the GPU when torch
sees one: under `torchlint run`, the simulated one (the fixtures' device
placement observed at smoke sizes).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any, Dict, Iterator, List, Optional

MARK = "TORCHLINT_METRICS "
WINDOW_LABEL = "torchlint.window"
PASSES = ("timing", "profile", "sync")
# Seconds / step counts; a fixture's meta.toml [windows] table overrides them
# (the runner passes it in TORCHLINT_VERIFY_WINDOWS as JSON).
DEFAULT_WINDOWS: Dict[str, float] = {
    "warmup_s": 0.3,
    "warmup_min": 1,
    "timing_s": 0.5,
    "timing_min": 2,
    "timing_max": 5000,
    "profile_s": 0.15,
    "profile_min": 1,
    "profile_max": 30,
    "profile_settle": 1,
    "sync_s": 0.1,
    "sync_min": 1,
    "sync_max": 200,
}
SMOKE_STEPS = 2
MECHANISM_ENV = "TORCHLINT_VERIFY_MECHANISM"
MECHANISM_STEPS = 5


def parse_passes(value: Optional[str]) -> List[str]:
    """The windows to run: timing always, first; then profile, then sync, so that
    instrumentation never precedes a timing."""
    names = {p.strip() for p in (value or "").split(",") if p.strip()}
    for name in sorted(names):
        if name not in PASSES:
            raise ValueError(f"TORCHLINT_VERIFY_PASSES: unknown pass {name!r}; expected {', '.join(PASSES)}")
    return [p for p in PASSES if p in names or p == "timing"]


def window_steps(target_s: float, step_s: Optional[float], lo: int, hi: int) -> int:
    """Steps for a window of about `target_s` seconds, given the warm-up's step time."""
    if not step_s or step_s <= 0:
        return int(lo)
    return int(max(lo, min(hi, math.ceil(target_s / step_s))))


SMOKE_COMPILE_ENV = "TORCHLINT_SMOKE_COMPILE_BACKEND"
SMOKE_DEVICE_ENV = "TORCHLINT_SMOKE_DEVICE"  # "cuda": smoke sizes on the GPU torch sees


def smoke_compile(torch: Any) -> None:
    """In smoke mode, `torch.compile` without a backend uses Dynamo's `eager`
    backend: the script's calls still go through Dynamo (frame evaluation,
    guards, graph capture: what TL404 is about), without Inductor's code
    generation and C++ compile, which takes a minute or more per graph on a
    busy CPU and would make a smoke run time out. TORCHLINT_SMOKE_COMPILE_BACKEND
    names another backend (`inductor` compiles for real)."""
    backend = os.environ.get(SMOKE_COMPILE_ENV, "eager").strip() or "eager"
    original = torch.compile
    if backend == "inductor" or getattr(original, "_torchlint_smoke", False):
        return

    def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("backend") is None:
            kwargs["backend"] = backend
            kwargs.pop("mode", None)  # a mode is Inductor's: not with another backend
        return original(model, *args, **kwargs)

    compile.__doc__ = original.__doc__
    compile._torchlint_smoke = True  # type: ignore[attr-defined]
    torch.compile = compile


class Harness:
    def __init__(self, script: str = "", argv: Optional[list] = None) -> None:
        self._t_init = time.perf_counter()
        import torch

        self.torch = torch
        argv = sys.argv[1:] if argv is None else argv
        self.mechanism = os.environ.get(MECHANISM_ENV) == "1"
        self.smoke = self.mechanism or "--smoke" in argv or os.environ.get("TORCHLINT_SMOKE") == "1"
        self.cost_mode = os.environ.get("TORCHLINT_VERIFY_COST") == "1" and not self.smoke
        self.passes = ["timing"] if self.mechanism else parse_passes(os.environ.get("TORCHLINT_VERIFY_PASSES"))
        self.windows = dict(DEFAULT_WINDOWS)
        self.windows.update(json.loads(os.environ.get("TORCHLINT_VERIFY_WINDOWS") or "{}"))
        if self.smoke:
            smoke_compile(torch)
        smoke_on_gpu = os.environ.get(SMOKE_DEVICE_ENV) == "cuda"
        use_cuda = torch.cuda.is_available() and (smoke_on_gpu or not self.smoke) and not self.cost_mode
        self.cuda = use_cuda
        if self.cost_mode:
            from torchlint.verify import cost_mode

            self.device = cost_mode.enter_cost_mode(torch)
        elif self.mechanism:  # the script's own choice on the (simulated) GPU; the harness measures nothing
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            self.device = torch.device("cuda" if use_cuda else "cpu")
        self.script = script
        self.samples = 0
        self.step_s: Optional[float] = None
        self.metrics: Dict[str, Any] = {"passes": {}}
        launched = os.environ.get("TORCHLINT_VERIFY_LAUNCHED")
        if launched:  # the runner's clock when it started this process: interpreter and imports
            self.metrics["startup_s"] = round(time.time() - float(launched), 3)
        torch.manual_seed(0)

    # -- what fixtures call ------------------------------------------------

    def scale(self, full: int, smoke: int) -> int:
        """A size: `full` on the GPU, `smoke` in smoke mode."""
        return smoke if self.smoke else full

    def count(self, samples: int) -> None:
        self.samples += int(samples)

    def sync(self) -> None:
        if self.cuda and not self.smoke:  # a smoke run times nothing: no sync of the harness's own
            self.torch.cuda.synchronize()

    def checkpoint(self, model: Any) -> str:
        """Save `model`'s current weights to a temporary file and return its path:
        the "trained weights" an inference fixture loads (`torch.load`)."""
        import tempfile

        fd, path = tempfile.mkstemp(prefix="torchlint-verify-", suffix=".pt")
        os.close(fd)
        self.torch.save(model.state_dict(), path)
        return path

    def steps(self) -> Iterator[int]:
        """Step counts to run, one `train(steps)` call each: the warm-up's chunks,
        then, per window this run asks for, (for the profile window, a few
        settling steps first and) the window's steps."""
        if self.cost_mode:
            from torchlint.verify import cost_mode

            yield from cost_mode.steps(self)
            return
        yield from self._warm_up()
        for name in self.passes:
            n = self._steps(name)
            if name == "timing":
                yield from self._window("timing", n)
            else:
                # A context window that breaks in the harness must not cost the timing already taken.
                try:
                    yield from self._window(name, n)
                except Exception as exc:  # noqa: BLE001 - reported to the runner
                    self.metrics["passes"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            self._emit_line()  # after each window: a later crash keeps the earlier windows

    def _warm_up(self) -> Iterator[int]:
        """One step (its one-time costs: allocations, cuBLAS handles, autotuning),
        then chunks until `warmup_s` of wall time and `warmup_min` more steps have
        passed (GPU clocks ramp up under load); measures the step time that sizes the windows."""
        w = self.windows
        t0 = time.perf_counter()
        self.metrics["setup_s"] = round(t0 - self._t_init, 3)  # the script's set-up (an optimizer's imports)
        yield 1
        self.sync()
        first = time.perf_counter() - t0
        if self.smoke:
            return
        done, elapsed, n = 0, 0.0, 1
        while True:
            t0 = time.perf_counter()
            yield n
            self.sync()
            dt = time.perf_counter() - t0
            done += n
            elapsed += dt
            self.step_s = dt / n
            if done >= w["warmup_min"] and elapsed >= w["warmup_s"]:
                break
            left = w["warmup_s"] - elapsed
            want = int(left / self.step_s) if left > 0 else 0
            n = max(1, int(w["warmup_min"]) - done, min(2 * n, want))
        self.metrics["warmup"] = {
            "first_step_s": first,
            "steps": done + 1,
            "seconds": first + elapsed,
            "step_s": self.step_s,
        }

    def emit(self, **extra: Any) -> None:
        if self.cost_mode:
            from torchlint.verify import cost_mode

            cost_mode.finish(self)
        self.metrics.update(extra)
        self._emit_line()

    # -- internals ---------------------------------------------------------

    def _steps(self, name: str) -> int:
        if self.mechanism:
            return MECHANISM_STEPS
        if self.smoke:
            return SMOKE_STEPS
        w = self.windows
        return window_steps(w[f"{name}_s"], self.step_s, int(w[f"{name}_min"]), int(w[f"{name}_max"]))

    def _window(self, name: str, steps: int) -> Iterator[int]:
        from torchlint.verify import passes

        torch = self.torch
        with passes.around(self, name) as (settle, found):
            if settle:
                yield settle  # outside the window: the profiler's first-use costs
                self.sync()
            clock_start = self._sm_clock()
            if self.cuda:
                torch.cuda.reset_peak_memory_stats()
            self.samples = 0
            self.sync()
            start_unix = time.time()
            start = time.perf_counter()
            with torch.profiler.record_function(WINDOW_LABEL):
                with passes.inner(self, name, found):
                    yield steps
                self.sync()
            wall = time.perf_counter() - start
            end_unix = time.time()
            clock_end = self._sm_clock()
        m: Dict[str, Any] = {
            "steps": steps,
            "wall_s": wall,
            "samples": self.samples,
            "samples_per_s": self.samples / wall if wall > 0 else 0.0,
            # Wall-clock stamps let the runner match its NVML samples to the window.
            "window_start_unix": start_unix,
            "window_end_unix": end_unix,
            "sm_clock_mhz_start": clock_start,
            "sm_clock_mhz_end": clock_end,
        }
        if self.cuda and name == "timing":
            m["peak_mem_bytes"] = int(torch.cuda.max_memory_allocated())
        m.update(found)
        passes.per_step(m)
        self.metrics["passes"][name] = m

    def _sm_clock(self) -> Optional[int]:
        """The SM clock in MHz (NVML, through torch.cuda.clock_rate), None when unreadable."""
        if not self.cuda or getattr(self, "_no_clock", False):
            return None
        try:
            return int(self.torch.cuda.clock_rate(self.device))
        except Exception:  # noqa: BLE001 - pynvml missing or the driver refuses: not a measurement error
            self._no_clock = True
            return None

    def _emit_line(self) -> None:
        out = dict(self.metrics)
        timing = self.metrics["passes"].get("timing") or {}
        for key in ("samples", "samples_per_s", "wall_s"):  # the timing window's, at the top level too
            if key in timing:
                out.setdefault(key, timing[key])
        out["device"] = str(self.device)
        out["smoke"] = self.smoke
        out["requested_passes"] = list(self.passes)
        if self.cuda:
            out.setdefault("gpu_name", self.torch.cuda.get_device_name(self.device))
        sys.stdout.write(MARK + json.dumps(out, sort_keys=True) + "\n")
        sys.stdout.flush()
