"""A generated, realistic PyTorch training script of a given length (for benchmarks)."""

from __future__ import annotations

from typing import List

HEADER = '''"""Train and evaluate a family of small vision and sequence models."""
import argparse
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import profiler
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass
class Config:
    epochs: int = 10
    batch_size: int = 64
    lr: float = 3e-4
    hidden: int = 256
    seed: int = 0

'''

BLOCK = '''
class Dataset{i}(Dataset):
    """Synthetic data set number {i}."""

    def __init__(self, n: int = 1024, dim: int = {dim}) -> None:
        self.x = np.random.randn(n, dim).astype("float32")
        self.y = np.random.randint(0, 10, size=n)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, idx):
        return torch.from_numpy(self.x[idx]), int(self.y[idx])


class Model{i}(nn.Module):
    def __init__(self, dim: int = {dim}, hidden: int = 256, classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, classes),
        )
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        h = self.net(x) * self.scale
        return F.log_softmax(h, dim=-1)


def train_{i}(cfg: Config) -> float:
    torch.manual_seed(cfg.seed + {i})
    model = Model{i}(hidden=cfg.hidden).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    loader = DataLoader(Dataset{i}(), batch_size=cfg.batch_size, shuffle=True)
    noise = torch.randn(cfg.batch_size, {dim}).to(device)
    best = math.inf
    for epoch in range(cfg.epochs):
        model.train()
        total = 0.0
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            out = model(x + 0.01 * noise[: x.shape[0]])
            loss = F.nll_loss(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach()
        avg = float(total) / max(1, len(loader))
        best = min(best, avg)
        print(f"[{i}] epoch {{epoch}}: loss {{avg:.4f}}")
    return best


def evaluate_{i}(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    correct = 0
    seen = 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            pred = model(x).argmax(dim=-1)
            correct += (pred == y).sum()
            seen += y.numel()
    return float(correct) / max(1, seen)


def profile_{i}(model: nn.Module) -> None:
    batch = torch.zeros(8, {dim}).cuda()
    with profiler.profile(use_cuda=True) as prof:
        model(batch)
    print(prof.key_averages().table(sort_by="cuda_time_total"))
'''

FOOTER = """

def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    cfg = Config(epochs=args.epochs)
    start = time.time()
    results = [fn(cfg) for fn in TRAINERS]
    print(f"done in {time.time() - start:.1f}s: {results}")


if __name__ == "__main__":
    main()
"""


def generate(lines: int = 2000) -> str:
    """A training script of about `lines` lines (at least that many)."""
    parts: List[str] = [HEADER]
    i = 0
    count = HEADER.count("\n") + FOOTER.count("\n") + 2
    while count < lines:
        block = BLOCK.format(i=i, dim=16 + 8 * (i % 5))
        parts.append(block)
        count += block.count("\n")
        i += 1
    parts.append("\n\nTRAINERS = [" + ", ".join(f"train_{k}" for k in range(i)) + "]\n")
    parts.append(FOOTER)
    return "".join(parts)


if __name__ == "__main__":
    print(generate(), end="")
