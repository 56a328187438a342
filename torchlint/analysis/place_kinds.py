"""What the place questions answer: `Device` (what a device expression names),
`Place` (where a module or tensor lives), the events that move a module or
hand it on (`Event`, `EventKind`, `ModuleEvents`), `SplitMove`, and `join`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional

import libcst as cst

from torchlint.analysis.facts import Call, Scope, Site, group_under_scopes


class Device(enum.Enum):
    """What a device expression names (`device_of`, `move_device`)."""

    ACCEL = "accel"  # an accelerator
    HOST = "cpu"


class Place(enum.Enum):
    """Where a module or tensor lives."""

    DEVICE = "device"
    CPU = "cpu"
    TENSOR = "tensor"  # with the tensors it was made from (`x * 2`)
    UNKNOWN = "unknown"
    WRAPPED = "wrapped"  # a wrapper (Accelerate, Lightning, DeepSpeed) places it


ACCEL, HOST = Device.ACCEL, Device.HOST


DEVICE, CPU, TENSOR, UNKNOWN, WRAPPED = Place.DEVICE, Place.CPU, Place.TENSOR, Place.UNKNOWN, Place.WRAPPED


class EventKind(enum.Enum):
    """What an `Event` does to a module."""

    MOVE = "move"  # moved to a place
    ESCAPE = "escape"  # handed on, where it may be moved unseen


@dataclass(frozen=True)
class SplitMove:
    """`unmoved` stays on the CPU on the branch of the chain at `head` that moves
    only `moved` (`test`: that branch's condition; None for the final `else`)."""

    unmoved: str
    moved: str
    head: cst.If
    test: Optional[cst.BaseExpression]


@dataclass(frozen=True)
class Event:
    """Something that may change where a module lives: a move or an escape."""

    site: Site
    kind: EventKind
    place: Place  # for moves: DEVICE, CPU or UNKNOWN


def join(places: Iterable[Optional[Place]]) -> Optional[Place]:
    """Combine tensor places: any DEVICE operand puts the result on the device."""
    places = list(places)
    if not places or None in places:
        return None
    if DEVICE in places:
        return DEVICE
    if all(p == CPU for p in places):
        return CPU
    return TENSOR


class ModuleEvents:
    """Moves and escapes per dotted name. Calls a name is handed to become
    escapes (unless the call keeps its arguments) when that name is asked for:
    deciding it for every argument of every call would cost more than the rest
    of the analysis."""

    def __init__(
        self, events: Dict[str, List[Event]], handed_to: Dict[str, List[Call]], keeps: Callable[[Call, str], bool]
    ) -> None:
        self._events = events
        self._handed_to = handed_to
        self._keeps = keeps
        self._done: Dict[str, List[Event]] = {}
        self._by_scope: Dict[str, Dict[int, List[Event]]] = {}

    def within(self, name: str, scope: Scope) -> List[Event]:
        """The events of `name` in `scope` or in scopes nested in it."""
        by_scope = self._by_scope.get(name)
        if by_scope is None:
            by_scope = self._by_scope[name] = group_under_scopes(self.get(name, []))
        return by_scope.get(id(scope.node), [])

    def get(self, name: str, default: Optional[List[Event]] = None) -> List[Event]:
        done = self._done.get(name)
        if done is None:
            found = list(self._events.get(name, ()))
            for call in self._handed_to.get(name, ()):
                if not self._keeps(call, name):
                    found.append(Event(call.site, EventKind.ESCAPE, UNKNOWN))
            found.sort(key=lambda e: e.site.order)
            done = self._done[name] = found
        return done if done or default is None else default
