"""`github`: GitHub Actions workflow commands, one annotation per finding.

Escaping follows the runner's rules: in the message `%`, CR and LF become
`%25`, `%0D`, `%0A`; in properties `:` and `,` are escaped too. An annotation
has no place for a notebook cell: a notebook finding's message starts with
it (`cell 3: TL104 ...`), and its line and column count within that cell.
"""

from __future__ import annotations

from torchlint.report import ReportData, cell_prefix
from torchlint.rules import severity


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(data: ReportData) -> str:
    out = []
    for f in data.findings:
        level = severity(f.code)
        props = [
            ("title", f"torchlint ({f.code})"),
            ("file", data.relpath(f.path).replace("\\", "/")),
            ("line", str(f.row)),
            ("col", str(f.column)),
            ("endLine", str(f.end_row)),
            ("endColumn", str(f.end_column)),
        ]
        joined = ",".join(f"{k}={escape_property(v)}" for k, v in props)
        out.append(f"::{level} {joined}::{escape_data(f'{cell_prefix(f)}{f.code} {f.message}')}\n")
    return "".join(out)
