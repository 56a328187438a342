"""One run on a real device (`--device cuda`), put together: the recorder on the device's
clock, the wrapped calls (hooks.py), the watching mode (watch.py), the utilization
sampler, and at the end the run's timings (timing.py). session.py runs it as it runs the
simulated device; the device is `cuda.CudaDevice`, or a test's own (timing.Device)."""

from __future__ import annotations

from typing import Optional, Sequence

from torchlint.runtime.accelerator import Patches
from torchlint.runtime.observations import Clock, Observation, RunTimings
from torchlint.runtime.sites import UserFiles
from torchlint.runtime.steps import Steps
from torchlint.runtime.timing import Device, Sampler, Timer, summarize


class RealRun:
    def __init__(self, files: UserFiles, steps: Steps, device: Device) -> None:
        from torchlint.runtime.hooks import module_on_device_of
        from torchlint.runtime.observers import Recorder
        from torchlint.runtime.watch import Watcher, on_device_of

        self.device = device
        self.timer = Timer(device)
        self.recorder = Recorder(
            files,
            steps,
            model_on_device=module_on_device_of(device.type),
            now=device.now,
            on_step=self.timer.tick,
            used=device.used,
        )
        self.mode = Watcher(self.recorder, self.timer, on_device_of(device.type))
        read, self.note = device.utilization()
        self.sampler: Optional[Sampler] = Sampler(read) if read is not None else None

    def install(self) -> Patches:
        from torchlint.runtime.hooks import install

        return install(self.recorder, self.timer, self.device.type)

    def start(self) -> None:
        if self.sampler is not None:
            self.sampler.start()

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def timings(self, clock: Clock, observations: Sequence[Observation]) -> RunTimings:
        return summarize(
            self.device, self.timer, clock, observations, self.recorder.loader_totals(), self.sampler, self.note
        )
