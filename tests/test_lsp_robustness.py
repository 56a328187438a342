"""Robustness of the language server: broken input on the wire, documents it
never saw, a very large document, and a burst of edits.

The wire tests drive `python -m torchlint server` through raw pipes (a client
library would refuse to send what they send); the others use the pytest-lsp
client from lsp_client.py. Every wait is for an event with a timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_client import WAIT_S, actions, caps, next_publish, open_doc, server_config, uri_for

ROOT = Path(__file__).resolve().parent.parent
asyncio_module = pytest.mark.asyncio(loop_scope="module")

CODE_ACTION_PARAMS = {
    "textDocument": {"uri": "file:///nowhere/never_opened.py"},
    "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
    "context": {"diagnostics": []},
}


# -- a raw stdio client ---------------------------------------------------------------------------
class RawServer:
    """`python -m torchlint server` on pipes: write any bytes, read framed replies."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torchlint", "server"],
            cwd=str(ROOT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.messages: "queue.Queue" = queue.Queue()
        self.seen: list = []
        self.stderr: list = []
        threading.Thread(target=self._read, daemon=True).start()
        # Drain stderr so a chatty server can never block on a full pipe.
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.messages.put(None)
                    return
                if not line.strip():
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            self.messages.put(json.loads(out.read(length)))

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message) -> None:
        self.write(frame(message))

    def wait_reply(self, msg_id, timeout: float = WAIT_S):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no reply to request {msg_id!r} within {timeout} s; stderr:\n{self.log()}")
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                raise AssertionError(f"server closed its output (exit {self.proc.poll()}); stderr:\n{self.log()}")
            self.seen.append(message)
            if isinstance(message, dict) and message.get("id") == msg_id and "method" not in message:
                return message

    def request(self, msg_id, method: str, params=None):
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return self.wait_reply(msg_id)

    def log(self) -> str:
        return b"".join(self.stderr).decode(errors="replace")[-4000:]

    def close(self) -> int:
        try:
            if self.proc.poll() is None:
                self.request("bye", "shutdown")
                self.send({"jsonrpc": "2.0", "method": "exit"})
            return self.proc.wait(timeout=WAIT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def frame(message) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@pytest.fixture
def raw():
    server = RawServer()
    reply = server.request(1, "initialize", {"capabilities": {}, "processId": None, "rootUri": None})
    assert "capabilities" in reply["result"]
    server.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    yield server
    assert server.close() == 0, server.log()


def assert_still_answers(raw: RawServer, msg_id) -> None:
    reply = raw.request(msg_id, "textDocument/codeAction", CODE_ACTION_PARAMS)
    assert reply == {"jsonrpc": "2.0", "id": msg_id, "result": None}


BAD_FRAMES = {
    # A length that is not a number: the body is not a message; the next header must still be found.
    "length not a number": b'Content-Length: abc\r\n\r\n{"jsonrpc": "2.0", "id": 50, "method": "shutdown"}',
    "negative length": b'Content-Length: -3\r\n\r\n{"jsonrpc": "2.0"}',
    "no length at all": b'Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{"x": 1}',
    # A length shorter than the body: a truncated body, then junk before the next header.
    "length too short": b'Content-Length: 5\r\n\r\n{"jsonrpc": "2.0", "id": 51, "method": "shutdown"}',
    "junk line": b"garbage without a header\r\n",
    "lower-case header": frame(
        {"jsonrpc": "2.0", "id": 52, "method": "textDocument/codeAction", "params": CODE_ACTION_PARAMS}
    ).replace(b"Content-Length", b"content-length"),
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_bad_framing_does_not_deafen_the_server(raw: RawServer, name):
    raw.write(BAD_FRAMES[name])
    # The very next well-formed request is answered, and so is the one after.
    assert_still_answers(raw, 2)
    assert_still_answers(raw, 3)
    if name == "lower-case header":
        # Header names are case-insensitive: that request was read and answered too.
        assert any(m.get("id") == 52 for m in raw.seen)
    # A bad frame never runs the request hidden in it (no shutdown happened).
    assert not any(m.get("id") in (50, 51) for m in raw.seen)


def test_body_that_is_not_json(raw: RawServer):
    raw.write(b"Content-Length: 9\r\n\r\nnot json!")
    raw.write(b'Content-Length: 20\r\n\r\n{"jsonrpc": "2.0", "')  # cut short: not JSON either
    assert_still_answers(raw, 2)
    assert_still_answers(raw, 3)


NOT_REQUESTS = [
    42,
    [1, 2],
    "a string",
    None,
    {"foo": "bar"},
    {"jsonrpc": "2.0"},
    {"jsonrpc": "2.0", "method": 5},
    {"jsonrpc": "2.0", "id": 77, "result": None},  # a response to nothing
    {"jsonrpc": "2.0", "id": 78, "error": {"code": -1, "message": "for nothing"}},
    {"jsonrpc": "2.0", "method": "$/unknownNotification", "params": {}},
    {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": 3}},
]


@pytest.mark.parametrize("message", NOT_REQUESTS, ids=[json.dumps(m)[:40] for m in NOT_REQUESTS])
def test_json_that_is_not_a_valid_message_is_ignored(raw: RawServer, message):
    raw.send(message)
    assert_still_answers(raw, 2)
    assert not any(m.get("id") in (77, 78) for m in raw.seen)  # nothing "answers" a response


BAD_REQUESTS = {
    "method not a string": ({"jsonrpc": "2.0", "id": 60, "method": 5}, -32602),
    "params of the wrong shape": (
        {"jsonrpc": "2.0", "id": 61, "method": "textDocument/codeAction", "params": [1]},
        -32602,
    ),
    "unknown method": ({"jsonrpc": "2.0", "id": 62, "method": "torchlint/nothing", "params": {}}, -32601),
    "wrong jsonrpc version": ({"jsonrpc": "1.0", "id": 63, "method": "shutdown"}, -32600),
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
def test_invalid_request_gets_an_error_reply(raw: RawServer, name):
    message, code = BAD_REQUESTS[name]
    raw.send(message)
    reply = raw.wait_reply(message["id"])
    assert reply["error"]["code"] == code, reply
    assert_still_answers(raw, 2)


def test_lifecycle_after_abuse(raw: RawServer):
    """After a mix of all of the above, shutdown/exit still end the process cleanly (exit 0, checked by the fixture)."""
    for data in BAD_FRAMES.values():
        raw.write(data)
    for message in NOT_REQUESTS:
        raw.send(message)
    assert_still_answers(raw, 2)


# -- documents the server never opened ------------------------------------------------------------
@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(capabilities=caps(), root_uri=None))
    yield
    await lsp_client.shutdown_session()


@asyncio_module
async def test_requests_about_unopened_documents(client: LanguageClient, tmp_path):
    ghost = uri_for(tmp_path, "ghost.py")
    assert await actions(client, ghost, 0) == []
    assert await actions(client, ghost, 0, only=["source.fixAll.torchlint"]) == []
    ident = types.TextDocumentIdentifier(ghost)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=ghost, version=3),
            [
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(5, 0), types.Position(6, 0)), text="x = 1\n"
                )
            ],
        )
    )
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=ghost, version=4),
            [types.TextDocumentContentChangeWholeDocument(text="import torch\nx = torch.zeros(3).to('cuda')\n")],
        )
    )
    client.text_document_did_save(types.DidSaveTextDocumentParams(ident))
    client.text_document_did_close(types.DidCloseTextDocumentParams(ident))
    client.text_document_did_close(types.DidCloseTextDocumentParams(ident))  # twice
    # Still answering and linting; notifications are in order, so these ran first.
    assert await actions(client, ghost, 0) == []
    real = uri_for(tmp_path, "real.py")
    assert [d.code for d in await open_doc(client, real, "import torch\nx = torch.zeros(3).to('cuda')\n")] == ["TL104"]
    # The ghost never got findings (a close may publish an empty list, nothing else).
    assert all(list(p.diagnostics) == [] for p in client.published if p.uri == ghost)


