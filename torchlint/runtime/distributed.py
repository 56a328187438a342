"""`torch.distributed` on the simulated GPU: a process group asked for NCCL
(the GPU's backend, absent from a CPU build of torch) is made with Gloo,
which runs the same collectives on the CPU tensors that hold the simulated
GPU's values. So a script written for one process per GPU
(`init_process_group("nccl")`, `DistributedDataParallel(model,
device_ids=[rank])`) runs as a world of its own size on the CPU.

Only the backend is changed: ranks, the world size and the rendezvous
(`MASTER_ADDR`, `MASTER_PORT`, `torchrun`'s variables) are the script's.
"""

from __future__ import annotations

from typing import Any

from torch import distributed


def gloo_backend(backend: Any) -> Any:
    """The backend to use for `backend`: NCCL (alone, or as the CUDA half of
    "cpu:gloo,cuda:nccl") becomes Gloo; anything else is left as it is."""
    if not isinstance(backend, str):
        return backend
    name = backend.strip().lower()
    if name == "nccl":
        return "gloo"
    if ":" in name:  # "cpu:gloo,cuda:nccl"
        parts = [p.split(":", 1) for p in name.split(",") if ":" in p]
        if any(b.strip() == "nccl" for _, b in parts):
            return "gloo"
    return backend


def patch(p: Any) -> None:
    """Patch `init_process_group` (and `new_group`) in `torch.distributed` through `p` (accelerator.Patches)."""
    if not distributed.is_available():
        return
    for name in ("init_process_group", "new_group"):
        original = getattr(distributed, name, None)
        if original is None:
            continue
        p.set(distributed, name, _with_gloo(original))


def _with_gloo(original: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        if "backend" in kwargs:
            kwargs["backend"] = gloo_backend(kwargs["backend"])
        elif args and original.__name__ == "init_process_group":
            args = (gloo_backend(args[0]),) + tuple(args[1:])
        elif original.__name__ == "init_process_group":
            kwargs["backend"] = "gloo"  # no backend: torch would choose NCCL for a CUDA device
        return original(*args, **kwargs)

    call.__name__ = original.__name__
    call.__doc__ = original.__doc__
    return call
