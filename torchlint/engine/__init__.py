"""The engine: one file's contents through the pipeline (pipeline.py):
parse, facts and rules (checker.py), suppression, fixes (node_edits.py,
fix_loop.py), the result (outcome.py); also the textual pre-check, the
incremental lints of a changing document, and `--add-noqa`."""
