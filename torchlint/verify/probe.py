"""Is there a CUDA GPU to measure on? Checked in a fixed order, before any
other CUDA call: `import torch`; `torch.cuda.is_available()`; when it is
False, whether the machine has an NVIDIA GPU at all (driver, nvidia-smi,
NVML, PCI bus), then a CPU-only build (`torch.version.cuda is None`) or a
missing driver/device. Only then are devices counted and named."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

NVIDIA_PCI_VENDOR = "0x10de"
PCI_DISPLAY_CLASSES = ("0x0300", "0x0302", "0x0380")  # VGA, 3D controller (H100, A100 ...), other display


@dataclass(frozen=True)
class CudaProbe:
    available: bool
    reason: str = ""  # why not, one line (empty when available)
    problem: str = ""  # "no-torch" | "no-gpu" | "cpu-only-build" | "no-driver" | ""
    torch_version: Optional[str] = None
    cuda_version: Optional[str] = None  # torch.version.cuda (None on a CPU-only build)
    device_count: int = 0
    devices: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def short_version(version: str) -> str:
    """'2.13.0+cpu' -> '2.13.0'."""
    return version.split("+", 1)[0]


@dataclass(frozen=True)
class Hardware:
    """Is there an NVIDIA GPU on this machine, independent of torch?

    present: True (the driver sees GPUs), False (nothing found), None (cannot
    tell: not Linux and no nvidia-smi). driver: whether a driver answered."""

    present: Optional[bool]
    driver: bool
    what: str  # one line: what was found, or what was checked


def nvidia_hardware(
    proc: Path = Path("/proc/driver/nvidia"),
    pci: Path = Path("/sys/bus/pci/devices"),
    smi: Optional[str] = "auto",
    nvml_count: Optional[int] = -1,
) -> Hardware:
    """Checks, in order: the Linux driver's /proc/driver/nvidia/gpus, `nvidia-smi -L`,
    NVML's device count, then the PCI bus (an NVIDIA display/3D controller without a
    driver). The arguments exist for tests; nvml_count=-1 asks NVML itself."""
    gpus = proc / "gpus"
    if gpus.is_dir() and any(gpus.iterdir()):
        return Hardware(True, True, f"{sum(1 for _ in gpus.iterdir())} NVIDIA GPU(s) ({gpus})")
    if smi == "auto":
        smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            names = [ln.strip() for ln in out.stdout.splitlines() if ln.strip().startswith("GPU ")]
            if out.returncode == 0 and names:
                return Hardware(True, True, "; ".join(names))
        except (OSError, subprocess.SubprocessError):
            pass
    if nvml_count == -1:
        nvml_count = _nvml_count()
    if nvml_count:
        return Hardware(True, True, f"{nvml_count} NVIDIA GPU(s) (NVML)")
    on_pci = _pci_nvidia(pci)
    if on_pci:
        return Hardware(
            True,
            False,
            f"an NVIDIA GPU on the PCI bus ({on_pci[0]}) but no NVIDIA driver answers "
            "(no /proc/driver/nvidia, nvidia-smi, NVML)",
        )
    checked = [str(proc)] + (["nvidia-smi"] if smi else ["nvidia-smi (not installed)"]) + ["NVML"]
    if pci.is_dir():
        checked.append("the PCI bus")
        return Hardware(False, False, "no NVIDIA GPU on this machine (checked " + ", ".join(checked) + ")")
    return Hardware(None, False, "no NVIDIA GPU found (checked " + ", ".join(checked) + ")")


def _nvml_count() -> Optional[int]:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no library, no driver: nothing found
        return None


def _pci_nvidia(pci: Path) -> List[str]:
    found = []
    try:
        devices = sorted(pci.iterdir()) if pci.is_dir() else []
    except OSError:
        return []
    for dev in devices:
        try:
            vendor = (dev / "vendor").read_text().strip().lower()
            klass = (dev / "class").read_text().strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_PCI_VENDOR and klass[:6] in PCI_DISPLAY_CLASSES:
            found.append(dev.name)
    return found


def probe_cuda() -> CudaProbe:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the test env
        return CudaProbe(False, f"torch is not installed ({exc})", "no-torch")
    version = short_version(str(torch.__version__))
    cuda = getattr(torch.version, "cuda", None)
    available = bool(torch.cuda.is_available())
    if not available:
        hw = nvidia_hardware()
        if hw.present is False:
            return CudaProbe(
                False,
                f"{hw.what}; torch {version} is " + ("a CPU-only build" if cuda is None else f"built for CUDA {cuda}"),
                "no-gpu",
                version,
                cuda,
            )
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
