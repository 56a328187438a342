"""Code generation of LibCST nodes without positions: the text of a module or of
one statement, as the parse read it (the analysis's statement rows, the
incremental parse's statement code, the fix renderer's base)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import ContextManager, Optional

import libcst as cst
from libcst._nodes.internal import CodegenState

NO_RECORD = nullcontext()


class PlainCodegen(CodegenState):
    """LibCST's code generation, the same tokens, without the generator-based
    context manager LibCST enters for every node's syntactic position (which
    the plain state ignores anyway): about a third of the codegen's cost."""

    def record_syntactic_position(  # type: ignore[override]
        self,
        node: cst.CSTNode,
        *,
        start_node: Optional[cst.CSTNode] = None,
        end_node: Optional[cst.CSTNode] = None,
    ) -> ContextManager[None]:
        return NO_RECORD
