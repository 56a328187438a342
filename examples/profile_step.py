"""Profile a few training steps of the classifier and print where time goes.

    python examples/profile_step.py --steps 10
"""
from __future__ import annotations

import argparse

import torch
from torch import nn


def build_model(num_classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, num_classes),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    images = torch.randn(args.batch_size, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (args.batch_size,), device=device)

    # The legacy autograd profiler: CPU-side only unless told otherwise, and
    # blind to what the GPU's streams are doing.
    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        for _ in range(args.steps):
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()

    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    prof.export_chrome_trace("profile_step.json")


if __name__ == "__main__":
    main()
