"""The library API the CLI, the language server, pre-commit and tests share."""
from __future__ import annotations

import codecs
import io
import tokenize
from dataclasses import dataclass
from typing import List, Optional, Tuple

from torchlint.config import Settings
from torchlint.engine import FileResult, check_source, fix_source as _fix_source, syntax_error_finding
from torchlint.findings import Finding


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode_source(data: bytes) -> Decoded:
    """Decode Python source as the interpreter would (BOM, PEP 263 cookie).
    Raises UnicodeDecodeError / SyntaxError / LookupError on undecodable input."""
    if b"\x00" in data:
        raise UnicodeDecodeError("utf-8", data, data.index(b"\x00"), data.index(b"\x00") + 1, "NUL byte: not a text file")
    bom = data.startswith(codecs.BOM_UTF8)
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = data[len(codecs.BOM_UTF8):] if bom else data
    return Decoded(body.decode(encoding), encoding, bom)


def lint_source(source: str, path: str = "<stdin>", settings: Optional[Settings] = None) -> List[Finding]:
    """Findings for one source text, sorted by position."""
    settings = settings or Settings()
    return list(check_source(source, path, settings.enabled_for(path)).findings)


def check(source: str, path: str = "<stdin>", settings: Optional[Settings] = None) -> FileResult:
    """Like `lint_source`, also returning problems (crashed rules)."""
    settings = settings or Settings()
    return check_source(source, path, settings.enabled_for(path))


def fix_source(
    source: str, path: str = "<stdin>", settings: Optional[Settings] = None, unsafe: bool = False
) -> Tuple[str, List[Finding]]:
    """Apply safe (and, with `unsafe`, unsafe) fixes; return the new text and
    the findings that remain in it."""
    settings = settings or Settings()
    result = _fix_source(source, path, settings.enabled_for(path), unsafe=unsafe)
    return result.fixed_source if result.fixed_source is not None else source, list(result.findings)


def decode_error_finding(data: bytes, path: str, exc: Exception) -> Finding:
    """TL000 for bytes that cannot be decoded, at the offending line when known."""
    row = column = 1
    if isinstance(exc, UnicodeDecodeError):
        nul = "NUL byte" in str(exc.reason)
        # Offsets are into the body after a UTF-8 BOM, except for the NUL check.
        start = exc.start + (0 if nul or not data.startswith(codecs.BOM_UTF8) else len(codecs.BOM_UTF8))
        start = min(start, len(data))
        head = data[:start]
        row = head.count(b"\n") + 1
        column = start - (head.rfind(b"\n") + 1) + 1
        if nul:
            message = "cannot decode file: contains a NUL byte (binary, not Python source)"
        else:
            byte = f" (byte 0x{data[start]:02x})" if start < len(data) else ""
            message = f"cannot decode file as {exc.encoding}: {exc.reason}{byte}"
    elif isinstance(exc, SyntaxError):  # a bad or unknown PEP 263 coding cookie
        row = exc.lineno or 1
        message = f"cannot decode file: {exc.msg}"
    else:
        message = f"cannot decode file: {exc}"
    return syntax_error_finding(path, message, row, column)


def lint_bytes(data: bytes, path: str, settings: Optional[Settings] = None) -> FileResult:
    """Lint raw file contents; undecodable input becomes a TL000 finding."""
    try:
        decoded = decode_source(data)
    except Exception as exc:  # any codec's failure (UnicodeError, LookupError, a bad cookie...)
        return FileResult(path, (decode_error_finding(data, path, exc),))
    return check(decoded.text, path, settings)


def lint_paths(paths, settings: Optional[Settings] = None, fix: bool = False, unsafe: bool = False, jobs: int = 1):
    """Lint (or, with `fix`, fix in place) files and folders; returns a
    `torchlint.runner.RunResult` (sorted findings, problems, counts)."""
    from torchlint.runner import run

    return run(list(paths), settings or Settings(), mode="fix" if fix else "lint", unsafe=unsafe, jobs=jobs)


def fix_bytes(
    data: bytes, path: str = "<stdin>", settings: Optional[Settings] = None, unsafe: bool = False
) -> Tuple[bytes, List[Finding]]:
    """`fix_source` on raw file contents: the result keeps the file's encoding,
    BOM and line endings. Undecodable input is returned unchanged with its TL000.
    The returned bytes are the input itself when nothing was fixed."""
    try:
        decoded = decode_source(data)
    except Exception as exc:  # as in lint_bytes
        return data, [decode_error_finding(data, path, exc)]
    fixed, findings = fix_source(decoded.text, path, settings, unsafe)
    if fixed == decoded.text:
        return data, findings
    try:
        return decoded.encode(fixed), findings
    except UnicodeEncodeError:
        # A fix introduced text the file's declared encoding cannot hold: keep the file.
        return data, lint_source(decoded.text, path, settings)
