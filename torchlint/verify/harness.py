"""The tiny API fixture scripts use (imported by fixtures, never by the linter).

A fixture script::

    from torchlint.verify.harness import Harness

    h = Harness(__file__)            # parses --smoke / TORCHLINT_SMOKE=1
    device = h.device                # cuda if available (never in smoke mode), else cpu
    model = ...                      # small model, synthetic seeded data
    for _ in range(h.warmup): step() # warm-up outside the window
    with h.window():                 # synchronize, mark, time
        for _ in range(h.iters):
            step()
            h.count(batch_size)      # samples processed
    h.emit()                         # prints one JSON line for the runner

The runner chooses what a run measures through TORCHLINT_VERIFY_PASS
(`timing`, `profile`, `sync`); the script does not change.
"""
from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

MARK = "TORCHLINT_METRICS "
WINDOW_LABEL = "torchlint.window"


class Harness:
    def __init__(self, script: str = "", argv: Optional[list] = None, full_iters: int = 50,
                 smoke_iters: int = 2, warmup: int = 5) -> None:
        import torch

        self.torch = torch
        argv = sys.argv[1:] if argv is None else argv
        self.smoke = "--smoke" in argv or os.environ.get("TORCHLINT_SMOKE") == "1"
        self.pass_name = os.environ.get("TORCHLINT_VERIFY_PASS", "timing")
        use_cuda = torch.cuda.is_available() and not self.smoke
        self.device = torch.device("cuda" if use_cuda else "cpu")
        self.cuda = use_cuda
        self.iters = smoke_iters if self.smoke else full_iters
        self.warmup = 1 if self.smoke else warmup
        self.script = script
        self.samples = 0
        self.metrics: Dict[str, Any] = {}
        torch.manual_seed(0)

    def scale(self, full: int, smoke: int) -> int:
        """A size: `full` on the GPU, `smoke` in smoke mode."""
        return smoke if self.smoke else full

    def count(self, samples: int) -> None:
        self.samples += int(samples)

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    @contextmanager
    def window(self) -> Iterator[None]:
        """The measured region: synchronized at both ends, marked for the profiler."""
        from torchlint.verify import passes

        torch = self.torch
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self.samples = 0
        with passes.instrument(self):
            self.sync()
            start_unix = time.time()
            start = time.perf_counter()
            with torch.profiler.record_function(WINDOW_LABEL):
                with passes.inner(self):
                    yield
                self.sync()
            wall = time.perf_counter() - start
            end_unix = time.time()
        self.metrics["wall_s"] = wall
        self.metrics["samples"] = self.samples
        self.metrics["samples_per_s"] = self.samples / wall if wall > 0 else 0.0
        # Wall-clock stamps let the runner match its NVML samples to the window.
        self.metrics["window_start_unix"] = start_unix
        self.metrics["window_end_unix"] = end_unix
        if self.cuda:
            self.metrics["peak_mem_bytes"] = int(torch.cuda.max_memory_allocated())

    def emit(self, **extra: Any) -> None:
        out = dict(self.metrics)
        out.update(extra)
        out["device"] = str(self.device)
        out["smoke"] = self.smoke
        out["pass"] = self.pass_name
        sys.stdout.write(MARK + json.dumps(out, sort_keys=True) + "\n")
        sys.stdout.flush()
