"""Test-only fixture (not a rule): bad.py without its sleep."""

import torch

from torchlint.verify.harness import Harness

h = Harness(__file__)
device = h.device
x = torch.ones(h.scale(64, 8), device=device)


def train(steps):
    global x
    for step in range(steps):
        x = x * 1.0
        h.count(x.shape[0])


for steps in h.steps():
    train(steps)
h.emit()
