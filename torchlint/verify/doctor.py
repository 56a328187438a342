"""`torchlint doctor`: can this environment use its GPU? Each problem comes
with the command that fixes it. torch is imported only when diagnosing."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import List

from torchlint.verify import probe as probe_mod

OK, WARN, FAIL, INFO = "ok", "warn", "FAIL", "info"
CUDA_WHEEL = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128"


@dataclass(frozen=True)
class Check:
    status: str
    what: str
    fix: str = ""


NO_GPU_FIX = (
    "torchlint verify measures on an NVIDIA GPU: run it on a machine that has one "
    "(a CUDA build of torch cannot help on this one)"
)


def diagnose() -> List[Check]:
    checks: List[Check] = []
    # First: is there a GPU at all? Advice about torch builds is moot without one.
    hw = probe_mod.nvidia_hardware()
    if hw.present is False:
        checks.append(Check(FAIL, hw.what, NO_GPU_FIX))
    elif hw.present and not hw.driver:
        checks.append(Check(FAIL, hw.what, "install the NVIDIA driver for this GPU, then check with: nvidia-smi"))
    elif hw.present:
        checks.append(Check(OK, f"NVIDIA GPU: {hw.what}"))
    else:
        checks.append(Check(WARN, hw.what, "check with: nvidia-smi"))
    no_gpu = hw.present is False
    p = probe_mod.probe_cuda()
    if p.problem == "no-torch":
        checks.append(
            Check(
                FAIL,
                p.reason,
                "pip install torch  (a CUDA build on a GPU machine; with nvidia-ml-py and matplotlib: the verify extra)",
            )
        )
    else:
        checks.append(Check(OK, f"torch {p.torch_version} installed"))
        if p.cuda_version is None:
            if no_gpu:
                checks.append(
                    Check(
                        INFO,
                        f"torch {p.torch_version} is a CPU-only build (torch.version.cuda is None): "
                        "right for this machine; on a machine with an NVIDIA GPU install a CUDA "
                        "build: " + CUDA_WHEEL,
                    )
                )
            else:
                checks.append(
                    Check(
                        FAIL,
                        f"torch {p.torch_version} is a CPU-only build (torch.version.cuda is None)",
                        CUDA_WHEEL + "  (choose the cuXXX index for your driver at "
                        "https://pytorch.org/get-started/locally/)",
                    )
                )
        else:
            checks.append(Check(OK, f"CUDA build: torch.version.cuda = {p.cuda_version}"))
            if p.available:
                checks.append(
                    Check(
                        OK,
                        f"{p.device_count} CUDA device(s): "
                        + ", ".join(f"[{i}] {name}" for i, name in enumerate(p.devices)),
                    )
                )
            elif not no_gpu:
                fix = "install the NVIDIA driver for your GPU, then check with: nvidia-smi"
                if "CUDA_VISIBLE_DEVICES" in p.reason:
                    fix = "unset CUDA_VISIBLE_DEVICES  (or export CUDA_VISIBLE_DEVICES=0)"
                elif shutil.which("nvidia-smi"):
                    fix = "nvidia-smi works: reinstall torch for a CUDA version your driver supports: " + CUDA_WHEEL
                checks.append(Check(FAIL, p.reason, fix))
    checks.append(_nvml(no_gpu))
    checks += _env()
    return checks


def _nvml(no_gpu: bool = False) -> Check:
    try:
        import pynvml
    except ImportError:
        if no_gpu:
            return Check(INFO, "NVML not readable: nvidia-ml-py is not installed (not needed without a GPU)")
        return Check(
            WARN, "NVML not readable: nvidia-ml-py is not installed (optional cross-check)", "pip install nvidia-ml-py"
        )
    try:
        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        if no_gpu:
            return Check(INFO, f"NVML not readable: {exc} (expected without a GPU)")
        return Check(WARN, f"NVML not readable: {exc}", "install the NVIDIA driver (NVML ships with it): nvidia-smi")
    if isinstance(driver, bytes):
        driver = driver.decode()
    return Check(OK, f"NVML readable: driver {driver}, {count} device(s)")


def _env() -> List[Check]:
    out: List[Check] = []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        out.append(Check(INFO, "CUDA_VISIBLE_DEVICES is not set (every device visible)"))
    elif visible.strip() in ("", "-1"):
        out.append(Check(FAIL, f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU", "unset CUDA_VISIBLE_DEVICES"))
    else:
        out.append(Check(INFO, f"CUDA_VISIBLE_DEVICES={visible}"))
    if probe_mod.launch_blocking():
        out.append(
            Check(
                WARN,
                f"CUDA_LAUNCH_BLOCKING={os.environ['CUDA_LAUNCH_BLOCKING']}: every kernel launch "
                "waits for the kernel to finish, so the CPU and GPU never overlap (debugging only)",
                "unset CUDA_LAUNCH_BLOCKING",
            )
        )
    else:
        out.append(Check(OK, "CUDA_LAUNCH_BLOCKING is not set"))
    return out


def usable(checks: List[Check]) -> bool:
    return not any(c.status == FAIL for c in checks)


def render(checks: List[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"{c.status:<5} {c.what}")
        if c.fix:
            lines.append(f"      fix: {c.fix}")
    return "\n".join(lines) + "\n"
