"""Longer fuzzing run than the CI tests: `python scripts/fuzz.py --examples 5000`
(add `--seconds 120` to bound each generator's time, `--only KIND` to run one).

Four generators: Hypothesmith programs from Python's grammar ("grammar");
mutated real code, i.e. every rule's examples plus ../shared/seeds/blocks when
present ("mutated"); deeply nested programs, random constructs to random
depths up to 2,500 ("deep"); and file bytes with random coding cookies, BOMs,
newline styles and raw bytes, through lint_bytes / fix_bytes ("bytes").
For each program: lint must not raise; findings lie inside the file; a fix's
output must parse, keep every comment and be a fixed point.
Prints programs tried and failures found; failing programs are written to
--out (default: a torchlint-fuzz-failures folder in the temp directory).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import hypothesmith  # noqa: E402
from fuzzlib import SEEDS, bytes_program, check_bytes, check_program, corpus, deep_program, mutate  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1000, help="programs per generator")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    ap.add_argument("--only", choices=["grammar", "mutated", "deep", "bytes"], default=None)
    ap.add_argument("--seconds", type=float, default=None, help="stop each generator after this long")
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "torchlint-fuzz-failures"))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    seed = args.seed if args.seed is not None else int(time.time())
    failures = []
    tried = {"grammar": 0, "mutated": 0, "deep": 0, "bytes": 0}

    def run_one(kind: str, src) -> None:
        tried[kind] += 1
        try:
            problem = check_bytes(src) if kind == "bytes" else check_program(src)
        except BaseException as exc:  # the property: nothing may raise
            problem = "raised " + "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if problem:
            failures.append((kind, problem, src))
            print(f"FAIL [{kind}] {problem}", flush=True)

    start = time.time()
    if args.only in (None, "mutated"):
        rnd = random.Random(seed)
        snippets = corpus(SEEDS)
        t0 = time.time()
        for _ in range(args.examples):
            if args.seconds and time.time() - t0 > args.seconds:
                break
            run_one("mutated", mutate(rnd.choice(snippets), rnd, rounds=4))
        print(f"mutated: {tried['mutated']} programs in {time.time() - t0:.0f} s", flush=True)
    if args.only in (None, "bytes"):
        rnd = random.Random(seed)
        snippets = corpus(SEEDS)
        t0 = time.time()
        for _ in range(args.examples):
            if args.seconds and time.time() - t0 > args.seconds:
                break
            src = mutate(rnd.choice(snippets), rnd, rounds=2) if rnd.random() < 0.5 else rnd.choice(snippets)
            run_one("bytes", bytes_program(src, rnd))
        print(f"bytes: {tried['bytes']} programs in {time.time() - t0:.0f} s", flush=True)
    if args.only in (None, "deep"):
        # Deeply nested programs; each is saved first, so a hard crash (the
        # process dying) leaves its program behind in --out/last-deep.py.txt.
        rnd = random.Random(seed)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        for _ in range(args.examples):
            if args.seconds and time.time() - t0 > args.seconds:
                break
            src = deep_program(rnd)
            (out / "last-deep.py.txt").write_text(src, encoding="utf-8")
            run_one("deep", src)
        (out / "last-deep.py.txt").unlink()
        print(f"deep: {tried['deep']} programs in {time.time() - t0:.0f} s", flush=True)
    if args.only in (None, "grammar"):
        t0 = time.time()
        chunk = 100
        while tried["grammar"] < args.examples and not (args.seconds and time.time() - t0 > args.seconds):

            @settings(
                max_examples=min(chunk, args.examples - tried["grammar"]),
                deadline=None,
                database=None,
                derandomize=False,
                suppress_health_check=list(HealthCheck),
            )
            @given(hypothesmith.from_grammar())
            def grammar(src):
                run_one("grammar", src)

            before = tried["grammar"]
            grammar()
            if tried["grammar"] == before:
                break
        print(f"grammar: {tried['grammar']} programs in {time.time() - t0:.0f} s", flush=True)
    elapsed = time.time() - start
    total = sum(tried.values())
    print(
        f"seed {seed}: {total} programs tried ({tried['grammar']} grammar, {tried['mutated']} mutated, {tried['deep']} deep, {tried['bytes']} bytes) "
        f"in {elapsed:.0f} s; {len(failures)} failures"
    )
    if failures:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for i, (kind, problem, src) in enumerate(failures):
            body = src if isinstance(src, bytes) else src.encode("utf-8", "surrogatepass")
            (out / f"{kind}-{i:04d}.py.txt").write_bytes(f"# {problem}\n".encode() + body)
        print(f"failing programs written to {out}/")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
