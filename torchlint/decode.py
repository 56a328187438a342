"""Bytes to Python source text, as the interpreter decodes them (BOM, PEP 263
cookie), and back. Undecodable input raises `DecodeError`, which says where."""

from __future__ import annotations

import codecs
import io
import tokenize
from dataclasses import dataclass


class DecodeError(Exception):
    """Bytes that cannot be decoded as Python source: a message and where (1-based)."""

    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.row = row
        self.column = column


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        """`text` in the file's encoding, with its BOM; UnicodeEncodeError if it cannot be."""
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode_source(data: bytes) -> Decoded:
    """Decode Python source as the interpreter would (BOM, PEP 263 cookie).
    Raises DecodeError on undecodable input."""
    try:
        return _decode(data)
    except Exception as exc:  # any codec's failure (UnicodeError, LookupError, a bad cookie...)
        raise _decode_error(data, exc) from None


def _decode(data: bytes) -> Decoded:
    if b"\x00" in data:
        nul = data.index(b"\x00")
        raise UnicodeDecodeError("utf-8", data, nul, nul + 1, "NUL byte: not a text file")
    bom = data.startswith(codecs.BOM_UTF8)
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = data[len(codecs.BOM_UTF8) :] if bom else data
    return Decoded(body.decode(encoding), encoding, bom)


def _decode_error(data: bytes, exc: Exception) -> DecodeError:
    """Where and why `data` could not be decoded, at the offending line when known."""
    if isinstance(exc, UnicodeDecodeError):
        nul = "NUL byte" in str(exc.reason)
        # Offsets are into the body after a UTF-8 BOM, except for the NUL check.
        start = exc.start + (0 if nul or not data.startswith(codecs.BOM_UTF8) else len(codecs.BOM_UTF8))
        start = min(start, len(data))
        head = data[:start]
        row = head.count(b"\n") + 1
        column = start - (head.rfind(b"\n") + 1) + 1
        if nul:
            return DecodeError("cannot decode file: contains a NUL byte (binary, not Python source)", row, column)
        byte = f" (byte 0x{data[start]:02x})" if start < len(data) else ""
        return DecodeError(f"cannot decode file as {exc.encoding}: {exc.reason}{byte}", row, column)
    if isinstance(exc, SyntaxError):  # a bad or unknown PEP 263 coding cookie
        return DecodeError(f"cannot decode file: {exc.msg}", exc.lineno or 1)
    return DecodeError(f"cannot decode file: {exc}")
