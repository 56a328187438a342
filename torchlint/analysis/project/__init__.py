"""The project read as a whole: a cheap first pass over every file of a run
(`summary.py`, Python's `ast`), and the index the per-file analysis asks
(`index.py`): what a class imported from another file is, whether a
project's decorator or context manager turns autograd off, what a project
function returns, moves or trains. torchlint/files/project_pass.py builds it
from a run's files (summaries cached by content) or keeps a workspace's up to
date.

Imports nothing heavy (no LibCST): a run answered from the cache builds the
index too."""

from torchlint.analysis.project.index import FileView, ProjectIndex
from torchlint.analysis.project.kinds import ClassKind, Dependency, ModuleSummary, Question, ValueKind
from torchlint.analysis.project.summary import summarize

__all__ = ["ClassKind", "Dependency", "FileView", "ModuleSummary", "ProjectIndex", "Question", "ValueKind", "summarize"]
