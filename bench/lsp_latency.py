"""Language-server latency: time from `didChange` to the `publishDiagnostics`
for that version, on a generated realistic training script.

Drives the real server (`python -c "from torchlint.server import main; main()"`,
the same code as `torchlint server`) over stdio with a minimal JSON-RPC client:
initialize, open the script, then N times change one line (an incremental
edit, as editors send) and wait for the diagnostics of that exact version.
The time includes the server's debounce. For reference it also times the
in-process lint of the same text (torchlint.api.check) and LibCST's parse
alone, the floor under any full re-lint.

    python bench/lsp_latency.py                  # 2,000 lines, 30 changes
    python bench/lsp_latency.py --lines 500 --repeats 10 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _training_script import generate  # noqa: E402

TIMEOUT_S = 120.0


class Client:
    """Just enough JSON-RPC over stdio: requests, notifications, and a queue of
    everything the server sends (with the time it arrived)."""

    def __init__(self, cmd: List[str]) -> None:
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr, cwd=str(ROOT)
        )
        self.inbox: "Queue[tuple]" = Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length is None:
                continue
            body = out.read(length)
            self.inbox.put((time.perf_counter(), json.loads(body)))

    def send(self, message: Dict[str, Any]) -> float:
        message = {"jsonrpc": "2.0", **message}
        body = json.dumps(message).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return time.perf_counter()

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        msg_id = self.next_id
        self.send({"id": msg_id, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == msg_id and "method" not in m)[1]

    def notify(self, method: str, params: Any) -> float:
        return self.send({"method": method, "params": params})

    def wait(self, predicate, timeout: float = TIMEOUT_S) -> tuple:
        deadline = time.perf_counter() + timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError("no matching message from the server")
            try:
                arrived, message = self.inbox.get(timeout=left)
            except Empty:
                continue
            if message.get("method") == "workspace/configuration" and "id" in message:
                self.send({"id": message["id"], "result": [None]})
                continue
            if "id" in message and "method" in message:  # other server requests: accept
                self.send({"id": message["id"], "result": None})
                continue
            if predicate(message):
                return arrived, message

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


def publish_for(uri: str, version: int):
    def match(m: Dict[str, Any]) -> bool:
        return (
            m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and m["params"].get("version") == version
        )

    return match


def percentile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def in_process(text: str, repeats: int) -> Dict[str, float]:
    import libcst as cst

    from torchlint.api import check

    check(text, "train.py")
    lint, parse = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        check(text, "train.py")
        lint.append(time.perf_counter() - t)
        t = time.perf_counter()
        cst.parse_module(text)
        parse.append(time.perf_counter() - t)
    return {"lint_median_ms": statistics.median(lint) * 1000, "libcst_parse_median_ms": statistics.median(parse) * 1000}


def run(lines: int, repeats: int, reference_repeats: int) -> Dict[str, Any]:
    text = generate(lines)
    n_lines = text.count("\n")
    uri = (ROOT / "bench" / "_generated_train.py").as_uri()  # never written; the server lints the buffer
    client = Client([sys.executable, "-c", "from torchlint.server import main; main()"])
    try:
        client.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {}})
        client.notify("initialized", {})
        client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )
        _, first = client.wait(publish_for(uri, 1))
        findings = len(first["params"]["diagnostics"])
        # The line `    lr: float = 3e-4` in the Config dataclass: each change puts
        # another 4-character value there (the same size of edit every time).
        row = text.splitlines().index("    lr: float = 3e-4")
        times: List[float] = []
        for i in range(repeats):
            version = i + 2
            value = f"{1 + (i % 9)}e-4"
            sent = client.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [
                        {
                            "range": {"start": {"line": row, "character": 16}, "end": {"line": row, "character": 20}},
                            "text": value,
                        }
                    ],
                },
            )
            arrived, message = client.wait(publish_for(uri, version))
            assert len(message["params"]["diagnostics"]) == findings
            times.append(arrived - sent)
    finally:
        client.close()
    result = {
        "lines": n_lines,
        "findings": findings,
        "repeats": repeats,
        "median_ms": statistics.median(times) * 1000,
        "p90_ms": percentile(times, 0.9) * 1000,
        "min_ms": min(times) * 1000,
        "max_ms": max(times) * 1000,
        "cpus": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    if reference_repeats:
        result.update(in_process(text, reference_repeats))
    return result


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument(
        "--reference-repeats", type=int, default=5, help="in-process lint/parse timings for comparison (0: skip)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.lines, args.repeats, args.reference_repeats)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"didChange -> publishDiagnostics, {result['lines']}-line script, {result['findings']} findings, "
            f"{result['repeats']} changes: median {result['median_ms']:.0f} ms, p90 {result['p90_ms']:.0f} ms "
            f"(min {result['min_ms']:.0f}, max {result['max_ms']:.0f}); "
            f"{result['cpus']} CPUs, load {result['loadavg_1m']}"
        )
        if "lint_median_ms" in result:
            print(
                f"in-process: lint {result['lint_median_ms']:.0f} ms, LibCST parse alone "
                f"{result['libcst_parse_median_ms']:.0f} ms (median)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
