"""Per-step costs of every fixture script, measured without a GPU, for
`torchlint verify --plan`.

``python -m torchlint.verify.costs [--rules TL104,TL401] [--fixtures DIR]``
runs each script once in *cost mode* (TORCHLINT_VERIFY_COST=1), at its full
GPU size, on this machine's CPU, with the GPU replaced by PyTorch's ``meta``
device: a meta tensor has a shape and no data, so every operation the GPU would
run costs only its dispatch here, while the work the script leaves on the CPU
(building datasets, a model that was never moved, CPU-side augmentation,
host-side random numbers, DataLoader workers) runs for real. It writes
``<fixture>/cost.json`` per fixture with, per script:

- ``setup_s``: from the harness's creation to the first warm-up step;
- ``step_s``: wall time of one step here (the fastest seen);
- ``host_s``: that time minus the time spent inside meta operations, i.e. the
  CPU-side work of a step;
- ``device_ops`` / ``device_flops``: operations on the GPU tensors per step and
  their FLOPs (``torch.utils.flop_counter``'s formulas: matmuls, convolutions,
  attention); ``host_ops`` / ``host_flops`` the same for CPU tensors;
- ``device_conv_flops``: the part of ``device_flops`` in convolutions (cuDNN
  runs them in TF32 by default, matmuls in FP32);
- ``syncs_per_step``: ``.item()`` / ``float()`` / ``int()`` / ``bool()`` calls on
  GPU tensors (each would synchronize);
- ``samples_per_step``;
- ``cpu_flops_per_s``: the FP32 matmul rate of the thread that measured;
- ``optimizer``: whether the script creates a ``torch.optim`` optimizer (the
  first one imports ``torch._dynamo``, which cost mode imports beforehand, so
  that ``setup_s`` is the script's own work; ``dynamo_import_s`` is what that
  import took here);
- ``tail_s``: from the last step to ``h.emit()``; ``profiled``: whether a
  profiler was recording the steps (its teardown then grows with them), and
  ``steps_run``: the steps this run made.

A bad script that crashes on a GPU (meta.toml ``bad_error``) is not run: its
entry is ``{"crashes": <error>}``.

The script runs on one CPU thread (``torch.set_num_threads(1)``): a shared
machine's other load cannot inflate it through thread contention, and
:mod:`torchlint.verify.plan` scales the CPU-side matmul/convolution FLOPs to
the GPU machine's cores itself.

:mod:`torchlint.verify.plan` turns these into GPU-machine estimates.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from torchlint.verify.cost_mode import COST_FILE, enter_cost_mode

# ---------------------------------------------------------------------------
# The command that measures every fixture


def measure_fixture(fx: Any, timeout: float = 900.0) -> Dict[str, Any]:
    from torchlint.verify import fixture_meta, script_runs

    out: Dict[str, Any] = {"rule": fx.rule, "scripts": {}}
    for which in fixture_meta.SCRIPTS:
        if which == "bad" and fx.bad_error:  # it stops at its first step on a GPU: plan.py times that
            out["scripts"][which] = {"crashes": fx.bad_error}
            continue
        run = script_runs.run_script(
            fx,
            which,
            ("timing",),
            0,
            smoke=False,
            timeout=timeout,
            env={"TORCHLINT_VERIFY_COST": "1"},
            launcher=[sys.executable, "-m", "torchlint.verify.costs", "--run"],
        )
        if run.metrics and "cost" in run.metrics:
            entry = dict(run.metrics["cost"])
            entry["process_s"] = round(run.seconds, 3)
        else:
            entry = {"error": run.error or "no cost line"}
        out["scripts"][which] = entry
    import torch

    out["measured_on"] = {
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": str(torch.__version__),
        "python": platform.python_version(),
    }
    return out


def load(fixture_dir: Path) -> Optional[Dict[str, Any]]:
    path = fixture_dir / COST_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_in_cost_mode(script: str) -> None:
    """Enter cost mode, then run the fixture script as __main__."""
    import runpy

    import torch

    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    enter_cost_mode(torch)
    runpy.run_path(script, run_name="__main__")


def main(argv: Optional[Sequence[str]] = None) -> int:
    import argparse

    from torchlint.verify import fixture_meta

    parser = argparse.ArgumentParser(prog="python -m torchlint.verify.costs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", default="", help="comma-separated rule codes (default: every fixture)")
    parser.add_argument("--fixtures", type=Path, default=None)
    parser.add_argument("--run", metavar="SCRIPT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        run_in_cost_mode(args.run)
        return 0
    rules = [r for r in args.rules.split(",") if r.strip()]
    fixtures = fixture_meta.discover(args.fixtures or fixture_meta.default_fixtures_dir(), rules)
    failed = 0
    for fx in fixtures:
        t0 = time.perf_counter()
        data = measure_fixture(fx)
        (fx.path / COST_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        errors = [f"{w}: {s['error']}" for w, s in data["scripts"].items() if "error" in s]
        failed += bool(errors)
        print(
            f"{fx.rule}: {time.perf_counter() - t0:.1f} s" + (f"  ERROR {'; '.join(errors)}" if errors else ""),
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
