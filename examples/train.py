"""Train a small classifier on synthetic data.

A realistic training script with device-placement mistakes among correct
code; `torchlint check examples/train.py` reports:
  TL101  the distillation teacher is never moved to the device
  TL102  the dummy sanity-check batch is created on the CPU
  TL103  the training loop feeds CPU batches to the model
  TL105  `labels.to(device)` in evaluate() throws the moved copy away
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Classifier(nn.Module):
    def __init__(self, in_dim, hidden, classes):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(in_dim, hidden),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, classes),
        )

    def forward(self, x):
        return self.body(x)


def make_loader(n, in_dim, classes, batch_size, shuffle):
    features = torch.randn(n, in_dim)
    labels = torch.randint(0, classes, (n,))
    dataset = TensorDataset(features, labels)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=2, pin_memory=True)


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = torch.zeros((), device=device)
    for inputs, labels in loader:
        inputs = inputs.to(device, non_blocking=True)
        labels.to(device)
        preds = model(inputs).argmax(dim=1)
        correct += (preds == labels).sum()
    return correct / len(loader.dataset)


def train(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Classifier(args.in_dim, args.hidden, args.classes).to(device)
    teacher = Classifier(args.in_dim, args.hidden, args.classes)
    teacher.load_state_dict(model.state_dict())
    teacher.eval()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    train_loader = make_loader(args.samples, args.in_dim, args.classes, args.batch_size, shuffle=True)
    val_loader = make_loader(args.samples // 10, args.in_dim, args.classes, args.batch_size, shuffle=False)

    # Sanity check: one forward pass on a dummy batch.
    dummy = torch.zeros(2, args.in_dim)
    assert model(dummy).shape == (2, args.classes)

    step = 0
    for epoch in range(args.epochs):
        model.train()
        for inputs, labels in train_loader:
            optimizer.zero_grad(set_to_none=True)
            logits = model(inputs)
            with torch.no_grad():
                teacher_logits = teacher(inputs)
            loss = F.cross_entropy(logits, labels) + args.alpha * F.mse_loss(logits, teacher_logits)
            loss.backward()
            optimizer.step()
            if step % args.log_every == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
            step += 1
        accuracy = evaluate(model, val_loader, device)
        print(f"epoch {epoch} accuracy {accuracy.item():.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--in-dim", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--log-every", type=int, default=50)
    train(parser.parse_args())


if __name__ == "__main__":
    main()
