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
    except DecodeError:
        raise
    except Exception as exc:  # any codec's failure (UnicodeError, LookupError, a bad cookie...)
        raise _decode_error(data, exc) from None


def _utf16_or_32(data: bytes) -> str:
    """ "UTF-16" or "UTF-32" when `data` looks like text in that encoding (a
    byte order mark, or NUL bytes where UTF-16/32 puts them around ASCII), else ""."""
    for bom, name in (
        (codecs.BOM_UTF32_LE, "UTF-32"),
        (codecs.BOM_UTF32_BE, "UTF-32"),
        (codecs.BOM_UTF16_LE, "UTF-16"),
        (codecs.BOM_UTF16_BE, "UTF-16"),
    ):
        if data.startswith(bom):
            return name
    head = data[:256]
    head = head[: len(head) - len(head) % 4]
    if len(head) < 4:
        return ""
    for name, width in (("UTF-32", 4), ("UTF-16", 2)):
        for order in (0, width - 1):  # big- or little-endian: where the ASCII byte sits
            units = [head[i : i + width] for i in range(0, len(head), width)]
            ascii_like = sum(1 for u in units if u[order] != 0 and not any(u[:order] + u[order + 1 :]))
            if ascii_like * 4 >= len(units) * 3:  # mostly ASCII characters, each padded with NULs
                return name
    return ""


def _decode(data: bytes) -> Decoded:
    wide = _utf16_or_32(data)
    if wide:
        raise DecodeError(f"cannot decode file: {wide} source is not supported; save the file as UTF-8")
    if b"\x00" in data:
        nul = data.index(b"\x00")
        raise UnicodeDecodeError("utf-8", data, nul, nul + 1, "NUL byte: not a text file")
    bom = data.startswith(codecs.BOM_UTF8)
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    family = codecs.lookup(encoding).name
    if family.startswith(("utf-16", "utf-32")):  # a cookie naming one: CPython cannot read that either
        wide = "UTF-16" if family.startswith("utf-16") else "UTF-32"
        raise DecodeError(f"cannot decode file: {wide} source is not supported; save the file as UTF-8")
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
