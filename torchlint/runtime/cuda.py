"""The real CUDA device of `torchlint run --device cuda`: the one part of the runtime that
needs a GPU (timing.Device for `torch.cuda`, and NVML). Everything else of a real-GPU run
(real.py, watch.py, hooks.py, timing.py) is exercised on the CPU with a device of the
tests' own."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Tuple

NO_NVML = "GPU utilization not sampled: pynvml is not installed (`pip install nvidia-ml-py`)"


class DeviceUnavailable(Exception):
    """`--device cuda` on a machine where torch sees no CUDA device."""


def unavailable() -> Optional[str]:
    """Why torch cannot use a CUDA device here, or None when it can."""
    import torch

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    try:
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            return None
    except Exception as exc:  # noqa: BLE001 - a broken driver is "no device", said as it is
        return f"torch.cuda failed: {type(exc).__name__}: {exc}"
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no GPU (no driver, or none visible)"


class CudaDevice:
    """The current CUDA device, as timing.Device."""

    type = "cuda"

    def __init__(self) -> None:
        import torch

        self._cuda: Any = torch.cuda
        self.index = torch.cuda.current_device()
        self.name = torch.cuda.get_device_name(self.index)

    def now(self) -> float:
        return time.perf_counter()

    def drain(self) -> None:
        self._cuda.synchronize()

    def event(self) -> Any:
        return self._cuda.Event(enable_timing=True)

    def used(self) -> bool:
        return bool(self._cuda.max_memory_allocated(self.index))

    def utilization(self) -> Tuple[Optional[Callable[[], float]], str]:
        try:
            import pynvml
        except ImportError:
            return None, NO_NVML
        try:
            pynvml.nvmlInit()
            try:  # NVML counts every GPU; CUDA_VISIBLE_DEVICES renumbers them: match by UUID
                uuid = str(self._cuda.get_device_properties(self.index).uuid)
                handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else "GPU-" + uuid)
            except Exception:  # noqa: BLE001 - older drivers or torch: by index
                handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception as exc:  # noqa: BLE001
            return None, f"GPU utilization not sampled: NVML failed ({type(exc).__name__}: {exc})"

        def read() -> float:
            return float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)

        return read, ""


def device() -> CudaDevice:
    """The CUDA device to run on; DeviceUnavailable (with why) when there is none."""
    why = unavailable()
    if why is not None:
        raise DeviceUnavailable(why)
    return CudaDevice()
