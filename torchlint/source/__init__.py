"""The source stage: a file's bytes to Python text (decode, notebook cells),
the guarded LibCST parse (and the incremental re-parse of an edited text),
code generation, text edits, and the suppression comments read (suppression)
and written (noqa_comments). Knows nothing of the analysis or the rules."""
