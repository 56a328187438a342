"""The language server end to end in a real editor: headless Neovim (0.7, as
Debian 12 ships it, and later versions) starts `torchlint server`, shows its
diagnostics, lists its code actions, hovers a `# noqa` code, re-lints as text
is typed, and applies fix-all through `workspace/executeCommand` (the server's
`workspace/applyEdit`, applied by Neovim). Skipped, with the reason, where no
`nvim` is installed; other Neovims can be named in TORCHLINT_TEST_NVIM
(paths separated by os.pathsep)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = (
    "import torch\n"
    "device = torch.device('cuda')\n"
    "x = torch.zeros(3).to(device)\n"
    "y = torch.zeros(4).to(device)\n"
    "w = 1  # noqa: TL104\n"
)

SCRIPT = r"""
local out = {}
local function log(s) table.insert(out, s) end
local function finish()
  local f = io.open('result.txt', 'w')
  f:write(table.concat(out, '\n') .. '\n')
  f:close()
  vim.cmd('qa!')
end
local ok_all, err = pcall(function()
  vim.cmd('edit train.py')
  local buf = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(buf)
  local config = { name = 'torchlint', cmd = { PYTHON, '-m', 'torchlint', 'server' }, root_dir = vim.fn.getcwd() }
  local id
  if vim.lsp.start then  -- Neovim 0.8 and later
    id = vim.lsp.start(config)
  else  -- Neovim 0.7
    id = vim.lsp.start_client(config)
    vim.lsp.buf_attach_client(buf, id)
  end
  local function count() return #vim.diagnostic.get(buf) end
  log('diagnostics ' .. tostring(vim.wait(60000, function() return count() == 2 end, 20)) .. ' ' .. count())
  for _, d in ipairs(vim.diagnostic.get(buf)) do log('diag ' .. (d.lnum + 1) .. ' ' .. tostring(d.code)) end
  local client = vim.lsp.get_client_by_id(id)
  local range = { start = { line = 2, character = 0 }, ['end'] = { line = 2, character = 0 } }
  local actions = client.request_sync('textDocument/codeAction',
    { textDocument = { uri = uri }, range = range, context = { diagnostics = {} } }, 30000, buf)
  for _, a in ipairs(actions.result or {}) do log('action ' .. a.title) end
  local hover = client.request_sync('textDocument/hover',
    { textDocument = { uri = uri }, position = { line = 4, character = 17 } }, 30000, buf)
  local value = hover.result and hover.result.contents and hover.result.contents.value or ''
  log('hover ' .. tostring(value:find('create%-then%-move') ~= nil))
  vim.api.nvim_buf_set_lines(buf, 4, 4, false, { 'z = torch.ones(2).to(device)' })  -- typed: didChange
  log('typed ' .. tostring(vim.wait(60000, function() return count() == 3 end, 20)) .. ' ' .. count())
  client.request_sync('workspace/executeCommand',
    { command = 'torchlint.applyAutofix', arguments = { { uri = uri } } }, 60000, buf)
  log('fixed ' .. tostring(vim.wait(60000, function() return count() == 0 end, 20)) .. ' ' .. count())
  vim.cmd('write')
end)
if not ok_all then log('error ' .. tostring(err)) end
finish()
"""


def _neovims():
    found = [shutil.which("nvim")] + os.environ.get("TORCHLINT_TEST_NVIM", "").split(os.pathsep)
    return [p for p in dict.fromkeys(found) if p]


def _version(nvim: str) -> str:
    return subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]


@pytest.mark.slow
@pytest.mark.parametrize("index", range(max(1, len(_neovims()))))
def test_neovim_drives_the_server_end_to_end(tmp_path, index):
    neovims = _neovims()
    if not neovims:
        pytest.skip("nvim is not installed (apt-get install neovim): the headless Neovim test did not run")
    nvim = neovims[index]
    (tmp_path / "train.py").write_text(SOURCE, encoding="utf-8")
    script = tmp_path / "drive.lua"
    script.write_text(f"PYTHON = {str(sys.executable)!r}\n" + SCRIPT, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), XDG_CONFIG_HOME=str(tmp_path))
    subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {script}"], cwd=tmp_path, env=env, timeout=300, check=False
    )
    result = (tmp_path / "result.txt").read_text(encoding="utf-8").splitlines()
    version = _version(nvim)
    assert result[:3] == ["diagnostics true 2", "diag 3 TL104", "diag 4 TL104"], (version, result)
    assert "action torchlint (TL104): Pass `device=` to the factory" in result, (version, result)
    assert "action Ignore TL104 for this line" in result and "action torchlint: Fix all auto-fixable problems" in result
    assert "hover true" in result, (version, result)
    assert "typed true 3" in result and "fixed true 0" in result, (version, result)
    assert not [line for line in result if line.startswith("error")], (version, result)
    fixed = (tmp_path / "train.py").read_text(encoding="utf-8")
    assert "torch.zeros(3, device=device)" in fixed and "torch.ones(2, device=device)" in fixed, fixed
