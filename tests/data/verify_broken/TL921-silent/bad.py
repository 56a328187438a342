"""Test-only fake fixture script: prints the metrics a real run would, per window, without torch."""
import json
import os

from torchlint.verify.harness import MARK

PASSES = [p for p in os.environ.get("TORCHLINT_VERIFY_PASSES", "timing").split(",") if p]
BY_PASS = {'timing': {'wall_s': 1.0, 'samples_per_s': 100.0}}
windows = {p: dict({"samples": 100, "steps": 10}, **BY_PASS.get(p, {})) for p in PASSES}
metrics = {"device": "cuda", "passes": windows, "smoke": os.environ.get("TORCHLINT_SMOKE") == "1"}
print("some output the script prints")
print(MARK + json.dumps(metrics, sort_keys=True))
