"""Is there a CUDA GPU to measure on? Checked in a fixed order, before any
other CUDA call: `import torch`; `torch.cuda.is_available()`; when it is
False, a CPU-only build (`torch.version.cuda is None`) or a missing
driver/device. Only then are devices counted and named."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class CudaProbe:
    available: bool
    reason: str = ""                     # why not, one line (empty when available)
    problem: str = ""                    # "no-torch" | "cpu-only-build" | "no-driver" | ""
    torch_version: Optional[str] = None
    cuda_version: Optional[str] = None   # torch.version.cuda (None on a CPU-only build)
    device_count: int = 0
    devices: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def short_version(version: str) -> str:
    """'2.13.0+cpu' -> '2.13.0'."""
    return version.split("+", 1)[0]


def probe_cuda() -> CudaProbe:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the test env
        return CudaProbe(False, f"torch is not installed ({exc})", "no-torch")
    version = short_version(str(torch.__version__))
    cuda = getattr(torch.version, "cuda", None)
    available = bool(torch.cuda.is_available())
    if not available:
        if cuda is None:
            return CudaProbe(False, f"torch {version} is a CPU-only build", "cpu-only-build", version, None)
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        if hidden is not None and hidden.strip() in ("", "-1"):
            why = f"CUDA_VISIBLE_DEVICES={hidden!r} hides every device"
        else:
            why = "no NVIDIA driver or CUDA device is visible"
        return CudaProbe(False, f"torch {version} is built for CUDA {cuda} but {why}", "no-driver", version, cuda)
    count = int(torch.cuda.device_count())
    names = [str(torch.cuda.get_device_name(i)) for i in range(count)]
    return CudaProbe(True, "", "", version, cuda, count, names)


def launch_blocking() -> bool:
    """CUDA_LAUNCH_BLOCKING set to anything but empty/0: kernels run synchronously
    and every timing and busy fraction would be meaningless."""
    return os.environ.get("CUDA_LAUNCH_BLOCKING", "").strip() not in ("", "0")