# -- a very large document ------------------------------------------------------------------------
BIG_LINES = int(os.environ.get("TORCHLINT_TEST_BIG_LINES", "50000"))
# Not a speed bound (bench/lsp_latency.py measures speed): only how long to wait
# before calling the server hung, far beyond any lint on a loaded machine.
BIG_HANG_S = 900.0


def big_document(lines: int):
    """About `lines` lines of ordinary code; a fixable TL104 (module-level, a script's
    own work) after every 1000th function. Returns (text, finding rows)."""
    out = ["import torch\n", "device = torch.device('cuda')\n"]
    rows = []
    i = 0
    while len(out) < lines:
        out.append(f'def step_{i}(x):\n    """One step."""\n    y = x * 2 + 1\n    z = y.sum()\n    return z\n\n')
        out.extend([""] * 5)  # count lines: each function is 6
        if i % 1000 == 999:
            out.append(f"y_{i} = torch.zeros(3).to(device)\n")
            rows.append(len(out))
        i += 1
    return "".join(out), rows


@pytest.mark.slow
@asyncio_module
async def test_large_document_lints_while_server_keeps_answering(client: LanguageClient, tmp_path):
    small = uri_for(tmp_path, "small.py")
    small_text = "import torch\nx = torch.zeros(3).to('cuda')\n"
    assert [d.code for d in await open_doc(client, small, small_text)] == ["TL104"]

    text, rows = big_document(BIG_LINES)
    assert text.count("\n") >= BIG_LINES - 6 and len(rows) >= 1
    big = uri_for(tmp_path, "big.py")
    since = len(client.published)
    started = time.monotonic()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(big, "python", 1, text)))
    # A code action on the big document must wait for its lint, but not hold up
    # the server: while the big document lints, one on the small document is answered.
    # The order in which the client receives messages shows what the server did first.
    received = []
    fresh = uri_for(tmp_path, "fresh.py")
    handle = client.protocol.handle_message

    def record(message):
        text = repr(message)
        if getattr(message, "method", None) == types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS:
            received.append(("publish", message.params.uri))
        elif getattr(message, "method", None) is None:
            received.append(("reply", "big" if big in text else "small" if small in text or fresh in text else "other"))
        return handle(message)

    client.protocol.handle_message = record
    try:
        # Sent now (not from a task that runs later), right after the didOpen.
        big_request = client.protocol.send_request(  # pygls' plain send: written at once
            types.TEXT_DOCUMENT_CODE_ACTION,
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(big),
                range=types.Range(types.Position(rows[0] - 1, 0), types.Position(rows[0] - 1, 0)),
                context=types.CodeActionContext(diagnostics=[]),
            ),
        )
        found = await actions(client, small, 1)
        # A document opened now has its background lint queued behind the big one;
        # a code action on it is answered anyway.
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(fresh, "python", 1, small_text))
        )
        fresh_found = await actions(client, fresh, 1)
    finally:
        client.protocol.handle_message = handle
    answered_during_lint = ("reply", "big") not in received and ("publish", big) not in received
    assert any(a.title.startswith("torchlint (TL104)") for a in found)
    assert any(a.title.startswith("torchlint (TL104)") for a in fresh_found)
    # A request the server answers without linting: also prompt.
    assert await actions(client, uri_for(tmp_path, "ghost.py"), 0) == []

    published = []

    def big_done() -> bool:
        published.extend(p for p in client.published[since:] if p.uri == big and p.version == 1)
        return bool(published)

    hung = time.monotonic() + BIG_HANG_S
    while not big_done():
        if time.monotonic() > hung:
            pytest.fail(f"the server never published the {BIG_LINES}-line document's diagnostics (hung?)")
        await asyncio.sleep(0.02)  # polling for the event, not a timed assertion
    print(f"{BIG_LINES}-line document: diagnostics after {time.monotonic() - started:.1f} s")
    assert answered_during_lint, "the small document's code action waited for the big lint"
    diags = published[0].diagnostics
    assert [d.code for d in diags] == ["TL104"] * len(rows)
    assert [d.range.start.line + 1 for d in diags] == rows
    big_found = await asyncio.wait_for(asyncio.wrap_future(big_request), BIG_HANG_S) or []
    fixes = [a for a in big_found if a.title.startswith("torchlint (TL104)")]
    assert len(fixes) == 1 and fixes[0].edit.changes[big][0].range.start.line == rows[0] - 1
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(big)))


