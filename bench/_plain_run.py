"""Run a script as `python SCRIPT ARGS...` does, with Python's, NumPy's and
torch's generators seeded to 0 first, as `torchlint run` seeds them: the
plain side of bench/run_overhead.py (both runs draw the same data).

    python bench/_plain_run.py SCRIPT [ARGS...]
"""

import os
import random
import runpy
import sys


def main() -> None:
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)
    random.seed(0)
    try:
        import numpy

        numpy.random.seed(0)
    except ImportError:
        pass
    import torch

    torch.manual_seed(0)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
