"""Data loading for the example project: an image-folder dataset with
CPU-side decoding and augmentation, the train/validation DataLoaders, the
device feed, and the CLI options."""
import argparse
from pathlib import Path

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms.functional import to_tensor


class FolderImages(Dataset):
    """Images under `root/<class>/*.jpg`, decoded and flipped on the CPU."""

    def __init__(self, root: str, train: bool = True):
        self.paths = sorted(Path(root).glob("*/*.jpg"))
        self.classes = sorted({p.parent.name for p in self.paths})
        self.train = train

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        path = self.paths[idx]
        image = to_tensor(Image.open(path).convert("RGB"))
        if self.train and idx % 2:
            image = image.flip(-1)
        return (image - 0.5) / 0.25, self.classes.index(path.parent.name)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Train and evaluate the example classifier")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    return parser.parse_args(argv)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_loaders(root: str, batch_size: int):
    train_set = FolderImages(f"{root}/train", train=True)
    val_set = FolderImages(f"{root}/val", train=False)
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256, num_workers=4, pin_memory=True)
    return train_loader, val_loader


def on_device(loader, device):
    """The loader's batches, copied to `device` (asynchronously where the memory is pinned)."""
    for images, labels in loader:
        yield images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
