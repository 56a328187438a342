"""Counting steps, and stopping after N of them.

Three clocks run side by side:

- optimizer steps: every `step()` of the first optimizer that steps (a GAN's
  second optimizer does not count twice);
- batches: every batch a DataLoader yields, per loader, and which loader's
  iteration is under way (the innermost one still running);
- forward calls: every call of the first top-level model call site (a model
  with parameters called from the user's code, outside any other forward).

Each occurrence of an observation notes the clocks' readings
(`Reading`). A run's step is an optimizer step when it had any; else a batch;
else a forward call. An observation made while a loader's iteration is under
way is judged on that loader's batches (so the per-batch work of an
evaluation loop that runs once per epoch is per step of that loop); one made
outside every loader iteration on the run's clock.

`--steps N` stops the run cleanly (StopRun) when the Nth optimizer step is
done; with no optimizer step yet, when the (N+1)th batch is asked for; with
neither, when the (N+1)th forward call of the first site begins.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from torchlint.runtime.observations import Clock


class StopRun(BaseException):
    """Raised inside the script to end the run early (`--steps`, `--timeout`).
    A BaseException, so `except Exception` in the script does not swallow it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class LoaderClock:
    """One DataLoader's batches (`batches`: how many it has yielded so far)."""

    ident: int
    batches: int = 0


@dataclass(frozen=True)
class Reading:
    """The clocks at an occurrence: optimizer steps done, forward calls begun,
    and the loader whose iteration is under way with its batches so far."""

    optimizer: int
    forwards: int
    loader: Optional[int]
    batch: int


@dataclass
class Tally:
    """How often an observation occurred, and in how many distinct steps of each clock."""

    count: int = 0
    # clock key -> [distinct ticks, first tick, last tick]
    ticks: Dict[Tuple[str, int], List[int]] = field(default_factory=dict)
    per_loader: Dict[int, int] = field(default_factory=dict)  # loader -> occurrences

    def add(self, reading: Reading) -> None:
        self.count += 1
        self._tick(("optimizer", 0), reading.optimizer)
        self._tick(("forwards", 0), reading.forwards)
        if reading.loader is not None:
            self._tick(("loader", reading.loader), reading.batch)
            self.per_loader[reading.loader] = self.per_loader.get(reading.loader, 0) + 1

    def _tick(self, key: Tuple[str, int], value: int) -> None:
        entry = self.ticks.get(key)
        if entry is None:
            self.ticks[key] = [1, value, value]
        elif entry[2] != value:
            entry[0] += 1
            entry[2] = value


@dataclass(frozen=True)
class Judgement:
    clock: Clock
    steps_seen: int
    steps: int
    per_step: bool


