"""Seeded random edits of real-looking Python files, as a user types them: token
swaps, lines typed, deleted, duplicated and re-indented, statements added
between others, stray characters (some edits leave the file unparsable, as
typing does on the way). Deterministic for a given `random.Random`."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import List

from bench._training_script import generate

ROOT = Path(__file__).resolve().parents[1]

# Lines typed inside code (indented like the line they go before).
LINES = [
    "x = torch.zeros(3).to(device)",
    "model.cuda()",
    "loss = criterion(model(inputs), targets)",
    "total += loss.item()",
    "# TODO: tune this",
    "",
    "print(x)",
    "batch = batch.to(device)",
    "for batch in loader:\n{i}    out = model(batch)",
    "with torch.no_grad():\n{i}    y = model(x)",
    "if step % 10 == 0:\n{i}    print(step)",
    "    # an indented note",
    "pass",
]
# Statements typed at column 0, between top-level statements.
TOP_LEVEL = [
    "def helper(m):\n    return m.to(device)\n",
    "device = 'cpu'\n",
    "if __name__ == '__main__':\n    main()\n",
    "# a comment about the next part\n",
    "\n\n",
    "model = Net()\nmodel(torch.randn(2, 3))\n",
    "loader = DataLoader(dataset, batch_size=1)\n",
    "else:\n    pass\n",
    "    # indented comment at the top level\n",
    "@torch.no_grad()\ndef infer(m, x):\n    return m(x)\n",
]
NAMES = ["model", "x", "device", "loader", "batch", "loss", "torch", "cuda", "cpu", "y", "step", "3", "0.5"]
CHARS = "abcxyz0 ()[]:.,=\n#'\"\t\\"
_WORD = re.compile(r"\b\w+\b")


def sources() -> List[str]:
    """The files edited: the examples, the rule fixtures' bad files, generated scripts."""
    files = sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "fixtures").glob("*/bad.py"))
    return [p.read_text(encoding="utf-8") for p in files] + [generate(150), generate(300)]


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def edit(text: str, rng: random.Random) -> str:
    """`text` after one random edit."""
    if not text.strip():
        return text + rng.choice(TOP_LEVEL)
    pos = rng.randrange(len(text) + 1)
    kind = rng.random()
    if kind < 0.25:  # swap a word for another
        words = list(_WORD.finditer(text))
        m = rng.choice(words) if words else None
        if m is not None:
            return text[: m.start()] + rng.choice(NAMES) + text[m.end() :]
    if kind < 0.45:  # type a line, indented like the one it goes before
        start = _line_start(text, pos)
        line_end = text.find("\n", start)
        current = text[start : line_end if line_end >= 0 else len(text)]
        indent = current[: len(current) - len(current.lstrip(" \t"))]
        new = rng.choice(LINES).replace("{i}", indent)
        return text[:start] + indent + new + "\n" + text[start:]
    if kind < 0.6:  # a statement at the top level, before a line at column 0
        starts = [m.start() for m in re.finditer(r"(?m)^(?=\S)", text)] or [0]
        at = rng.choice(starts)
        return text[:at] + rng.choice(TOP_LEVEL) + text[at:]
    lines = text.splitlines(keepends=True)
    row = rng.randrange(len(lines))
    if kind < 0.68:  # delete a line
        del lines[row]
        return "".join(lines)
    if kind < 0.74:  # duplicate a line
        lines.insert(row, lines[row])
        return "".join(lines)
    if kind < 0.8:  # indent or dedent a line
        line = lines[row]
        lines[row] = line[4:] if line.startswith("    ") else "    " + line
        return "".join(lines)
    if kind < 0.92:  # a stray character
        return text[:pos] + rng.choice(CHARS) + text[pos:]
    end = min(len(text), pos + rng.randrange(1, 30))  # delete a few characters
    return text[:pos] + text[end:]


__all__ = ["edit", "sources"]
