"""LSP over stdio, hardened: the protocol answers a malformed message with an
error instead of dying, and `FramedStdin` recovers the framing of a message
whose header arrives split.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("torchlint.lsp")


@dataclass
class _Malformed:
    """A request whose params did not match the method's schema."""

    id: Any
    method: str
    error: JsonRpcException


class TorchlintProtocol(LanguageServerProtocol):
    """pygls' protocol, plus an error response for a request with malformed
    params (pygls only logs those, leaving the client waiting forever)."""

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                return _Malformed(data["id"], str(data["method"]), exc)
            raise

    def handle_message(self, message):
        if isinstance(message, _Malformed):
            log.warning("malformed %s request: %s", message.method, message.error)
            error = JsonRpcInvalidParams(f"invalid params for {message.method}")
            self._send_response(message.id, None, error.to_response_error())
            return
        version = getattr(message, "jsonrpc", None)
        msg_id = getattr(message, "id", None)
        if version != "2.0" and msg_id is not None and isinstance(getattr(message, "method", None), str):
            # pygls drops these silently; a request must get an answer.
            log.warning("request %r with jsonrpc %r", msg_id, version)
            error = JsonRpcInvalidRequest(f"unsupported jsonrpc version {version!r}")
            self._send_response(msg_id, None, error.to_response_error())
            return
        super().handle_message(message)


_HEADER_AT_END = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n\Z", re.IGNORECASE)


class FramedStdin:
    """stdin for pygls' reader that keeps the message framing in step.

    pygls reads header lines with readline() and bodies with read(n), and only
    knows `Content-Length: <n>\\r\\n` spelled exactly so. After a frame it could
    not use (a length that is not a number, a length shorter than the body)
    the rest of the bad body runs into the next message's header line, which
    then no longer matches: every later message was lost and the server went
    deaf. Here a header line is recognised at the end of any line (junk in
    front is dropped) and in any letter case, so the next good message is
    read again."""

    def __init__(self, raw) -> None:
        self.raw = raw

    def readline(self) -> bytes:
        line = self.raw.readline()
        match = _HEADER_AT_END.search(line)
        if match is not None:
            if not line.startswith(b"Content-Length:"):
                log.warning("re-synchronised on a header after %d unusable bytes", match.start())
            return b"Content-Length: " + match.group(1) + b"\r\n"
        return line

    def read(self, n: int) -> bytes:
        return self.raw.read(n)
