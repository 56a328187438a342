"""Suppression comments (RULES.md):

- `# torchlint: ignore[TL101, TL102]` or `# noqa: TL101,TL102` at the end of the
  reported line suppresses those codes there;
- bare `# torchlint: ignore` or `# noqa` suppresses every code on that line;
- `# torchlint: ignore-file[TL302]` in the file's first comment block
  suppresses codes for the whole file (bare `ignore-file`: all codes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Dict, FrozenSet, List, Optional, Tuple

# None in a set's place means "every code".
_LINE = re.compile(
    r"#\s*(?:noqa(?::\s*(?P<noqa>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?"
    r"|torchlint:\s*ignore(?!-file)(?:\[(?P<ignore>[^\]]*)\])?)",
    re.IGNORECASE,
)
_FILE = re.compile(r"#\s*torchlint:\s*ignore-file(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_CODES = re.compile(r"[A-Za-z]+[0-9]+")
_NEWLINE = re.compile(r"\r\n|\r|\n")

ALL = None


@dataclass(frozen=True)
class Suppressions:
    file_codes: Optional[FrozenSet[str]]  # None: nothing suppressed file-wide
    file_all: bool
    lines: Dict[int, Optional[FrozenSet[str]]]

    def suppressed(self, code: str, row: int) -> bool:
        if self.file_all or (self.file_codes and code in self.file_codes):
            return True
        if row in self.lines:
            codes = self.lines[row]
            return codes is None or code in codes
        return False


def _codes(text: Optional[str]) -> Optional[FrozenSet[str]]:
    if text is None or not text.strip():
        return None
    return frozenset(c.upper() for c in _CODES.findall(text))


def parse_suppressions(source: str) -> Suppressions:
    lines: Dict[int, Optional[FrozenSet[str]]] = {}
    file_codes: set = set()
    file_all = False
    in_header = True
    # Only \r\n, \r and \n end lines (as for Python and LibCST); str.splitlines
    # would also split at form feeds and U+2028 and shift every later row.
    for row, line in enumerate(_NEWLINE.split(source), start=1):
        stripped = line.strip()
        if in_header:
            if stripped.startswith("#") or not stripped:
                m = _FILE.search(stripped)
                if m:
                    codes = _codes(m.group("codes"))
                    if codes is None:
                        file_all = True
                    else:
                        file_codes |= codes
                    continue
            else:
                in_header = False
        if "#" not in line:
            continue
        for m in _LINE.finditer(line):
            if m.group(0).lower().lstrip("# ").startswith("noqa"):
                codes = _codes(m.group("noqa"))
            else:
                codes = _codes(m.group("ignore"))
            prev = lines.get(row, frozenset())
            if codes is None or prev is None:
                lines[row] = None
            else:
                lines[row] = prev | codes
    return Suppressions(frozenset(file_codes) if file_codes else None, file_all, lines)


def unknown_codes(source: str, known: Collection[str]) -> List[Tuple[int, str, str]]:
    """Codes in suppression comments that name no rule: (row, code, comment),
    in order. In `# noqa` only codes that look like torchlint's (`TL...`) count,
    since `# noqa: E501` belongs to other linters; in `# torchlint: ignore[...]`
    and `ignore-file[...]` every code does."""
    lowered = source.lower()
    if "noqa" not in lowered and "torchlint" not in lowered:
        return []
    known = frozenset(known)
    out: List[Tuple[int, str, str]] = []
    for row, line in enumerate(_NEWLINE.split(source), start=1):
        if "#" not in line:
            continue
        found = []
        for m in _FILE.finditer(line):
            found += [(c, "# torchlint: ignore-file[...]") for c in _CODES.findall(m.group("codes") or "")]
        for m in _LINE.finditer(line):
            if m.group("noqa") is not None:
                found += [(c, "# noqa") for c in _CODES.findall(m.group("noqa")) if c.upper().startswith("TL")]
            elif m.group("ignore") is not None:
                found += [(c, "# torchlint: ignore[...]") for c in _CODES.findall(m.group("ignore"))]
        for code, comment in found:
            if code.upper() not in known:
                out.append((row, code, comment))
    return out


def suppression_comment(code: str, line: str) -> str:
    """The line with a `# torchlint: ignore[CODE]` comment added (or extended)."""
    m = re.search(r"#\s*torchlint:\s*ignore\[([^\]]*)\]", line)
    if m:
        codes = sorted(set(_CODES.findall(m.group(1))) | {code})
        return line[: m.start()] + f"# torchlint: ignore[{', '.join(codes)}]" + line[m.end() :]
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    return f"{body.rstrip()}  # torchlint: ignore[{code}]{ending}"
