"""A textual pre-check: skip the analysis of files that cannot matter.

Every rule (RULES.md) needs something PyTorch-shaped to fire: a torch import
or name, a model (`torch.nn`, `from_pretrained`, `timm`, Lightning), a
DataLoader or a name containing "loader", a device (`cuda`, `device`, a
`"mps"`/`"xpu"` string, a `.to(...)`/`.cpu()` move), a tokenizer's
`return_tensors`, a training step (`.backward()`, `.step()`), a host sync
(`.item()`, `.tolist()`, `.numpy()`), a tensor, a no-grad region, or a batch
size (`batch`, `bs`). A file containing none of these words can give no
finding but TL000, so `engine.check_source` does not build its facts or run
any rule for it.

TL000 is still reported for such a file, exactly as before: the file is
checked with CPython's parser (about 12x cheaper than the LibCST parse); only
when that fails does the full parse run, so the TL000 finding (message,
position) is identical to the full path's. The one difference: a file
that CPython accepts but LibCST cannot parse (syntax newer than LibCST
supports) and that mentions nothing above gets no TL000 on the fast path.

The words are deliberately broad: a false "could matter" only costs time,
a false "cannot matter" would lose findings. A rule whose findings can come
from other text declares `TRIGGERS = r"<regex>"` on its class; the engine
adds it to the pattern (`pattern_for`). A rule may also narrow it: its
`may_report(text, project)` (torchlint/rules/base.py) is a necessary
condition for it to report; a file on which no enabled rule may report is
only checked for syntax, as above (torchlint/engine/pipeline.py: a default run, whose
one stable analysis rule is TL303, analyses only files that may call a
DataLoader). tests/test_precheck.py checks that
every rule's examples, the seeds and the fixtures give the same findings with
and without the pre-check.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Pattern, Tuple

# Case-insensitive. Method names need a leading dot (line continuations allowed)
# so that the English word "to" in a comment does not count.
_WORDS = (
    r"torch",  # imports and qualified names: torch, torchvision, pytorch_lightning ...
    r"cuda",  # .cuda(), "cuda", torch.cuda
    r"['\"](?:mps|xpu)",  # device strings
    r"device",  # device=, torch.device, device variables
    r"loader",  # DataLoader, train_loader, ...
    r"pretrained",  # from_pretrained
    r"timm",
    r"lightning",
    r"accelerat",  # accelerate / accelerator
    r"return_tensors",  # tokenizer(..., return_tensors="pt")
    r"tensor",  # Tensor, TensorDataset, as_tensor
    r"backward",
    r"no_grad|inference_mode|grad_enabled",
    r"batch",  # batch_size, batch
    r"\bbs\b",
    r"\.[\s\\]*(?:to|cpu|item|tolist|numpy|step|half|eval|train)\b",
)
PATTERN = "|".join(f"(?:{w})" for w in _WORDS)


@lru_cache(maxsize=64)
def _compile(extra: Tuple[str, ...]) -> Pattern[str]:
    return re.compile("|".join((PATTERN,) + tuple(f"(?:{e})" for e in extra)), re.IGNORECASE)


def pattern_for(rule_classes: Iterable[type] = ()) -> Pattern[str]:
    """The pre-check pattern, widened by the `TRIGGERS` of the given rules."""
    extra = tuple(sorted({t for t in (getattr(r, "TRIGGERS", None) for r in rule_classes) if t}))
    return _compile(extra)


def could_matter(text: str, rule_classes: Iterable[type] = ()) -> bool:
    """False only when no rule can report anything but TL000 in `text`."""
    return pattern_for(rule_classes).search(text) is not None
