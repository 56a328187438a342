#!/usr/bin/env python3
"""Is a file's cost linear in its size? Three generated shapes, each at a
small and a large size, linted in-process with every rule (preview included)
beside a bare LibCST parse of the same text:

- a training module (`bench/_training_script.py`): datasets, models,
  training and evaluation loops, moves, loaders;
- a model-zoo file (`bench/_model_zoo.py`): many `nn.Module` classes and the
  builder functions a zoo exports;
- N functions that each loop over the same module-level `loader` (the shape
  that once made TL302's loop lookup cubic).

For each it prints the parse and the lint (CPU seconds, best of `--repeat`)
and the cost over the parse per line (per loop for the third), and the ratio
of the large size's per-line cost to the small one's: 1.0 is linear.

    python bench/scaling.py                       # 2,000 and 16,000 lines; 100 and 800 loops
    python bench/scaling.py --small 1000 --large 8000 --repeat 2
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Callable, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import libcst  # noqa: E402

from bench import _model_zoo, _training_script  # noqa: E402
from torchlint.api import check  # noqa: E402
from torchlint.config import Settings  # noqa: E402

LOADER_HEADER = """import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Images(Dataset):
    def __init__(self, root):
        self.files = sorted(root.glob("*.png"))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        return torch.load(self.files[idx])


loader = DataLoader(Images(ROOT), batch_size=64, shuffle=True)
"""

LOADER_LOOP = """

def epoch_{i}(model, opt):
    model.train()
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def loader_loops(count: int) -> str:
    """`count` functions, each looping over the module-level `loader`."""
    return LOADER_HEADER + "".join(LOADER_LOOP.format(i=i) for i in range(count))


def best_cpu(run: Callable[[], object], repeat: int) -> float:
    """The least CPU time of `repeat` runs, each with the collector paused (as
    torchlint pauses it for a lint: torchlint/engine/gc_pause.py), so that the bare
    parse and the lint are timed alike."""
    times: List[float] = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.process_time()
            run()
            times.append(time.process_time() - start)
        finally:
            gc.enable()
    return min(times)


def measure(text: str, repeat: int) -> Tuple[float, float, int]:
    """(parse seconds, lint seconds, finding count) for one text."""
    settings = Settings(preview=True)
    parse = best_cpu(lambda: libcst.parse_module(text), repeat)
    lint = best_cpu(lambda: check(text, "generated.py", settings), repeat)
    return parse, lint, len(check(text, "generated.py", settings).findings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=2000, help="lines of the small files")
    parser.add_argument("--large", type=int, default=16000, help="lines of the large files")
    parser.add_argument("--loops", type=int, nargs=2, default=(100, 800), help="loader loops: small and large count")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    shapes: List[Tuple[str, str, Callable[[int], str], Tuple[int, int]]] = [
        ("training module", "line", _training_script.generate, (args.small, args.large)),
        ("model zoo", "line", _model_zoo.generate, (args.small, args.large)),
        ("same-named loader loops", "loop", loader_loops, tuple(args.loops)),  # type: ignore[list-item]
    ]
    print(f"{'shape':<25}{'size':>8}{'lines':>8}{'parse s':>9}{'lint s':>9}{'findings':>9}{'over parse':>16}")
    for name, unit, generate, sizes in shapes:
        per_unit: List[float] = []
        for size in sizes:
            text = generate(size)
            lines = text.count("\n")
            parse, lint, findings = measure(text, args.repeat)
            units = lines if unit == "line" else size
            per_unit.append((lint - parse) / units)
            cost = f"{per_unit[-1] * 1e6:.0f} us/{unit}"
            print(f"{name:<25}{size:>8}{lines:>8}{parse:>9.2f}{lint:>9.2f}{findings:>9}{cost:>16}")
        print(f"{'':<25}large/small per {unit}: {per_unit[1] / per_unit[0]:.2f}")


if __name__ == "__main__":
    main()
