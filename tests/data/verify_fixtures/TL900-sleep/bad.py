"""Test-only fixture (not a rule): the bad script sleeps in its loop, so its
wall time is far longer. Exercises the real harness end to end on the CPU."""
import time

import torch

from torchlint.verify.harness import Harness

h = Harness(__file__, full_iters=10)
device = h.device
x = torch.ones(h.scale(64, 8), device=device)
for _ in range(h.warmup):
    x = x * 1.0
with h.window():
    for _ in range(h.iters):
        x = x * 1.0
        time.sleep(0.05)
        h.count(x.shape[0])
h.emit()
