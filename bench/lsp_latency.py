"""Language-server latency, torchlint's server beside Ruff's (`ruff server`).

Both servers are driven over stdio with the same minimal JSON-RPC client and
the same edits, on generated realistic training scripts of 200, 2,000 and
10,000 lines (bench/_training_script.py) and a 50-cell notebook made of the
2,000-line script:

- open: `didOpen` to the first `publishDiagnostics` of that version;
- edit: N times one edit inside a function in the middle of the file (a
  number in a training step, as an incremental change), to the diagnostics
  of exactly that version (p50 and p95; the server's debounce included);
- fix-all: a `codeAction` request for `source.fixAll.<server>` to its answer;
- reopen (torchlint): a file of a project opened, closed and opened again,
  answered from the results the server keeps on disk.

Beside them: the bare LibCST parse of the file (`libcst.parse_module`, median,
in-process), the floor under any LibCST linter, and (`--breakdown`) where
torchlint's time goes in-process, stage by stage. The notebook is opened in
torchlint as its JSON text (cells edited in place, as a text editor does);
Ruff gets it through `notebookDocument/*` (as notebook editors send it).

    pip install -e '.[server,bench]'             # ruff is pinned in the bench extra
    python bench/lsp_latency.py                   # every size, 30 edits each (10 over 5,000 lines)
    python bench/lsp_latency.py --sizes 2000 --repeats 20 --json
    python bench/lsp_latency.py --no-ruff --breakdown
    python bench/lsp_latency.py --no-ruff --opens 7      # open/parse over 7 new texts, each parse timed beside it
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _training_script import generate  # noqa: E402

TIMEOUT_S = 300.0
# torchlint imports LibCST, the pipeline and the rules after `initialized` (1-3 s
# on a loaded 2-core machine); open is timed once that is done.
SETTLE_S = 3.0
SIZES = (200, 2000, 10000)
NOTEBOOK_CELLS = 50
EDIT_MARK = "0.01 * noise"  # in every train_{i}: `out = model(x + 0.01 * noise[...])`


class Client:
    """Just enough JSON-RPC over stdio: requests, notifications, and a queue of
    everything the server sends (with the time it arrived)."""

    def __init__(self, cmd: List[str]) -> None:
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(ROOT)
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

    def request(self, method: str, params: Any) -> Tuple[float, Any]:
        """(seconds to the answer, the answer)."""
        self.next_id += 1
        msg_id = self.next_id
        sent = self.send({"id": msg_id, "method": method, "params": params})
        arrived, message = self.wait(lambda m: m.get("id") == msg_id and "method" not in m)
        return arrived - sent, message.get("result")

    def notify(self, method: str, params: Any) -> float:
        return self.send({"method": method, "params": params})

    def wait(self, predicate: Callable[[Dict[str, Any]], bool], timeout: float = TIMEOUT_S) -> tuple:
        deadline = time.perf_counter() + timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError("no matching message from the server")
            try:
                arrived, message = self.inbox.get(timeout=left)
            except Empty:
                continue
            if "id" in message and "method" in message:  # server requests (configuration...): accept
                result = [None] if message["method"] == "workspace/configuration" else None
                self.send({"id": message["id"], "result": result})
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


def publish_for(uri: str, version: Optional[int]):
    def match(m: Dict[str, Any]) -> bool:
        if m.get("method") != "textDocument/publishDiagnostics" or m["params"]["uri"] != uri:
            return False
        return version is None or m["params"].get("version") == version

    return match


def percentile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# -- what is linted --------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    lines: int
    text: str  # what torchlint's server gets (a notebook: its JSON)
    source: str  # the Python code (a notebook: its cells one after the other)
    suffix: str  # ".py" or ".ipynb"
    cells: List[str] = field(default_factory=list)  # a notebook's cell sources


def script_case(lines: int) -> Case:
    text = generate(lines)
    return Case(f"{lines:,} lines", text.count("\n"), text, text, ".py")


def notebook_case(cells: int = NOTEBOOK_CELLS) -> Case:
    """The 2,000-line script as `cells` code cells (split between top-level statements)."""
    parts = generate(2000).split("\n\n\n")
    bounds = [round(k * len(parts) / cells) for k in range(cells + 1)]
    sources = ["\n\n\n".join(parts[a:b]).strip("\n") + "\n" for a, b in zip(bounds, bounds[1:])]
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": _lines(s)}
            for s in sources
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    text = json.dumps(nb, indent=1) + "\n"
    source = "".join(sources)
    return Case(f"notebook, {len(sources)} cells", source.count("\n"), text, source, ".ipynb", sources)


def _lines(source: str) -> List[str]:
    return source.splitlines(keepends=True)


def edit_at(text: str) -> Tuple[int, int]:
    """(line, character) of the number edited: in the middle train function."""
    rows = [i for i, line in enumerate(text.split("\n")) if EDIT_MARK in line]
    row = rows[len(rows) // 2]
    return row, text.split("\n")[row].index(EDIT_MARK) + 2  # the "01" of 0.01


def new_digits(i: int) -> str:
    """0.01 becomes 0.02, 0.03 ... 0.99: every edit gives a text never linted
    before (no kept result answers it), with the same size of edit."""
    return f"{2 + i % 98:02d}"


def change(line: int, character: int, i: int) -> Dict[str, Any]:
    return {
        "range": {"start": {"line": line, "character": character}, "end": {"line": line, "character": character + 2}},
        "text": new_digits(i),
    }


# -- the servers -----------------------------------------------------------------------------------
@dataclass
class Server:
    name: str
    cmd: List[str]
    fix_all_kind: str
    notebook_sync: bool  # notebooks through notebookDocument/* (else: their JSON as text)


def torchlint_server() -> Server:
    return Server(
        "torchlint",
        [sys.executable, "-c", "from torchlint.doors.server import main; main()"],
        "source.fixAll.torchlint",
        False,
    )


def ruff_server() -> Optional[Server]:
    exe = shutil.which("ruff")
    if exe is None:
        return None
    return Server("ruff", [exe, "server"], "source.fixAll.ruff", True)


CAPABILITIES = {
    "textDocument": {"publishDiagnostics": {"versionSupport": True}, "codeAction": {}},
    "notebookDocument": {"synchronization": {}},
}


def run_server(server: Server, case: Case, repeats: int) -> Dict[str, Any]:
    client = Client(server.cmd)
    uri = (ROOT / "bench" / f"_generated_{case.lines}{case.suffix}").as_uri()  # never written
    try:
        client.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": CAPABILITIES})
        client.notify("initialized", {})
        time.sleep(SETTLE_S)  # let the server warm up (imports), as it does before a user opens a file
        if case.suffix == ".ipynb" and server.notebook_sync:
            return _notebook_session(client, uri, case, repeats, server)
        sent = client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": _language(case), "version": 1, "text": case.text}},
        )
        arrived, first = client.wait(publish_for(uri, 1))
        open_s = arrived - sent
        findings = len(first["params"]["diagnostics"])
        line, character = edit_at(case.text)
        times: List[float] = []
        for i in range(repeats):
            version = i + 2
            sent = client.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change(line, character, i)]},
            )
            arrived, _ = client.wait(publish_for(uri, version))
            times.append(arrived - sent)
        fix_s, _ = client.request("textDocument/codeAction", _fix_all_params(uri, server))
        reopen_s = _reopen(client, case) if server.name == "torchlint" else None
    finally:
        client.close()
    out = _summary(open_s, times, fix_s, findings)
    if reopen_s is not None:
        out["reopen_ms"] = reopen_s * 1000
    return out


def _reopen(client: Client, case: Case) -> float:
    """Open, close and open again a copy in a project (`[tool.torchlint]`):
    the second open is answered from the results kept on disk."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
        uri = Path(folder, f"copy{case.suffix}").as_uri()
        item = {"uri": uri, "languageId": _language(case), "version": 1, "text": case.text}
        client.notify("textDocument/didOpen", {"textDocument": item})
        client.wait(publish_for(uri, 1))
        time.sleep(0.5)  # the result is written to disk after it is published
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        client.wait(publish_for(uri, None))  # the close clears the diagnostics
        sent = client.notify("textDocument/didOpen", {"textDocument": item})
        arrived, _ = client.wait(publish_for(uri, 1))
        return arrived - sent


