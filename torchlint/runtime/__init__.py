"""`torchlint run`: the user's own script, run on a simulated GPU with real values.

The pieces, one job each (docs/run.md says what is simulated and what is not):

- `accelerator`: the simulated device: marks on real CPU tensors, `torch.cuda` answers, modules moved in place;
- `mode`: the torch function mode that carries the marks through every operation;
- `observers`: what is watched for (mismatches, host reads, moves, graphs, loaders), at the user's lines;
- `sites`: which files are the user's, and the line and column of an occurrence;
- `steps`: the clocks a step is counted on, and `--steps`;
- `launch`: running a script, `-m` module or notebook as Python would;
- `sandbox`: no network, seeded generators, synthetic torchvision data;
- `session`: one run, from the sandbox to the `RunReport`;
- `observations`: the plain data of a report;
- `report`: observations as findings (with a `runtime` object) in `check`'s output formats;
- `compare`: the run set against the static findings of the files it ran.

On a real GPU (`--device cuda`, experimental): `real` (the run put together), `watch`
(the torch function mode on real tensors), `hooks` (the wrapped calls), `timing` (the
host's waits, step times, utilization, the summary line), `cuda` (the CUDA device and
NVML: the only part that needs a GPU).

Importing this package imports no torch: `run_script`, `run_module`, `run`
import it when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from torchlint.runtime.observations import Clock, Observation, RunReport, Site, Status

if TYPE_CHECKING:
    from torchlint.runtime.launch import Target
    from torchlint.runtime.session import RunOptions


def run(target: "Target", options: "RunOptions") -> RunReport:
    from torchlint.runtime.session import run as run_target

    return run_target(target, options)


def run_script(path: str, argv: List[str] = [], **options: Any) -> RunReport:  # noqa: B006 (read only)
    """Run a script (or a notebook, by its .ipynb path) with `argv`; options as
    session.RunOptions: steps, timeout, fake_data, lines, isolate, device ("sim" or "cuda")."""
    from torchlint.runtime.session import run_script as run_file

    return run_file(path, argv, **options)


def run_module(name: str, argv: List[str] = [], **options: Any) -> RunReport:  # noqa: B006 (read only)
    """Run `python -m name argv...` on the simulated accelerator."""
    from torchlint.runtime.session import run_module as run_name

    return run_name(name, argv, **options)


__all__ = ["Clock", "Observation", "RunReport", "Site", "Status", "run", "run_module", "run_script"]
