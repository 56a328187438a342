"""What a run observed: plain, frozen data (no torch), so a report can cross a
process boundary or be written as JSON and read back by bench code."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from typing import Optional, Tuple


class Status(str, Enum):
    """How the script's run ended."""

    OK = "ok"  # it ran to its end (exit code 0)
    EXITED = "exited"  # it called sys.exit with a non-zero code
    FAILED = "failed"  # it raised
    STOPPED = "stopped"  # `--steps N` ended it after N steps
    INTERRUPTED = "interrupted"  # Ctrl-C
    TIMED_OUT = "timed-out"  # `--timeout S`

    def __str__(self) -> str:
        return self.value


class Clock(str, Enum):
    """What a step is counted in (see torchlint/runtime/steps.py)."""

    OPTIMIZER = "optimizer steps"
    BATCHES = "batches"
    FORWARDS = "forward calls"
    PASSES = "passes"  # over a DataLoader (TL304)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, order=True)
class Site:
    """A place in the user's code: 1-based line and column (characters), and
    for a notebook the 1-based cell (lines then count from the cell's first line)."""

    path: str
    line: int
    column: int = 1
    end_line: int = 0  # 0: same as line
    end_column: int = 0  # 0: the end of the line
    cell: Optional[int] = None
    function: str = ""

    def where(self, relative_to: Optional[str] = None) -> str:
        """ "train.py:12" or "nb.ipynb:cell 3:4"."""
        path = self.path
        if relative_to is not None:
            rel = os.path.relpath(path, relative_to) if os.path.isabs(path) else path
            path = path if rel.startswith("..") else rel
        if self.cell is not None:
            return f"{path}:cell {self.cell}:{self.line}"
        return f"{path}:{self.line}"

    def same_place(self, path: str, cell: Optional[int], line: int, end_line: int) -> bool:
        """Whether this site lies on the lines [line, end_line] of that file (or cell)."""
        if os.path.abspath(self.path) != os.path.abspath(path) or self.cell != cell:
            return False
        mine_end = self.end_line or self.line
        return self.line <= max(end_line, line) and line <= mine_end


@dataclass(frozen=True)
class Observation:
    """One thing seen at one site of the user's code, with how often.

    `count`: occurrences; `steps_seen`: distinct steps of `clock` it occurred
    in; `steps`: the steps of that clock in the run; `per_step`: it recurred
    across steps (seen in at least two, and in at least half of the steps from
    the first it was seen in). `reported`: whether it becomes a finding (a
    one-off host read is kept here, but is not a finding). `crash`: a run on a
    real GPU raises here. `related`: other places involved (where the CPU
    tensor or the model was made). `stack`: the user's frames, outermost first.
    """

    code: str
    site: Site
    message: str
    count: int
    steps_seen: int
    steps: int
    clock: Clock
    per_step: bool
    reported: bool = True
    crash: bool = False
    related: Tuple[Site, ...] = ()
    stack: Tuple[Site, ...] = ()
    # Measured figures that vary from run to run (seconds): never in a message.
    timings: Tuple[Tuple[str, float], ...] = ()

    @property
    def rate(self) -> float:
        """Occurrences per step of its clock."""
        return self.count / self.steps if self.steps else float(self.count)

    def places(self) -> Tuple[Site, ...]:
        return (self.site, *self.related, *self.stack)


@dataclass(frozen=True)
class ScriptError:
    """What the script raised: the exception, a short traceback (the user's
    frames and the one that raised) and where in the user's code it surfaced."""

    type: str
    message: str
    traceback: str
    site: Optional[Site] = None


@dataclass(frozen=True)
class LinesRun:
    """The lines of one user file (or notebook cell) that ran."""

    path: str
    cell: Optional[int]
    lines: Tuple[int, ...]


@dataclass(frozen=True)
class RunTimings:
    """What a run on a real GPU measured (`--device cuda`; torchlint/runtime/timing.py).
    Seconds, which vary from run to run; None where nothing was measured."""

    device: str  # the GPU's name
    clock: Clock  # what a step is
    steps: int  # step intervals measured
    step_s: Optional[float]  # the host's time per step, median
    device_step_s: Optional[float]  # the device's (between CUDA events at the steps), median
    sync_wait_s: float  # the host's wait at the syncs of the user's code, all sites
    syncs: int
    sync_sites: int
    loader_wait_s: float  # inside the DataLoaders' `__next__`, all batches
    batches: int
    utilization: Optional[float] = None  # mean GPU utilization, percent (NVML)
    utilization_samples: int = 0
    note: str = ""  # why utilization is missing


@dataclass(frozen=True)
class RunReport:
    """Everything a run produced."""

    target: str  # the script, notebook, or module name
    kind: str  # "script" | "module" | "notebook"
    status: Status
    exit_code: int  # the script's own (0, its sys.exit code, 1 when it raised, 130 on Ctrl-C)
    steps: int
    clock: Clock
    observations: Tuple[Observation, ...] = ()
    error: Optional[ScriptError] = None
    files: Tuple[str, ...] = ()  # the user's files that ran (scripts, modules, the notebook)
    lines_run: Optional[Tuple[LinesRun, ...]] = None  # when asked (`--compare`)
    device_used: bool = False  # something was sent to the (simulated or real) GPU
    device: str = ""  # the real GPU's name with `--device cuda`; "" on the simulated GPU
    timings: Optional[RunTimings] = field(default=None, compare=False)
    seconds: float = field(default=0.0, compare=False)

    @property
    def findings(self) -> Tuple[Observation, ...]:
        """The observations that are reported (as findings), in site order."""
        return tuple(o for o in self.observations if o.reported)

    def ran(self, path: str, cell: Optional[int], line: int, end_line: int = 0) -> Optional[bool]:
        """Whether any of these lines ran; None when lines were not recorded."""
        if self.lines_run is None:
            return None
        target = os.path.abspath(path)
        for entry in self.lines_run:
            if os.path.abspath(entry.path) == target and entry.cell == cell:
                last = max(end_line, line)
                return any(line <= n <= last for n in entry.lines)
        return False