def _language(case: Case) -> str:
    return "json" if case.suffix == ".ipynb" else "python"


def _fix_all_params(uri: str, server: Server) -> Dict[str, Any]:
    return {
        "textDocument": {"uri": uri},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": [], "only": [server.fix_all_kind]},
    }


def _notebook_session(client: Client, uri: str, case: Case, repeats: int, server: Server) -> Dict[str, Any]:
    cell_uris = [f"{uri}#cell{i}" for i in range(len(case.cells))]
    sent = client.notify(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": uri,
                "notebookType": "jupyter-notebook",
                "version": 1,
                "cells": [{"kind": 2, "document": u} for u in cell_uris],
            },
            "cellTextDocuments": [
                {"uri": u, "languageId": "python", "version": 1, "text": s} for u, s in zip(cell_uris, case.cells)
            ],
        },
    )
    target = next(i for i, s in enumerate(case.cells) if EDIT_MARK in s and i >= len(case.cells) // 2)
    arrived, first = client.wait(publish_for(cell_uris[target], None))
    open_s = arrived - sent
    line, character = edit_at(case.cells[target])
    times = []
    for i in range(repeats):
        version = i + 2
        sent = client.notify(
            "notebookDocument/didChange",
            {
                "notebookDocument": {"uri": uri, "version": version},
                "change": {
                    "cells": {
                        "textContent": [
                            {
                                "document": {"uri": cell_uris[target], "version": version},
                                "changes": [change(line, character, i)],
                            }
                        ]
                    }
                },
            },
        )
        arrived, _ = client.wait(publish_for(cell_uris[target], None))
        times.append(arrived - sent)
    fix_s, _ = client.request("textDocument/codeAction", _fix_all_params(cell_uris[target], server))
    return _summary(open_s, times, fix_s, len(first["params"]["diagnostics"]))


def _summary(open_s: float, times: List[float], fix_s: float, findings: int) -> Dict[str, Any]:
    return {
        "findings": findings,
        "open_ms": open_s * 1000,
        "edit_p50_ms": percentile(times, 0.5) * 1000,
        "edit_p95_ms": percentile(times, 0.95) * 1000,
        "edit_max_ms": max(times) * 1000,
        "fix_all_ms": fix_s * 1000,
    }


def open_ratios(case: Case, opens: int) -> Dict[str, Any]:
    """Open-to-first-diagnostics over `opens` texts never linted (the edited
    number differs in each), one server, each open divided by a bare parse
    timed just before and after it (the load of a shared machine changes
    between runs, less within a few seconds); and the same for a lint
    session's first lint in-process, in CPU seconds (`time.process_time`)."""
    import libcst as cst

    from torchlint.api import session

    def variant(k: int) -> str:
        return case.text.replace(EDIT_MARK, EDIT_MARK.replace("0.01", f"0.{k + 2:02d}"), 1)

    def parse_s(clock: Callable[[], float]) -> float:
        t = clock()
        cst.parse_module(case.source)
        return clock() - t

    client = Client(torchlint_server().cmd)
    wall: List[float] = []
    try:
        client.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": CAPABILITIES})
        client.notify("initialized", {})
        time.sleep(SETTLE_S)
        parse_s(time.perf_counter)
        for k in range(opens):
            uri = (ROOT / "bench" / f"_opened_{k}{case.suffix}").as_uri()  # never written
            before = parse_s(time.perf_counter)
            item = {"uri": uri, "languageId": _language(case), "version": 1, "text": variant(k)}
            sent = client.notify("textDocument/didOpen", {"textDocument": item})
            arrived, _ = client.wait(publish_for(uri, 1))
            wall.append((arrived - sent) / ((before + parse_s(time.perf_counter)) / 2))
            client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    finally:
        client.close()
    cpu: List[float] = []
    path = str(ROOT / "bench" / f"_opened{case.suffix}")
    session("warm.py").check("import torch\nx = torch.zeros(1)\n")
    for k in range(opens):
        before = parse_s(time.process_time)
        lints = session(path)
        t = time.process_time()
        lints.check(variant(opens + k))
        spent = time.process_time() - t
        cpu.append(spent / ((before + parse_s(time.process_time)) / 2))
    return {
        "opens": opens,
        "open_ratio_p50": statistics.median(wall),
        "open_ratio_min": min(wall),
        "open_ratio_max": max(wall),
        "open_cpu_ratio_p50": statistics.median(cpu),
    }


# -- in-process references -------------------------------------------------------------------------
def parse_times(source: str, repeats: int) -> List[float]:
    """Seconds of `repeats` bare LibCST parses (after one to warm up)."""
    import libcst as cst

    cst.parse_module(source)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        cst.parse_module(source)
        times.append(time.perf_counter() - t)
    return times


def breakdown(case: Case, repeats: int) -> Dict[str, float]:
    """Where a lint's time goes, in-process (median ms): a cold lint's stages
    (parse, facts, rules, positions and fixes), an incremental edit's whole
    lint and its re-parse alone (the rest of an edit is the facts and rules
    over the whole module, and positions and fixes of new statements)."""
    import gc

    import libcst as cst

    from torchlint.analysis import Analysis
    from torchlint.api import session
    from torchlint.config import Settings
    from torchlint.engine.checker import checked
    from torchlint.engine.pipeline import _findings

    source, path = case.source, "train.py"
    enabled = Settings().enabled_for(path)
    from torchlint.source.reparse import reparse

    stages: Dict[str, List[float]] = {
        k: [] for k in ("parse", "facts", "rules", "positions_fixes", "edit", "edit_reparse")
    }
    line, character = edit_at(source)
    lines = source.split("\n")
    lints = session(path)
    lints.check(source)
    for i in range(repeats):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            module = cst.parse_module(source)
            t1 = time.perf_counter()
            Analysis(module, path, source)
            t2 = time.perf_counter()
            reports, problems, _ = checked(module, source, path, enabled)  # facts again, then the rules
            t3 = time.perf_counter()
            _findings(module, source, path, reports, list(problems))
            t4 = time.perf_counter()
        finally:
            gc.enable()
        stages["parse"].append(t1 - t0)
        stages["facts"].append(t2 - t1)
        stages["rules"].append((t3 - t2) - (t2 - t1))
        stages["positions_fixes"].append(t4 - t3)
        edited = list(lines)
        edited[line] = edited[line][:character] + new_digits(i) + edited[line][character + 2 :]
        new = "\n".join(edited)
        t = time.perf_counter()
        reparse(lints.state.parsed, new)  # alone, leaving the session as it was
        stages["edit_reparse"].append(time.perf_counter() - t)
        t = time.perf_counter()
        lints.check(new)
        stages["edit"].append(time.perf_counter() - t)
    return {f"{k}_ms": statistics.median(v) * 1000 for k, v in stages.items()}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES), help="script sizes in lines")
    parser.add_argument("--no-notebook", action="store_true")
    parser.add_argument("--repeats", type=int, default=30, help="edits per file and server (at most 98)")
    parser.add_argument(
        "--big-repeats", type=int, default=10, help="edits per server on files over 5,000 lines (seconds each)"
    )
    parser.add_argument("--parse-repeats", type=int, default=5)
    parser.add_argument("--no-ruff", action="store_true")
    parser.add_argument("--breakdown", action="store_true", help="torchlint's stages, in-process")
    parser.add_argument(
        "--opens", type=int, default=0, help="also open N texts never linted, each against a parse timed beside it"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cases = [script_case(n) for n in args.sizes] + ([] if args.no_notebook else [notebook_case()])
    servers = [torchlint_server()]
    if not args.no_ruff:
        ruff = ruff_server()
        if ruff is None:
            print("ruff not found (pip install -e '.[bench]'): torchlint only", file=sys.stderr)
        else:
            servers.append(ruff)
    results: List[Dict[str, Any]] = []
    for case in cases:
        # The parse is timed before and after the servers run (the median of
        # both): on a shared machine the load changes between them.
        parses = parse_times(case.source, args.parse_repeats)
        row: Dict[str, Any] = {"case": case.name, "lines": case.lines}
        for server in servers:
            row[server.name] = run_server(server, case, args.big_repeats if case.lines > 5000 else args.repeats)
        parses += parse_times(case.source, args.parse_repeats)
        row["parse_ms"] = statistics.median(parses) * 1000
        if args.opens:
            row["torchlint_opens"] = open_ratios(case, args.opens)
        if args.breakdown:
            row["torchlint_breakdown"] = breakdown(case, max(3, args.parse_repeats))
        results.append(row)
        if not args.json:
            _print_row(row, [s.name for s in servers])
    meta = {"cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    if args.json:
        print(json.dumps({"results": results, **meta}, indent=2))
    else:
        print(f"{meta['cpus']} CPUs, load average {meta['loadavg_1m']}")
    return 0


def _print_row(row: Dict[str, Any], servers: List[str]) -> None:
    parse = row["parse_ms"]
    print(f"{row['case']} ({row['lines']} lines of Python): bare LibCST parse {parse:.0f} ms")
    for name in servers:
        r = row[name]
        print(
            f"  {name:9} open {r['open_ms']:6.0f} ms | edit p50 {r['edit_p50_ms']:6.0f} ms "
            f"({r['edit_p50_ms'] / parse:.2f}x parse), p95 {r['edit_p95_ms']:6.0f} ms "
            f"({r['edit_p95_ms'] / parse:.2f}x) | fix-all {r['fix_all_ms']:6.0f} ms | {r['findings']} diagnostics"
            + (f" | reopen {r['reopen_ms']:.0f} ms" if "reopen_ms" in r else "")
        )
    if "torchlint_opens" in row:
        o = row["torchlint_opens"]
        print(
            f"  torchlint {o['opens']} opens / parse beside each: median {o['open_ratio_p50']:.2f}x "
            f"({o['open_ratio_min']:.2f}-{o['open_ratio_max']:.2f}); in-process CPU {o['open_cpu_ratio_p50']:.2f}x"
        )
    if "torchlint_breakdown" in row:
        b = row["torchlint_breakdown"]
        print("  torchlint in-process: " + ", ".join(f"{k[:-3]} {v:.0f} ms" for k, v in b.items()))


if __name__ == "__main__":
    sys.exit(main())
