"""Shared by tests/test_fuzz.py and scripts/fuzz.py: corpora, mutations, and
the property every program must satisfy."""

from __future__ import annotations

import io
import random
import re
import tokenize
from pathlib import Path
from typing import List, Optional

import libcst as cst
from hypothesis import strategies as st

from torchlint.api import check, fix_source
from torchlint.source.parsing import parse

ROOT = Path(__file__).resolve().parents[1]
# Extra real code for longer fuzzing runs (scripts/fuzz.py), when it is there.
SEEDS = ROOT.parent / "shared" / "seeds" / "blocks"


def corpus(seeds: Optional[Path] = None) -> List[str]:
    """Real-looking snippets: every rule's examples, plus the .py files in `seeds`."""
    from torchlint.rules import all_rules

    out: List[str] = []
    for rule in all_rules():
        out.extend(ex.code for ex in rule.INVALID)
        out.extend(rule.VALID)
    if seeds is not None and seeds.is_dir():
        for path in sorted(seeds.glob("*.py")):
            try:
                out.append(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
    return out


NOISE = "()[]{}:;,.=+-*/\\'\"#@\t \n\r\x0c\x00\ud800é\u2028ab0"


def mutate(src: str, rnd: random.Random, rounds: int = 3) -> str:
    """Delete, duplicate, indent or dedent a line, truncate, or insert junk."""
    for _ in range(rnd.randint(1, rounds)):
        lines = src.splitlines(keepends=True) or [""]
        i = rnd.randrange(len(lines))
        op = rnd.randrange(7)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2:
            lines[i] = rnd.choice(["    ", "\t", " "]) + lines[i]
        elif op == 3:
            lines[i] = lines[i].lstrip(" \t")
        elif op == 4:
            src = src[: rnd.randrange(len(src) + 1)]
            continue
        elif op == 5:
            pos = rnd.randrange(len(src) + 1)
            junk = "".join(rnd.choice(NOISE) for _ in range(rnd.randint(1, 4)))
            src = src[:pos] + junk + src[pos:]
            continue
        else:
            j = rnd.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        src = "".join(lines)
    return src


def mutated(corpus_list: List[str]):
    """A Hypothesis strategy of mutated corpus snippets."""
    return st.builds(
        lambda i, seed: mutate(corpus_list[i % len(corpus_list)], random.Random(seed)),
        st.integers(0, 10_000),
        st.integers(0, 2**32),
    )


_NEWLINE = re.compile(r"\r\n|\r|\n")


def _comments(src: str) -> List[str]:
    """The comments of parsable source, via the tokenizer (no recursion, so
    deeply nested programs are fine)."""
    tokens = tokenize.generate_tokens(io.StringIO(src.lstrip("\ufeff")).readline)
    return [tok.string for tok in tokens if tok.type == tokenize.COMMENT]


def check_program(src: str, unsafe: bool = True) -> Optional[str]:
    """Check the reliability properties on one program. Returns None when they
    hold, else a description (an exception here is also a failure)."""
    result = check(src, "fuzz.py")
    rows = len(_NEWLINE.split(src))
    for f in result.findings:
        if not (1 <= f.row <= f.end_row <= rows and f.column >= 1):
            return f"{f.code} position out of the file: {f.row}:{f.column}-{f.end_row}:{f.end_column}"
    if any(f.code == "TL000" for f in result.findings):
        try:
            parse(src)
        except Exception:
            pass
        else:
            return "TL000 on source that parses"
    fixed, _ = fix_source(src, "fuzz.py", unsafe=unsafe)
    if fixed != src:
        try:
            parse(src)
        except Exception:
            return "fix changed source that does not parse"
        try:
            cst.parse_module(fixed)
        except Exception as exc:
            return f"fix output does not parse: {exc}"
        if sorted(_comments(fixed)) != sorted(_comments(src)):
            return "fix lost or changed a comment"
        again, _ = fix_source(fixed, "fuzz.py", unsafe=unsafe)
        if again != fixed:
            return "fix is not a fixed point"
    return None


WRAPPERS = [
    ("(", ")"),
    ("[", "]"),
    ("{", "}"),
    ("-", ""),
    ("not ", ""),
    ("~", ""),
    ("", " if y else 1"),
    ("lambda: ", ""),
    ("f(", ")"),
    ("", ".a"),
    ("", "[0]"),
    ("", " + 1"),
    ("1 ** ", ""),
    ("await ", ""),
    ("(yield ", ")"),
    ("*", ""),
    ("", "()"),
    ("'s' ", ""),
]


def deep_program(rnd: random.Random, max_depth: int = 2500) -> str:
    """A statement nesting randomly chosen constructs to a random depth, in a
    random context (module level, inside a def, inside an f-string, under ifs)."""
    depth = rnd.choice([rnd.randint(1, 120), rnd.randint(100, 400), rnd.randint(300, max_depth)])
    kinds = rnd.sample(WRAPPERS, rnd.randint(1, 4))
    pre, post = [], []
    for _ in range(depth):
        a, b = rnd.choice(kinds)
        pre.append(a)
        post.append(b)
    expr = "".join(pre) + "x" + "".join(reversed(post))
    if rnd.random() < 0.2:
        expr = 'f"{' + expr + '}"'
    stmt = f"y = {expr}\n"
    context = rnd.randrange(3)
    if context == 1:
        stmt = "def g():\n    " + stmt
    elif context == 2:
        levels = rnd.randint(1, 120)
        stmt = "".join(" " * i + "if x:\n" for i in range(levels)) + " " * levels + stmt
    return "import torch\n" + stmt + "z = torch.zeros(2).cuda()\n"


COOKIES = [
    b"",
    b"# -*- coding: latin-1 -*-\n",
    b"# coding: utf-8\n",
    b"# coding: ascii\n",
    b"# coding: cp1252\n",
    b"# coding: utf-16\n",
    b"# coding: undefined\n",
    b"# coding: nope\n",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
]


def bytes_program(src: str, rnd: random.Random) -> bytes:
    """A snippet as file bytes: a random cookie/BOM, newline style and a few raw bytes."""
    src = rnd.choice(["\n", "\r\n", "\r"]).join(src.split("\n"))
    data = rnd.choice(COOKIES) + src.encode("utf-8", "surrogatepass")
    for _ in range(rnd.choice([0, 0, 1, 2])):
        pos = rnd.randrange(len(data) + 1)
        data = data[:pos] + bytes([rnd.randrange(256)]) + data[pos:]
    return data


def check_bytes(data: bytes) -> Optional[str]:
    from torchlint.api import decode_source, fix_bytes, lint_bytes

    lint_bytes(data, "fuzz.py")
    new, _ = fix_bytes(data, "fuzz.py", unsafe=True)
    if new != data:
        before, after = decode_source(data), decode_source(new)
        if (before.encoding, before.bom) != (after.encoding, after.bom):
            return "fix_bytes changed the encoding or BOM"
        try:
            cst.parse_module(after.text)
        except Exception as exc:
            return f"fix_bytes output does not parse: {exc}"
        if ("\r\n" in before.text) != ("\r\n" in after.text):
            return "fix_bytes changed the line endings"
    return None
