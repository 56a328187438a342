"""Test-only: a fixed script that crashes."""
raise SystemExit("boom: this fixture script crashed")
