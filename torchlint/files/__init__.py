"""The files stage: which files a run lints (discovery), reading them once,
the project index over them, the results cache, the process pool, writing
fixes atomically, and `--watch`. What happens to one file's contents is
torchlint.engine."""
