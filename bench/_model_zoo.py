"""A generated model-zoo file of a given length (for benchmarks): many
`nn.Module` classes (blocks, networks built from them) and the builder
functions a zoo exports (`resnet_3(pretrained=False, **kwargs)`), as
torchvision's and timm's model files are laid out; no training, no device."""

from __future__ import annotations

from typing import List

HEADER = '''"""A family of residual networks of several widths and depths."""
from functools import partial
from typing import Any, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__: List[str] = []

'''

BLOCK = """
class Block{i}(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class Net{i}(nn.Module):
    def __init__(self, layers: List[int], num_classes: int = 1000, width: int = {width}) -> None:
        super().__init__()
        self.inplanes = width
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
        )
        self.stages = nn.ModuleList([self._make_stage(width * 2**k, n, stride=1 if k == 0 else 2) for k, n in enumerate(layers)])
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(self.inplanes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_stage(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))
        layers = [Block{i}(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        for _ in range(1, blocks):
            layers.append(Block{i}(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for stage in self.stages:
            x = stage(x)
        x = torch.flatten(self.pool(x), 1)
        return self.fc(F.dropout(x, p=0.2, training=self.training))


def _net{i}(layers: List[int], pretrained: bool, progress: bool, **kwargs: Any) -> Net{i}:
    model = Net{i}(layers, **kwargs)
    if pretrained:
        state_dict = torch.hub.load_state_dict_from_url("https://example.invalid/net{i}.pth", progress=progress)
        model.load_state_dict(state_dict)
    return model


def net{i}_small(pretrained: bool = False, progress: bool = True, **kwargs: Any) -> Net{i}:
    return _net{i}([2, 2, 2, 2], pretrained, progress, **kwargs)


def net{i}_large(pretrained: bool = False, progress: bool = True, **kwargs: Any) -> Net{i}:
    return _net{i}([3, 4, 6, 3], pretrained, progress, **kwargs)


__all__ += ["Net{i}", "net{i}_small", "net{i}_large"]
"""


def generate(lines: int = 2000) -> str:
    """A model-zoo file of about `lines` lines (at least that many)."""
    parts: List[str] = [HEADER]
    i = 0
    count = HEADER.count("\n")
    while count < lines:
        block = BLOCK.format(i=i, width=32 + 16 * (i % 4))
        parts.append(block)
        count += block.count("\n")
        i += 1
    return "".join(parts)


if __name__ == "__main__":
    print(generate(), end="")
