"""Test-only fixture (not a rule): the bad script sleeps in its loop, so it
processes far fewer samples per second. Exercises the real harness end to
end on the CPU."""
import time

import torch

from torchlint.verify.harness import Harness

h = Harness(__file__)
device = h.device
x = torch.ones(h.scale(64, 8), device=device)


def train(steps):
    global x
    for step in range(steps):
        x = x * 1.0
        time.sleep(0.02)
        h.count(x.shape[0])


for steps in h.steps():
    train(steps)
h.emit()
