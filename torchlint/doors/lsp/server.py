"""The language server: diagnostics that carry their fix, code actions that hand it back.

Linting runs in-process through a lint session per document
(`torchlint.api.session`: incremental parse, results kept per text; each lint
equals a cold one), on a worker thread, so the event loop keeps answering
requests while a file is being linted. Scheduling keeps it never behind the
user: changes are debounced per document (briefly: a lint is cancelled between
stages as soon as a newer version arrives, and runs again on the newest text),
and a result is published only if the document is still at the version it was
linted at. Code actions, fix-all and the commands read the kept lint of the
current text; they lint only text not linted yet.

The handlers that route requests here are features.py; the stdio transport
transport.py; the LSP shapes of findings shapes.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from lsprotocol import types
from pygls.exceptions import FeatureRequestError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from torchlint import __version__
from torchlint.api import Cancelled, FileResult, Session, session
from torchlint.config import CONFIG_FILES, ConfigError, Settings, load_settings, preview_from_env
from torchlint.doors.lsp.commands import Command, organize_noqa, target_of
from torchlint.doors.lsp.convert import (
    FIX_ALL_KIND,
    UTF16,
    ClientSettings,
    TextLines,
    document_lines,
    kind_wanted,
    overlaps,
    parse_client_settings,
    settings_section,
)
from torchlint.doors.lsp.disk_results import DiskResults
from torchlint.doors.lsp.hover import code_at, rule_markdown
from torchlint.doors.lsp.project import WorkspaceProject, warm_imports
from torchlint.doors.lsp.shapes import ignore_comment_edit, to_diagnostic, to_text_edit
from torchlint.doors.lsp.transport import TorchlintProtocol
from torchlint.findings import Applicability
from torchlint.rules import severity as rule_severity
from torchlint.source.edits import common_prefix, common_suffix, diff_edits

log = logging.getLogger("torchlint.lsp")


# Editors send a change per keystroke; a lint already running on an older
# version stops at its next checkpoint, so a short debounce suffices (it
# coalesces the several changes one editor command sends).
DEBOUNCE_S = 0.01


FIX_ALL_TITLE = "torchlint: Fix all auto-fixable problems"


# Texts longer than this get one edit over the changed span instead of a line diff.
DIFF_LINES = 400


@dataclass(frozen=True)
class _Lint:
    version: Optional[int]
    text: str
    settings: Settings
    result: FileResult
    # Kept on disk from an earlier run: shown at once, then linted again
    # against the workspace as it is now.
    provisional: bool = False


@dataclass
class _Config:
    signature: tuple
    settings: Settings


class TorchlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "torchlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=TorchlintProtocol,
        )
        self.client_settings = ClientSettings()
        self.debounce_s = DEBOUNCE_S
        self._configs: Dict[Tuple[str, ClientSettings], _Config] = {}
        self._lints: Dict[str, _Lint] = {}
        self._timers: Dict[str, asyncio.TimerHandle] = {}
        self._tasks: Dict[str, "asyncio.Future[Any]"] = {}
        self._running: set = set()
        self._published: Dict[str, Optional[int]] = {}
        self._dirty: set = set()
        self._shown_errors: set = set()
        self._logged_problems: Dict[str, Tuple[str, ...]] = {}
        # One worker: lints run one after another, off the event loop.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchlint-lint")
        # Lints asked for by a request (a code action on text not linted yet), off
        # the event loop and not queued behind a long background lint.
        self._request_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchlint-request")
        self._waiters: Dict[str, List["asyncio.Future[None]"]] = {}
        self._bg_linting: Optional[Tuple[str, str]] = None  # (uri, text) the background worker is on
        self._sessions: Dict[str, Session] = {}
        self._disk = DiskResults()
        self._persist: set = set()  # documents whose next lint is kept on disk (opened, saved)
        # The workspace as one project (torchlint/doors/lsp/project.py), warmed on the lint thread.
        self.project_index = WorkspaceProject()

    # -- errors -------------------------------------------------------------------------------
    def report_server_error(self, error: Exception, source: Any) -> None:
        # Out-of-band errors go to the log, not to a pop-up on every keystroke;
        # a failed request already answered the client with its error.
        if source is FeatureRequestError:
            return
        try:
            self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"torchlint: {error}"))
        except Exception:  # never let error reporting take the server down
            log.exception("could not report a server error")

    def show_error_once(self, message: str, key: Any = None) -> None:
        """Show `message` as an error pop-up once per `key` (for a broken
        configuration file: the files' signature, so it shows again only when
        a file changed, not on every re-read the editor triggers)."""
        if (message, key) in self._shown_errors:
            return
        self._shown_errors.add((message, key))
        log.warning("%s", message)
        self.window_show_message(types.ShowMessageParams(types.MessageType.Error, message))

    # -- settings -----------------------------------------------------------------------------
    def apply_client_settings(self, raw: Any) -> None:
        if raw is None or settings_section(raw) is None:
            return  # nothing for torchlint in there: keep the current settings
        settings, errors = parse_client_settings(raw)
        for message in errors:
            self.show_error_once(message, ("client settings", settings))
        if settings != self.client_settings:
            self.client_settings = settings
            self._configs.clear()

    @property
    def position_encoding(self) -> str:
        try:
            encoding = self.workspace.position_encoding
        except RuntimeError:
            return UTF16
        value = getattr(encoding, "value", encoding)
        return str(value or UTF16)

    def settings_for(self, path: Optional[str]) -> Settings:
        """The settings for a document: its folder's pyproject.toml [tool.torchlint]
        (re-read when any candidate pyproject.toml changes), then the client's
        settings. A bad configuration is shown once and linting goes on with
        the defaults (and the client's settings where those are valid)."""
        folder = os.path.dirname(path) if path else os.getcwd()
        cs = self.client_settings
        key = (folder, cs)
        signature = _pyproject_signature(folder)
        cached = self._configs.get(key)
        if cached is not None and cached.signature == signature:
            return cached.settings
        try:
            settings = load_settings(
                start=folder,
                select=cs.select,
                extend_select=cs.extend_select,
                ignore=cs.ignore,
                preview=cs.preview if cs.preview is not None else preview_from_env(),
            )
        except ConfigError as exc:
            self.show_error_once(f"torchlint: configuration error: {exc}; using the default settings", signature)
            try:
                settings = replace(
                    Settings(root=folder, preview=bool(cs.preview or preview_from_env())),
                    select=cs.select if cs.select is not None else Settings.select,
                    extend_select=cs.extend_select,
                    ignore=cs.ignore,
                ).validate()
            except ConfigError:
                settings = Settings(root=folder)
        self._configs[key] = _Config(signature, settings)
        return settings

    def config_changed(self) -> None:
        # Settings are read again; a configuration error already shown is shown
        # again only if its files changed (show_error_once's key).
        self._configs.clear()
        for uri in list(self.workspace.text_documents):
            self.schedule(uri, 0.0)

    # -- linting ------------------------------------------------------------------------------
    def schedule(self, uri: str, delay: Optional[float] = None, force: bool = False) -> None:
        """Lint `uri` after `delay` seconds (the debounce), replacing any pending lint.
        `force` lints and publishes even if this text was already published (save)."""
        if force:
            self._published.pop(uri, None)
            self._persist.add(uri)
        loop = asyncio.get_running_loop()
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        delay = self.debounce_s if delay is None else delay
        self._timers[uri] = loop.call_later(delay, self._start_lint, uri)

    def _start_lint(self, uri: str) -> None:
        self._timers.pop(uri, None)
        task = asyncio.ensure_future(self.lint_and_publish(uri))
        self._tasks[uri] = task
        task.add_done_callback(functools.partial(self._forget_task, uri))

    def _forget_task(self, uri: str, task: "asyncio.Future[Any]") -> None:
        if self._tasks.get(uri) is task:
            self._tasks.pop(uri, None)

    def document(self, uri: str):
        return self.workspace.text_documents.get(uri)

    async def lint_and_publish(self, uri: str) -> None:
        """Lint the document's current text and publish, unless it changed meanwhile.
        One lint per document at a time: a change that arrives during a lint
        marks the document dirty and the lint runs again on the newest text as
        soon as this one ends, so a burst of edits never queues stale lints."""
        if uri in self._running:
            self._dirty.add(uri)
            return
        self._running.add(uri)
        try:
            while True:
                self._dirty.discard(uri)
                await self._lint_once(uri)
                if uri not in self._dirty:
                    break
        finally:
            self._running.discard(uri)
            for waiter in self._waiters.pop(uri, []):
                if not waiter.done():
                    waiter.set_result(None)

    async def _lint_once(self, uri: str) -> None:
        doc = self.document(uri)
        if doc is None:
            return
        version, text = doc.version, doc.source
        path = _path_of(uri)
        try:
            settings = self.settings_for(path)
            done = self._lints.get(uri)
            kept = self._disk.get(path, text, settings) if done is None and path is not None else None
            if done is not None and done.text == text and done.settings == settings and not done.provisional:
                if self._published.get(uri) == version:
                    return  # already linted and published (a late debounce timer)
                lint = done  # linted already for a code action: publish that
            elif kept is not None:  # opened before: publish what was kept, then lint it in the project as it is now
                lint = _Lint(version, text, settings, kept, provisional=True)
                self._persist.discard(uri)
            else:
                loop = asyncio.get_running_loop()
                lint = await loop.run_in_executor(
                    self._executor,
                    self._background_lint,
                    uri,
                    self.session_for(uri, path, settings),
                    text,
                    settings,
                    version,
                )
        except Cancelled:  # a newer version arrived: lint that instead
            self._dirty.add(uri)
            return
        except Exception as exc:  # a bug here must not take the server down
            log.exception("linting %s failed", uri)
            self.window_log_message(
                types.LogMessageParams(types.MessageType.Error, f"torchlint: linting {uri} failed: {exc}")
            )
            return
        doc = self.document(uri)
        if doc is None:
            return  # closed meanwhile
        self._lints[uri] = lint
        if doc.version != version or doc.source != text:
            self._dirty.add(uri)  # changed meanwhile: lint the newer text next
            return
        self.log_problems(uri, lint.result)
        self.publish(uri, version, lint)
        if lint.provisional:
            self._dirty.add(uri)  # the other files may have changed since it was kept
        if uri in self._persist and path is not None:
            self._persist.discard(uri)
            self._executor.submit(self._disk.put, path, text, settings, lint.result)

    def _background_lint(
        self, uri: str, lint_session: Session, text: str, settings: Settings, version: Optional[int]
    ) -> _Lint:
        self._bg_linting = (uri, text)
        try:
            return self._lint_in_project(uri, lint_session, text, settings, version)
        finally:
            self._bg_linting = None

    def _lint_in_project(
        self, uri: str, lint_session: Session, text: str, settings: Settings, version: Optional[int]
    ) -> _Lint:
        """Lint `text` as part of the workspace, with this buffer in place of its file."""
        project = self.project_index.index_for(_path_of(uri), text)
        return _lint(lint_session, text, settings, version, self.stale_check(uri, version), project)

    def session_for(self, uri: str, path: Optional[str], settings: Settings) -> Session:
        """The document's lint session (a new one when its settings changed)."""
        name = path or "<untitled>"
        found = self._sessions.get(uri)
        if found is None or found.settings != settings or found.path != name:
            found = self._sessions[uri] = session(name, settings)
        return found

    def stale_check(self, uri: str, version: Optional[int]):
        """A function telling (from any thread) whether the document moved past `version`."""

        def stale() -> bool:
            doc = self.workspace.text_documents.get(uri)
            return doc is None or doc.version != version

        return stale

    async def current_lint_async(self, uri: str) -> Optional[_Lint]:
        """The lint of the document as it is now, never linting on the event loop:
        waits when the background worker is linting this very text (rather than
        linting it twice), else lints on the request worker (not queued behind
        other documents' background lints; the background lint then reuses the
        result). None if the document is not open."""
        loop = asyncio.get_running_loop()
        for _ in range(5):
            doc = self.document(uri)
            if doc is None:
                return None
            path = _path_of(uri)
            settings = self.settings_for(path)
            text = doc.source
            cached = self._lints.get(uri)
            if cached is not None and cached.text == text and cached.settings == settings and not cached.provisional:
                return cached
            if self._bg_linting == (uri, text):
                waiter = loop.create_future()
                self._waiters.setdefault(uri, []).append(waiter)
                await waiter
                continue
            break
        doc = self.document(uri)
        if doc is None:
            return None
        path = _path_of(uri)
        settings = self.settings_for(path)
        text, version = doc.source, doc.version
        lint_session = self.session_for(uri, path, settings)
        try:
            lint = await loop.run_in_executor(
                self._request_executor, self._lint_in_project, uri, lint_session, text, settings, version
            )
        except Cancelled:
            return None  # changed meanwhile: the client asks again for the new text
        doc = self.document(uri)
        if doc is None or doc.source != text:
            return None  # changed meanwhile: the client asks again for the new text
        self._lints[uri] = lint
        return lint

    def log_problems(self, uri: str, result: FileResult) -> None:
        problems = tuple(str(p) for p in result.problems)
        if problems and problems != self._logged_problems.get(uri):
            for problem in problems:
                self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"torchlint: {problem}"))
        self._logged_problems[uri] = problems

    def publish(self, uri: str, version: Optional[int], lint: _Lint) -> None:
        self._published[uri] = version
        lines = document_lines(lint.text, lint.result.path, self.position_encoding)
        diagnostics = [to_diagnostic(f, lines, lint.settings.docs_url) for f in lint.result.findings]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    def clear(self, uri: str) -> None:
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        self._lints.pop(uri, None)
        self._sessions.pop(uri, None)
        self._persist.discard(uri)
        self._published.pop(uri, None)
        self._logged_problems.pop(uri, None)
        self.project_index.closed(_path_of(uri))
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # -- code actions -------------------------------------------------------------------------
    async def code_actions(self, params: types.CodeActionParams) -> Optional[List[types.CodeAction]]:
        uri = params.text_document.uri
        lint = await self.current_lint_async(uri)
        doc = self.document(uri)
        if doc is None or lint is None:
            return None
        # No await between the lint and here: the document is at the linted text.
        version = doc.version
        only = params.context.only
        lines = document_lines(lint.text, lint.result.path, self.position_encoding)
        requested = (
            (params.range.start.line, params.range.start.character),
            (params.range.end.line, params.range.end.character),
        )
        asked = {
            (d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
            for d in params.context.diagnostics
            if d.source == "torchlint"
        }
        actions: List[types.CodeAction] = []
        ignores: List[types.CodeAction] = []
        seen_ignores = set()
        for f in lint.result.findings:
            span = lines.finding_span(f)
            # By line: a cursor anywhere on a finding's lines offers its actions.
            lines_span = ((span[0][0], 0), (span[1][0], 1 << 30))
            if not overlaps(lines_span, requested) and (f.code, *span[0], *span[1]) not in asked:
                continue
            diagnostic = to_diagnostic(f, lines, lint.settings.docs_url)
            if f.cell is not None:
                continue  # edits in a notebook's cells are not edits of its JSON text: fix-all only
            if f.fix is not None and kind_wanted(types.CodeActionKind.QuickFix, only):
                safe = f.fix.applicability == Applicability.SAFE
                if safe or self.client_settings.unsafe_fixes:
                    edits = [
                        to_text_edit(lines, e.row, e.column, e.end_row, e.end_column, e.content) for e in f.fix.edits
                    ]
                    title = f"torchlint ({f.code}): {f.fix.message}"
                    if not safe:
                        title += " (unsafe)"
                    actions.append(
                        types.CodeAction(
                            title=title,
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[diagnostic],
                            edit=self.workspace_edit(uri, version, edits),
                            is_preferred=safe,
                        )
                    )
            # An error-severity finding (the file cannot be analysed) cannot be suppressed.
            if rule_severity(f.code) != "error" and kind_wanted(types.CodeActionKind.QuickFix, only):
                row = f.noqa_row or f.row
                if (f.code, row) in seen_ignores:
                    continue
                seen_ignores.add((f.code, row))
                edit = ignore_comment_edit(lines, f.code, row)
                if edit is not None:
                    ignores.append(
                        types.CodeAction(
                            title=f"Ignore {f.code} for this line",
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[diagnostic],
                            edit=self.workspace_edit(uri, version, [edit]),
                        )
                    )
        actions.extend(ignores)
        if self._fix_all_requested(params, lint):
            if params.context.only:  # asked for by kind (on save): the edit itself
                action = await self.fix_all_action(uri, version, lint)
            else:  # listed among others (every cursor move in some editors): built when chosen
                action = self.lazy_fix_all_action(uri, version)
            if action is not None:
                actions.append(action)
        return actions

    def lazy_fix_all_action(self, uri: str, version: Optional[int]) -> types.CodeAction:
        """Fix-all without its edit: resolved (`codeAction/resolve`) where the
        client can, else run as the `torchlint.applyAutofix` command."""
        target = {"uri": uri, "version": version}
        action = types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL_KIND)
        if self._can_resolve_edits():
            action.data = target
        else:
            action.command = types.Command(title=FIX_ALL_TITLE, command=Command.APPLY_AUTOFIX.value, arguments=[target])
        return action

    def _can_resolve_edits(self) -> bool:
        caps = self.client_capabilities
        action_caps = caps and caps.text_document and caps.text_document.code_action
        resolve = action_caps and action_caps.resolve_support
        return bool(resolve and "edit" in resolve.properties)

    async def resolve_code_action(self, action: types.CodeAction) -> types.CodeAction:
        target = target_of([action.data]) if action.data else None
        if action.kind != FIX_ALL_KIND or target is None:
            return action
        lint = await self.current_lint_async(target.uri)
        if lint is None or (target.version is not None and lint.version != target.version):
            return action  # the text moved on: nothing to apply to it
        edits = await self.fix_all_edits(target.uri, lint)
        action.edit = self.workspace_edit(target.uri, lint.version, edits)
        return action

    def _fix_all_requested(self, params: types.CodeActionParams, lint: _Lint) -> bool:
        """Asked for by kind, or (as Ruff's server does) listed in an unfiltered
        request, when there is a safe fix to apply."""
        if not self.client_settings.fix_all:
            return False
        only = params.context.only
        if only:
            return kind_wanted(FIX_ALL_KIND, only)
        return any(f.fix is not None and f.fix.applicability == Applicability.SAFE for f in lint.result.findings)

    async def fix_all_action(self, uri: str, version: Optional[int], lint: _Lint) -> Optional[types.CodeAction]:
        edits = await self.fix_all_edits(uri, lint)
        if not edits:
            return None
        return types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL_KIND, edit=self.workspace_edit(uri, version, edits))

    async def fix_all_edits(self, uri: str, lint: _Lint) -> List[types.TextEdit]:
        """The edits that apply every safe fix, built from the kept lint's fixes
        (`Session.fix_from_kept`: no lint of the fixed text unless fixes overlap)."""
        path = _path_of(uri)
        lint_session = self.session_for(uri, path, lint.settings)
        loop = asyncio.get_running_loop()
        try:
            new_text, edits = await loop.run_in_executor(
                self._request_executor,
                lambda: lint_session.fix_from_kept(
                    lint.text, self.stale_check(uri, lint.version), self.project_index.index_for(path, lint.text)
                ),
            )
        except Cancelled:
            return []
        if edits is None:  # the fix loop ran: diff its result
            return self.text_edits(lint.text, new_text)
        lines = TextLines(lint.text, self.position_encoding)
        return [to_text_edit(lines, e.row, e.column, e.end_row, e.end_column, e.content) for e in edits]

    def text_edits(self, old: str, new: str) -> List[types.TextEdit]:
        """Edits from `old` to `new`: a line diff for short texts; for long ones
        (where difflib takes seconds) one edit over the span that changed."""
        if new == old:
            return []
        lines = TextLines(old, self.position_encoding)
        if old.count("\n") <= DIFF_LINES:
            edits = diff_edits(old, new)
            return [to_text_edit(lines, e.row, e.column, e.end_row, e.end_column, e.content) for e in edits]
        start = common_prefix(old, new)
        same_end = common_suffix(old, new, min(len(old), len(new)) - start)
        (l0, c0), (l1, c1) = lines.offset_position(start), lines.offset_position(len(old) - same_end)
        return [
            types.TextEdit(
                range=types.Range(types.Position(l0, c0), types.Position(l1, c1)),
                new_text=new[start : len(new) - same_end],
            )
        ]

    # -- commands and hover -------------------------------------------------------------------
    async def execute(self, command: Command, arguments: Sequence[Any]) -> Any:
        if command is Command.PRINT_DEBUG_INFORMATION:
            info = self.debug_information()
            self.window_log_message(types.LogMessageParams(types.MessageType.Info, info))
            return info
        target = target_of(arguments)
        if target is None:
            raise JsonRpcInvalidParams(f"{command.value} needs a document: [{{'uri': ..., 'version': ...}}]")
        lint = await self.current_lint_async(target.uri)
        if lint is None:
            return None
        if target.version is not None and lint.version is not None and target.version != lint.version:
            return None  # asked for another version of the text
        if command is Command.APPLY_AUTOFIX:
            edits = await self.fix_all_edits(target.uri, lint)
            label = FIX_ALL_TITLE
        else:
            new_text = organize_noqa(
                lint.text, lint.result.path, lint.result.findings, lint.settings.enabled_for(lint.result.path)
            )
            edits = self.text_edits(lint.text, new_text) if new_text is not None else []
            label = "torchlint: Add noqa comments for every finding"
        if edits:
            await self.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=self.workspace_edit(target.uri, lint.version, edits), label=label)
            )
        return None

    def debug_information(self) -> str:
        lines = [
            f"torchlint {__version__}, Python {sys.version.split()[0]}",
            f"client settings: {self.client_settings}",
        ]
        for uri, found in sorted(self._sessions.items()):
            lines.append(f"open: {uri} (rules: {', '.join(sorted(found.enabled))})")
        return "\n".join(lines)

    def hover(self, params: types.HoverParams) -> Optional[types.Hover]:
        doc = self.document(params.text_document.uri)
        if doc is None:
            return None
        lines = TextLines(doc.source, self.position_encoding)
        line = params.position.line
        found = code_at(lines.line(line + 1), lines.column(line, params.position.character))
        if found is None:
            return None
        text = lines.line(line + 1)
        start = lines.units(text[: found.start])
        end = lines.units(text[: found.end])
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=rule_markdown(found.code)),
            range=types.Range(types.Position(line, start), types.Position(line, end)),
        )

    def _workspace_roots(self) -> List[str]:
        """The workspace folders, else the root the client opened (none yet: [])."""
        try:
            folders = [to_fs_path(f.uri) for f in self.workspace.folders.values()]
            root = self.workspace.root_path
        except Exception:  # no workspace yet
            return []
        return [f for f in folders if f] or ([root] if root else [])

    def warm(self) -> None:
        """On the lint thread, before any document: imports, and the project index."""
        roots = self._workspace_roots()

        def work() -> None:
            try:
                warm_imports()
                self.project_index.warm([r for r in roots if r])
            except Exception:  # warming is an optimisation only
                log.exception("warming up failed")

        self._executor.submit(work)

    def workspace_edit(self, uri: str, version: Optional[int], edits: Sequence[types.TextEdit]) -> types.WorkspaceEdit:
        caps = self.client_capabilities
        document_changes = bool(
            caps and caps.workspace and caps.workspace.workspace_edit and caps.workspace.workspace_edit.document_changes
        )
        if document_changes:
            return types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                        edits=list(edits),
                    )
                ]
            )
        return types.WorkspaceEdit(changes={uri: list(edits)})

    # -- configuration sources ----------------------------------------------------------------
    async def pull_configuration(self) -> None:
        caps = self.client_capabilities
        if not (caps and caps.workspace and caps.workspace.configuration):
            return
        try:
            result = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="torchlint")])
            )
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)
            return
        if result and isinstance(result[0], dict) and result[0]:
            self.apply_client_settings(result[0])
            self.config_changed()

    async def register_watchers(self) -> None:
        caps = self.client_capabilities
        watched = caps and caps.workspace and caps.workspace.did_change_watched_files
        if not (watched and watched.dynamic_registration):
            return
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_FILES]
        )
        try:
            await self.client_register_capability_async(
                types.RegistrationParams(
                    registrations=[
                        types.Registration(
                            id="torchlint-pyproject",
                            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=options,
                        )
                    ]
                )
            )
        except Exception as exc:
            log.warning("could not register a pyproject.toml watcher: %s", exc)


def _lint(lint_session: Session, text: str, settings: Settings, version: Optional[int], stale, project=None) -> _Lint:
    name = lint_session.path
    if name != "<untitled>" and settings.is_excluded(name):
        return _Lint(version, text, settings, FileResult(name))
    return _Lint(version, text, settings, lint_session.check(text, stale, project))


def _path_of(uri: str) -> Optional[str]:
    if not uri.startswith("file:"):
        return None
    try:
        return to_fs_path(uri)
    except Exception:
        return None


def _pyproject_signature(folder: str) -> tuple:
    """(path, mtime, size) of every configuration file (pyproject.toml,
    torchlint.toml, .torchlint.toml) from `folder` up: a change in any of them
    (edited, created, deleted) re-reads the configuration."""
    out = []
    for parent in (Path(folder), *Path(folder).parents):
        for name in CONFIG_FILES:
            candidate = parent / name
            try:
                st = candidate.stat()
            except OSError:
                continue
            out.append((str(candidate), st.st_mtime_ns, st.st_size))
    return tuple(out)
