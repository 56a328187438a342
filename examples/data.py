"""Data loading for the example project: a synthetic image dataset with
CPU-side augmentation, the train/validation DataLoaders, and the CLI options."""
import argparse

import torch
from torch.utils.data import DataLoader, Dataset


class SyntheticImages(Dataset):
    """Seeded random 3x64x64 images with 10 classes, flipped and jittered."""

    def __init__(self, length: int, train: bool = True):
        self.length = length
        self.train = train

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        g = torch.Generator().manual_seed(idx)
        image = torch.rand(3, 64, 64, generator=g)
        if self.train and idx % 2:
            image = image.flip(-1)
        image = (image - 0.5) / 0.25
        return image, idx % 10


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Train and evaluate the example classifier")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    return parser.parse_args(argv)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_loaders(batch_size: int):
    train_set = SyntheticImages(50_000, train=True)
    val_set = SyntheticImages(5_000, train=False)
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256, num_workers=4, pin_memory=True)
    return train_loader, val_loader
