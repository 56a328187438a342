"""GPU-side data augmentation for the image classifier: random noise, random
erasing and mixup applied to a batch that already lives on the device."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def add_gaussian_noise(images: torch.Tensor, std: float = 0.05) -> torch.Tensor:
    """Add per-pixel Gaussian noise; `images` is on the training device."""
    device = images.device
    # The noise is drawn on the CPU and copied to the GPU on every batch.
    noise = torch.randn(images.shape).to(device)
    return images + std * noise


def random_erase(images: torch.Tensor, max_fraction: float = 0.25) -> torch.Tensor:
    """Zero a random rectangle in each image (Cutout)."""
    n, _, h, w = images.shape
    eh = torch.randint(1, int(h * max_fraction) + 1, (n,), device=images.device)
    ew = torch.randint(1, int(w * max_fraction) + 1, (n,), device=images.device)
    top = (torch.rand(n, device=images.device) * (h - eh)).long()
    left = (torch.rand(n, device=images.device) * (w - ew)).long()
    rows = torch.arange(h, device=images.device).view(1, h, 1)
    cols = torch.arange(w, device=images.device).view(1, 1, w)
    mask = (
        (rows >= top.view(n, 1, 1)) & (rows < (top + eh).view(n, 1, 1))
        & (cols >= left.view(n, 1, 1)) & (cols < (left + ew).view(n, 1, 1))
    )
    return images.masked_fill(mask.unsqueeze(1), 0.0)


def mixup(images: torch.Tensor, targets: torch.Tensor, num_classes: int, alpha: float = 0.2):
    """Blend random pairs of images and their one-hot targets."""
    lam = torch.distributions.Beta(alpha, alpha).sample().item()
    perm = torch.randperm(images.size(0), device=images.device)
    soft = F.one_hot(targets, num_classes).float()
    mixed_images = lam * images + (1.0 - lam) * images[perm]
    mixed_targets = lam * soft + (1.0 - lam) * soft[perm]
    return mixed_images, mixed_targets


def augment(images: torch.Tensor, targets: torch.Tensor, num_classes: int):
    """The training-time augmentation pipeline."""
    images = add_gaussian_noise(images)
    images = random_erase(images)
    return mixup(images, targets, num_classes)
