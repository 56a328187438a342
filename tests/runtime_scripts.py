"""Helpers of the runtime tests: write a small script, run it in this process
on the simulated GPU, and read what was observed."""

import textwrap
from pathlib import Path
from typing import List, Optional, Tuple

from torchlint import runtime
from torchlint.runtime.observations import Observation, RunReport

HEADER = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Items(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        return torch.full((10,), float(i % 5)), i % 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 3)

    def forward(self, x):
        return self.fc(x)
"""
HEADER_LINES = HEADER.count("\n")


def script(tmp_path: Path, body: str, name: str = "train.py", header: bool = True) -> Path:
    text = (HEADER if header else "") + textwrap.dedent(body)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(path: Path, needle: str, nth: int = 0) -> int:
    """The 1-based line of the nth line of `path` containing `needle`."""
    rows = [i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text]
    return rows[nth]


def run(path: Path, argv: Optional[List[str]] = None, **options) -> RunReport:
    return runtime.run_script(str(path), argv or [], **options)


def reported(report: RunReport) -> List[Tuple[str, int, int]]:
    """(code, line, count) of each reported observation."""
    return [(o.code, o.site.line, o.count) for o in report.findings]


def only(report: RunReport, code: str) -> Observation:
    found = [o for o in report.findings if o.code == code]
    assert len(found) == 1, (code, reported(report))
    return found[0]