# -- a burst of edits -----------------------------------------------------------------------------
def burst_text(version: int) -> str:
    """Version v has v % 4 findings, on lines named after v; the final one has 3."""
    lines = ["import torch\n", f"# version {version}\n"]
    for k in range(version % 4):
        lines.append(f"x{version}_{k} = torch.zeros({k + 1}).to('cuda')\n")
    return "".join(lines)


@asyncio_module
async def test_burst_of_changes_publishes_the_final_version(client: LanguageClient, tmp_path):
    uri = uri_for(tmp_path, "burst.py")
    await open_doc(client, uri, burst_text(0), version=0)
    since = len(client.published)
    last = 51
    assert last % 4 == 3
    for version in range(1, last + 1):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [types.TextDocumentContentChangeWholeDocument(text=burst_text(version))],
            )
        )
    final = await next_publish(client, uri, since, last)
    assert [(d.code, d.range.start.line) for d in final.diagnostics] == [("TL104", 2), ("TL104", 3), ("TL104", 4)]
    # Every publish matched the text of the version it names, and versions only went up.
    mine = [p for p in client.published[since:] if p.uri == uri]
    assert [p.version for p in mine] == sorted(p.version for p in mine)
    for p in mine:
        assert len(p.diagnostics) == p.version % 4, p.version
    # The server answers about the final text: the third finding exists only there.
    found = await actions(client, uri, 4)
    assert [a.title for a in found if a.title.startswith("torchlint (")] == [
        "torchlint (TL104): Pass `device=` to the factory"
    ]
    edits = found[0].edit.changes[uri]
    assert edits[0].range.start.line == 4
