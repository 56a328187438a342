"""One fixture script under `torchlint run`, in its own process, for
`torchlint verify --mechanism`.

``python -m torchlint.verify.mechanism_run SCRIPT OUT.json`` runs SCRIPT on
the simulated GPU (:mod:`torchlint.runtime`) at its smoke sizes, with the
harness in mechanism mode (it instruments nothing: what the run observes is
the script's own doing), and writes what the run saw to OUT.json: how it
ended, its steps and every observation (reported or not) with its counts.
The script's own output goes to this process's stdout and stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict

from torchlint.verify.harness import MECHANISM_ENV

SCRIPT_ARGS = ("--smoke",)


def report_dict(report: Any, root: str) -> Dict[str, Any]:
    """A RunReport as plain JSON data, paths relative to `root` (the fixture folder),
    with the codes a run reports only when they recur per step."""
    from torchlint.runtime.observers import PER_STEP_CODES

    error = report.error
    return {
        "per_step_codes": sorted(PER_STEP_CODES),
        "status": str(report.status),
        "exit_code": report.exit_code,
        "steps": report.steps,
        "clock": str(report.clock),
        "seconds": round(report.seconds, 3),
        "device_used": report.device_used,
        "error": None if error is None else {"type": error.type, "message": error.message[:500]},
        "observations": [
            {
                "code": o.code,
                "where": o.site.where(root),
                "count": o.count,
                "steps_seen": o.steps_seen,
                "steps": o.steps,
                "clock": str(o.clock),
                "per_step": o.per_step,
                "reported": o.reported,
                "crash": o.crash,
                "message": o.message,
            }
            for o in report.observations
        ],
    }


def main(script: str, out: str) -> int:
    os.environ[MECHANISM_ENV] = "1"
    from torchlint import runtime

    report = runtime.run_script(script, list(SCRIPT_ARGS))
    data = report_dict(report, os.path.dirname(os.path.abspath(script)))
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m torchlint.verify.mechanism_run SCRIPT OUT.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
