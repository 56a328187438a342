"""Test-only: a fixed script that runs but never calls h.emit()."""
print("done, but no metrics line")
