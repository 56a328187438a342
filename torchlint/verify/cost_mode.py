"""Cost mode, inside a fixture's process: the GPU becomes PyTorch's ``meta``
device, and the harness's steps are timed and counted (operations, FLOPs,
syncs) instead of measured on a GPU. :mod:`torchlint.verify.costs` is the
command that runs every fixture this way and writes ``cost.json``."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, Iterator, List

COST_FILE = "cost.json"
MEASURE_S = 2.0  # time at least two steps, more until this long ...
MEASURE_STEPS = 3  # ... and at most this many
COUNTED_STEPS = 2  # one call of this many steps under the counting mode (a per-call sync counts once)


# ---------------------------------------------------------------------------
# In the fixture's process (the harness calls these in cost mode)


def enter_cost_mode(torch: Any) -> Any:
    """Patch the fixture's process so the GPU is the meta device; returns it.
    Runs before the script (``python -m torchlint.verify.costs --run SCRIPT``:
    a script may choose its device before it creates its Harness)."""
    if getattr(torch, "_torchlint_cost_meta", None) is not None:
        return torch._torchlint_cost_meta
    meta = torch.device("meta")
    torch._torchlint_cost_meta = meta
    # A script's first optimizer imports torch._dynamo (seconds): import it now, so that the
    # set-up measured is the script's own; plan.py adds the import for scripts that create one.
    t0 = time.perf_counter()
    import torch._dynamo  # noqa: F401

    counts: Dict[str, Any] = {"syncs": 0, "optimizer": False, "dynamo_import_s": time.perf_counter() - t0}
    optimizer_init = torch.optim.Optimizer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        counts["optimizer"] = True
        optimizer_init(self, *args, **kwargs)

    torch.optim.Optimizer.__init__ = init
    # One thread: immune to the other load on a shared machine; plan.py scales
    # the CPU's matmul/convolution FLOPs to the GPU machine's cores separately.
    torch.set_num_threads(1)
    real_device = torch.device
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""

    class _DeviceType(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, real_device)

    class device(metaclass=_DeviceType):  # noqa: N801 - stands in for torch.device
        """torch.device, except that the fixture script's own device choice
        (`torch.device("cuda" if torch.cuda.is_available() else "cpu")`) is meta."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_code.co_filename
            if script and os.path.abspath(caller) == script:
                return meta
            return real_device(*args, **kwargs)

    torch.device = device

    def _host_value(name: str, default: Any) -> Any:
        original = getattr(torch.Tensor, name)

        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.device.type == "meta":
                counts["syncs"] += 1
                return default
            return original(self, *args, **kwargs)

        setattr(torch.Tensor, name, patched)

    for name, default in (("item", 0.0), ("__float__", 0.0), ("__int__", 0), ("__bool__", True), ("tolist", [])):
        _host_value(name, default)
    torch._torchlint_cost_counts = counts
    return meta


def steps(h: Any) -> Iterator[int]:
    """The harness's steps() in cost mode: one warm-up step, then single steps:
    timed ones, and one under the counting dispatch mode."""
    torch = h.torch
    cost: Dict[str, Any] = {"setup_s": time.perf_counter() - h._t_init}
    h.metrics["cost"] = cost
    yield 1
    times: List[float] = []
    h.samples = 0
    while len(times) < 2 or (len(times) < MEASURE_STEPS and sum(times) < MEASURE_S):
        t0 = time.perf_counter()
        yield 1
        times.append(time.perf_counter() - t0)
    cost["samples_per_step"] = h.samples / len(times)
    counts = torch._torchlint_cost_counts
    counts["syncs"] = 0
    counter = _counter(torch)
    t0 = time.perf_counter()
    with counter:
        yield COUNTED_STEPS
    cost["counted_step_s"] = (time.perf_counter() - t0) / COUNTED_STEPS
    # The fastest step seen (the counted one included: counting only adds time):
    # this (shared) machine's other load only ever adds time.
    cost["step_s"] = min(times + [cost["counted_step_s"]])
    cost.update({k: v / COUNTED_STEPS for k, v in counter.result().items()})
    cost["host_s"] = max(0.0, cost["step_s"] - cost.pop("meta_s"))
    cost["syncs_per_step"] = counts["syncs"] / COUNTED_STEPS
    cost["threads"] = torch.get_num_threads()
    cost["cpu_flops_per_s"] = cpu_matmul_rate(torch)
    cost["optimizer"] = counts["optimizer"]
    cost["dynamo_import_s"] = counts["dynamo_import_s"]
    # What the script does after its last step (until h.emit()) is timed by finish(); a
    # profiler still running then has recorded every step, and its teardown grows with them.
    cost["profiled"] = bool(torch._C._autograd._profiler_enabled())
    cost["steps_run"] = 1 + len(times) + COUNTED_STEPS
    h._cost_steps_end = time.perf_counter()


def finish(h: Any) -> None:
    """At h.emit() in cost mode: the time from the last step to here (a profiler's
    teardown, a summary table, ...)."""
    end = getattr(h, "_cost_steps_end", None)
    if end is not None:
        h.metrics["cost"]["tail_s"] = time.perf_counter() - end


def cpu_matmul_rate(torch: Any, seconds: float = 0.5) -> float:
    """FP32 matmul FLOP/s of this process's CPU threads (the best of a few 1024^3 products)."""
    a = torch.randn(1024, 1024)
    b = torch.randn(1024, 1024)
    a @ b
    best, spent = float("inf"), 0.0
    while spent < seconds:
        t0 = time.perf_counter()
        a @ b
        dt = time.perf_counter() - t0
        best, spent = min(best, dt), spent + dt
    return 2 * 1024**3 / best


def _counter(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    registry = FlopCounterMode(display=False).flop_registry

    class Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.n = {"device": 0, "host": 0}
            self.flops = {"device": 0, "host": 0, "device_conv": 0}
            self.meta_s = 0.0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            on_meta = any(
                getattr(a, "device", None) is not None and a.device.type == "meta" for a in _flat(args, kwargs)
            )
            t0 = time.perf_counter()
            out = func(*args, **kwargs)
            if on_meta:
                self.meta_s += time.perf_counter() - t0
            where = "device" if on_meta else "host"
            self.n[where] += 1
            packet = getattr(func, "_overloadpacket", None)
            if packet in registry:
                try:
                    flops = int(registry[packet](*args, **kwargs, out_val=out))
                except Exception:  # noqa: BLE001 - an estimate: an uncountable op counts as 0 FLOPs
                    flops = 0
                self.flops[where] += flops
                if on_meta and "convolution" in str(packet):  # cuDNN: TF32 by default, unlike matmuls
                    self.flops["device_conv"] += flops
            return out

        def result(self) -> Dict[str, Any]:
            return {
                "device_ops": self.n["device"],
                "host_ops": self.n["host"],
                "device_flops": self.flops["device"],
                "device_conv_flops": self.flops["device_conv"],
                "host_flops": self.flops["host"],
                "meta_s": self.meta_s,
            }

    return Counter()


def _flat(args: Any, kwargs: Dict[str, Any]) -> Any:
    stack = list(args) + list(kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        else:
            yield a
