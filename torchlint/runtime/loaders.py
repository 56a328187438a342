"""What a run's DataLoaders did, and the findings it makes (TL301-TL304).

The recorder (observers.py) keeps a `LoaderInfo` per `DataLoader(...)`
call, counted as its iterators yield; at the end `loader_observations`
merges the loaders made at one call site (a helper that builds the train
and the validation loader is one site) and judges each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint.runtime.observations import Clock, Observation
from torchlint.runtime.sites import Key, UserFiles, site_at

INFO = "_torchlint_loader_"  # a DataLoader's (and its iterators') LoaderInfo


@dataclass
class LoaderInfo:
    serial: int
    site: Optional[Key]
    batch_size: Optional[int]
    workers: int
    pin_memory: bool
    persistent: bool
    in_memory: bool
    iterations: int = 0  # passes begun
    restarts: int = 0  # passes that started the workers again
    batches: int = 0
    moved: int = 0  # batches copied to the device
    last_moved: int = -1
    wait: float = 0.0  # seconds spent waiting for batches
    busy: float = 0.0  # seconds between a batch and the request for the next
    last_yield: Optional[float] = None


def loader_findings(info: LoaderInfo, device_used: bool) -> List[Tuple[str, str, int]]:
    """(code, message, count) of what a DataLoader did (TL301-TL304)."""
    found = []
    if info.batch_size == 1 and info.batches >= 2:
        found.append(
            (
                "TL301",
                f"this DataLoader yields batches of one ({info.batches} batches): each step does a sample's work",
                info.batches,
            )
        )
    # Deterministic: a dataset of tensors in memory only indexes them (as `check` judges it);
    # the time waited is reported, never judged on.
    if info.workers == 0 and info.batches >= 2 and device_used and not info.in_memory:
        found.append(
            (
                "TL302",
                "this DataLoader loads every batch in the training process (`num_workers=0`): the step waits "
                f"while each of its {info.batches} batches is made; give it workers",
                info.batches,
            )
        )
    if not info.pin_memory and info.moved:
        found.append(
            (
                "TL303",
                f"this DataLoader's batches are copied to the GPU from pageable memory ({info.moved} copies): "
                "`pin_memory=True` makes the copies faster and lets them overlap",
                info.moved,
            )
        )
    if info.workers > 0 and not info.persistent and info.restarts:
        found.append(
            (
                "TL304",
                f"this DataLoader starts its {info.workers} worker processes anew on each pass over the data: "
                "`persistent_workers=True` keeps them",
                info.restarts,
            )
        )
    return found


def loader_observations(loaders: Sequence[LoaderInfo], files: UserFiles, device_used: bool) -> List[Observation]:
    """TL301-TL304, one per `DataLoader(...)` call site."""
    by_site: Dict[Key, LoaderInfo] = {}
    for info in loaders:
        if info.site is None or not info.batches:
            continue
        merged = by_site.get(info.site)
        if merged is None:
            by_site[info.site] = dataclasses.replace(info)
            continue
        merged.batch_size = merged.batch_size if merged.batch_size == info.batch_size else None
        merged.workers = min(merged.workers, info.workers)
        merged.pin_memory = merged.pin_memory and info.pin_memory
        merged.persistent = merged.persistent and info.persistent
        merged.in_memory = merged.in_memory and info.in_memory
        merged.iterations += info.iterations
        merged.restarts += info.restarts
        merged.batches += info.batches
        merged.moved += info.moved
        merged.wait += info.wait
        merged.busy += info.busy
    out: List[Observation] = []
    for key, info in by_site.items():
        site = site_at(key, files)
        timings = (("wait_s", info.wait), ("wait_per_batch_s", info.wait / info.batches), ("busy_s", info.busy))
        for code, message, count in loader_findings(info, device_used):
            passes = code == "TL304"
            out.append(
                Observation(
                    code,
                    site,
                    message,
                    count,
                    info.iterations if passes else count,
                    info.iterations if passes else info.batches,
                    Clock.PASSES if passes else Clock.BATCHES,
                    per_step=True,
                    timings=timings,
                )
            )
    return out
