"""What the loader questions answer: `DatasetKind`, `CollateKind`, `Workers`,
`BatchUse`, a loader's `LoaderInfo`, and the DataLoader's argument positions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchlint.analysis.facts import Call

if TYPE_CHECKING:
    pass


# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
SAMPLER_POSITION = 3


NUM_WORKERS_POSITION = 5


COLLATE_POSITION = 6


PIN_MEMORY_POSITION = 7


TINY_DATASET = 64  # literal samples


class DatasetKind(enum.Enum):
    """What a loader's dataset does per item."""

    IN_MEMORY = "in memory"  # indexes tensors or lists held in memory
    TINY = "tiny"  # a handful of literal samples
    ITERABLE = "iterable"  # an IterableDataset (each worker would yield the whole stream)
    PLACES = "places"  # makes its items on the device
    READS = "reads"  # reads or decodes a file per item (images, audio, arrays on disk)
    UNKNOWN = "unknown"


class CollateKind(enum.Enum):
    NONE = "none"  # the default collate
    CPU = "cpu"  # a module-level function that keeps batches on the host
    DEVICE = "device"  # places batches on the device
    LOCAL = "local"  # a lambda (not picklable for spawned workers; what it returns unread)
    NESTED = "nested"  # a nested function we read that keeps batches on the host (not picklable)
    UNKNOWN = "unknown"


class Workers(enum.Enum):
    """What a loader's `num_workers` says."""

    NONE = "none"  # not given, or a literal 0 (also through a name bound once to 0)
    SOME = "some"  # a literal above 0 (also through a name bound once to one)
    MAYBE = "maybe"  # an expression: workers where it is above 0


class BatchUse(enum.Enum):
    """How a loader's batches are used in this file."""

    MOVED = "moved"  # iterated here, and some batch is moved to a device
    KEPT = "kept"  # iterated here, never moved
    SAMPLED = "sampled"  # only `next(iter(loader))`
    ELSEWHERE = "elsewhere"  # handed on


# The names the rules use.
IN_MEMORY, TINY, ITERABLE, PLACES, READS, UNKNOWN_DS = (
    DatasetKind.IN_MEMORY,
    DatasetKind.TINY,
    DatasetKind.ITERABLE,
    DatasetKind.PLACES,
    DatasetKind.READS,
    DatasetKind.UNKNOWN,
)


NO_COLLATE, CPU_COLLATE, DEVICE_COLLATE, LOCAL_COLLATE, NESTED_COLLATE, UNKNOWN_COLLATE = (
    CollateKind.NONE,
    CollateKind.CPU,
    CollateKind.DEVICE,
    CollateKind.LOCAL,
    CollateKind.NESTED,
    CollateKind.UNKNOWN,
)


@dataclass(frozen=True)
class LoaderInfo:
    call: Call
    dataset: DatasetKind
    collate: CollateKind
    used: bool  # iterated, handed on, returned or stored (not dead)
    # The dataset is built right here from a class (same-file, torchvision, imported): worker
    # processes can unpickle it by reference.
    local_dataset: bool
    batches: BatchUse = BatchUse.ELSEWHERE
    # A training loop in this file iterates the loader (directly, or through a parameter of a
    # same-file function it is passed to).
    trains: bool = False
    # Some batch of it is moved with `non_blocking=True` (an asynchronous copy, which needs pinned memory).
    non_blocking: bool = False
    # Its batches reach the device as the loader yields them (`x.to(device)`, `batch["x"].cuda()`), at
    # least as often as through a copy made on the host first (`x[:, :n].to(device)`, `x.float().cuda()`,
    # which a pinned batch does not speed up), or are fed to a model on the device as they are.
    copied_as_loaded: bool = False
    # `batch_size=len(dataset)`: one batch per pass.
    whole_dataset_batch: bool = False
    # Its items are known to be host tensors where that can be told: no TensorDataset the dataset may
    # be holds tensors whose place is not known to be the host (pinning a device tensor raises).
    host_items: bool = True
    # Its `collate_fn` is a same-file function that does per-batch work besides stacking (a
    # tokenizer's `pad`, a processor, a transform): work for worker processes even over data in memory.
    collate_works: bool = False
    # What it returns is only peeked at (`next(iter(loader))` outside a loop): it feeds no pass.
    peeked: bool = False
