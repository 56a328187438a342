#!/usr/bin/env python3
"""The project pass's cost next to a bare LibCST parse, on the installed
torch's nn/, optim/ and utils/data/ sources (the set bench/bench.py uses).

    python bench/project_pass.py [--repeat 3]

In one process, CPU seconds (`time.process_time`, best of --repeat), files
already read into memory:

  libcst parse     `libcst.parse_module` of every file (the linter's floor)
  ast parse        `ast.parse` of every file (what the project pass parses with)
  project pass     `summarize` of every file: ast parse + the summary walk
  index, cached    `build_index` answering every summary from a warm cache
  questions        every class of the set asked `class_kind`, every function
                   `returns` and `guards_grad`, from one file's view
  one file's run   `build_index` of `nn/modules/module.py` alone, the set
                   copied to a project folder, summaries cached: what it
                   imports, and (the second row) the files importing it too
                   (imports.py: the folder listed, each file's text tested)

and the ratio of the project pass to the LibCST parse.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench import count_lines, torch_sources  # noqa: E402


def best(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(max(1, repeat)):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    files = torch_sources()
    if not files:
        print("torch is not installed: nothing to measure", file=sys.stderr)
        return 2
    import libcst as cst

    from torchlint.analysis.project import ProjectIndex, summarize
    from torchlint.files.project_pass import build_index, summary_cache

    data: List[Tuple[str, bytes]] = [(str(p), p.read_bytes()) for p in files]
    texts = [(p, d.decode("utf-8")) for p, d in data]
    print(f"{len(files)} files, {count_lines(files):,} lines (torch nn/, optim/, utils/data/)")

    def parse_libcst() -> None:
        for _, text in texts:
            cst.parse_module(text)

    def parse_ast() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _, text in texts:
                ast.parse(text)

    def project_pass() -> None:
        for _, text in texts:
            summarize(text)

    rows = [
        ("libcst parse", best(args.repeat, parse_libcst)),
        ("ast parse", best(args.repeat, parse_ast)),
        ("project pass", best(args.repeat, project_pass)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        cache = summary_cache(tmp)
        index = build_index(data, (), cache)  # fills the cache
        rows.append(("index, cached", best(args.repeat, lambda: build_index(data, (), summary_cache(tmp)))))
    names = []
    for path, _ in data:
        summary = index.summary(path)
        assert summary is not None
        module = "torch." + ".".join(Path(path).with_suffix("").parts[-3:])
        names += [(module + "." + c.name, True) for c in summary.classes]
        names += [(module + "." + f.name, False) for f in summary.functions]

    def questions() -> None:
        v = ProjectIndex(index.summaries(), ()).view(data[0][0])  # fresh memos
        for name, is_class in names:
            if is_class:
                v.class_kind(name)
            else:
                v.returns(name)
                v.guards_grad(name)

    rows.append((f"questions ({len(names)} names)", best(args.repeat, questions)))
    rows += one_file_run(data, args.repeat)
    width = max(len(r[0]) for r in rows)
    floor = rows[0][1]
    for name, secs in rows:
        print(f"{name:<{width}}  {secs:7.2f} s CPU  {secs / floor:5.2f}x the libcst parse")
    return 0


def one_file_run(data: List[Tuple[str, bytes]], repeat: int) -> List[Tuple[str, float]]:
    """A run over one file of the set, copied to a project folder (installed
    code is never searched for importers), its imports then its importers read."""
    from torchlint.analysis.project.imports import MAX_IMPORTERS, imported_summaries
    from torchlint.analysis.project.kinds import ModuleSummary
    from torchlint.analysis.project.summary import summarize
    from torchlint.files.project_pass import build_index, summary_cache

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        copied: List[Tuple[str, bytes]] = []
        for path, contents in data:
            parts = Path(path).parts
            dest = project.joinpath(*parts[len(parts) - 1 - parts[::-1].index("torch") :])
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(contents)
            copied.append((str(dest), contents))
        one = [(p, d) for p, d in copied if p.endswith("nn/modules/module.py")]
        build_index(one, [], summary_cache(tmp), str(project))  # fills the cache
        cache = summary_cache(tmp)
        run = {p: summarize(d.decode("utf-8")) for p, d in one}

        def read(path: str) -> Optional[ModuleSummary]:
            found = cache.get(Path(path).read_bytes(), path)
            return found if isinstance(found, ModuleSummary) else None

        def search(importers: int) -> Callable[[], object]:
            return lambda: imported_summaries(run, str(project), read, importers=importers)

        both = imported_summaries(run, str(project), read)
        return [
            ("one file's run, its imports", best(repeat, search(0))),
            (f"  and its importers ({len(both)} files read)", best(repeat, search(MAX_IMPORTERS))),
        ]


if __name__ == "__main__":
    raise SystemExit(main())
