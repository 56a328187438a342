"""Test-only fake fixture script: prints the metrics a real run would, per pass, without torch."""
import json
import os

from torchlint.verify.harness import MARK

PASS = os.environ.get("TORCHLINT_VERIFY_PASS", "timing")
BY_PASS = {"timing": {"wall_s": 1.0, "samples_per_s": 100.0}}
metrics = {"device": "cuda", "samples": 100, "pass": PASS, "smoke": os.environ.get("TORCHLINT_SMOKE") == "1"}
metrics.update(BY_PASS.get(PASS, {}))
print("some output the script prints")
print(MARK + json.dumps(metrics, sort_keys=True))
