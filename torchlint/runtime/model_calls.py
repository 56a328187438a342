"""What a call of the user's model tells beyond the operations it runs.

- `batch_of_one`: the call trains on a batch of one (TL301): grad is on, the
  model is in training mode, and its first tensor input has two or more
  dimensions with a leading one of 1 (`model(x)` with `x` of shape `(1, 16)`);
- `device_at_hand`: the name of a variable of the user's frames that names
  the GPU (`device = torch.device("cuda")`, `device = "cuda:0"`): a model
  that never reaches the GPU while one is at hand was not moved (TL101), where
  with none the script never chose a device (TL100).

Both run with the torch function mode disabled (observers.py calls them).
"""

from __future__ import annotations

import re
from types import FrameType
from typing import Any, Iterable, Optional, Tuple

import torch

from torchlint.runtime.accelerator import tensors_in

_GPU_NAME = re.compile(r"^cuda(:\d+)?$")


def batch_of_one(module: torch.nn.Module, args: Any, kwargs: Any) -> Optional[Tuple[int, ...]]:
    """The input's shape when this call trains `module` on a batch of one, else None."""
    if not module.training or not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
        return None
    first = next(iter(tensors_in((args, kwargs), depth=3)), None)
    if first is None or first.dim() < 2 or first.shape[0] != 1:
        return None
    return tuple(first.shape)


def names_gpu(value: object) -> bool:
    """`value` is a device that names the GPU: a cuda `torch.device`, or "cuda" / "cuda:N"."""
    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, str) and _GPU_NAME.match(value) is not None


def device_at_hand(frames: Iterable[FrameType]) -> Optional[str]:
    """The first variable of these frames (a module's frame: its globals) whose value names the GPU."""
    for frame in frames:
        for name, value in list(frame.f_locals.items()):
            if names_gpu(value):
                return name
    return None