class Steps:
    """The run's clocks, and the `--steps` limit."""

    def __init__(self, limit: Optional[int] = None) -> None:
        self.limit = limit
        self.optimizer = 0
        self.forwards = 0
        self.batches = 0  # over every loader
        self.loaders: Dict[int, LoaderClock] = {}
        self._first_optimizer: Optional[int] = None
        self._first_forward_site: Optional[Any] = None
        # Loader iterations under way, innermost last: (weakref to the iterator, loader ident).
        self._active: List[Tuple["weakref.ReferenceType[Any]", int]] = []
        self.stopping: Optional[str] = None

    # -- ticks ------------------------------------------------------------------------------------

    def optimizer_stepped(self, optimizer: object) -> None:
        if self._first_optimizer is None:
            self._first_optimizer = id(optimizer)
        if id(optimizer) != self._first_optimizer:
            return
        self.optimizer += 1
        if self.limit is not None and self.optimizer >= self.limit:
            self.stop(f"--steps {self.limit}: stopped after {self.limit} optimizer steps")

    def batch_wanted(self) -> None:
        """A loader is asked for its next batch."""
        if self.stopping:
            raise StopRun(self.stopping)
        if self.limit is not None and self.optimizer == 0 and self.batches >= self.limit:
            self.stop(f"--steps {self.limit}: stopped after {self.limit} batches")

    def batch_yielded(self, loader: int, iterator: object) -> None:
        self.batches += 1
        clock = self.loaders.get(loader)
        if clock is None:
            clock = self.loaders[loader] = LoaderClock(loader)
        clock.batches += 1
        self._prune()
        if not self._active or self._active[-1][0]() is not iterator:
            self._active = [a for a in self._active if a[0]() is not iterator]
            self._active.append((weakref.ref(iterator), loader))

    def loader_exhausted(self, iterator: object) -> None:
        self._active = [a for a in self._active if a[0]() is not None and a[0]() is not iterator]

    def forward_called(self, site: object) -> None:
        """A top-level forward of a model with parameters begins at `site`."""
        if self.stopping:
            raise StopRun(self.stopping)
        if self._first_forward_site is None:
            self._first_forward_site = site
        if site != self._first_forward_site:
            return
        if self.limit is not None and self.optimizer == 0 and self.batches == 0 and self.forwards >= self.limit:
            self.stop(f"--steps {self.limit}: stopped after {self.limit} forward calls")
        self.forwards += 1

    def stop(self, reason: str) -> None:
        self.stopping = reason
        raise StopRun(reason)

    def _prune(self) -> None:
        if self._active and any(a[0]() is None for a in self._active):
            self._active = [a for a in self._active if a[0]() is not None]

    # -- readings ---------------------------------------------------------------------------------

    def active_loader(self) -> Optional[int]:
        self._prune()
        return self._active[-1][1] if self._active else None

    def reading(self) -> Reading:
        loader = self.active_loader()
        batch = self.loaders[loader].batches if loader is not None else 0
        return Reading(self.optimizer, self.forwards, loader, batch)

    @property
    def clock(self) -> Clock:
        if self.optimizer:
            return Clock.OPTIMIZER
        if self.batches:
            return Clock.BATCHES
        return Clock.FORWARDS

    @property
    def total(self) -> int:
        clock = self.clock
        if clock is Clock.OPTIMIZER:
            return self.optimizer
        if clock is Clock.BATCHES:
            return self.batches
        return self.forwards

    def judge(self, tally: Tally) -> Judgement:
        """Which clock an observation is counted on, in how many of its steps
        it occurred, and whether it recurred per step (seen in at least two
        steps, and in at least half of the steps from the first it was seen
        in). The run's clock is preferred; a loader's batches judge what
        happens inside that loader's iterations when the run's clock does not
        find it per step (an evaluation loop run once per epoch)."""
        run = self._judge_run(tally)
        if run.per_step or not tally.per_loader:
            return run
        loader = max(sorted(tally.per_loader), key=lambda k: tally.per_loader[k])
        seen, first, _ = tally.ticks[("loader", loader)]
        total = self.loaders[loader].batches
        return Judgement(Clock.BATCHES, seen, total, _recurs(seen, total - first + 1))

    def _judge_run(self, tally: Tally) -> Judgement:
        clock = self.clock
        if clock is Clock.FORWARDS:
            key, current = ("forwards", 0), self.forwards
        elif clock is Clock.OPTIMIZER:
            key, current = ("optimizer", 0), self.optimizer
        else:  # batches of every loader, when nothing else counts
            seen, first = _distinct_batches(tally), 0
            return Judgement(clock, seen, self.batches, _recurs(seen, self.batches))
        seen, first, _ = tally.ticks.get(key, [0, 0, 0])
        return Judgement(clock, seen, self.total, _recurs(seen, current - first + 1))


def _recurs(seen: int, span: int) -> bool:
    return seen >= 2 and seen * 2 >= span


def _distinct_batches(tally: Tally) -> int:
    return sum(entry[0] for key, entry in tally.ticks.items() if key[0] == "loader")
