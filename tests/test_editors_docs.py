"""docs/editors.md's Neovim setups: one needs no `vim.lsp.config` (Neovim 0.11),
so it works on the 0.7 that Debian 12 ships, and so does the fix-all block;
where `nvim` is installed, those blocks are run as written, headless: the
diagnostics must show, and fix all must fix the buffer on `:w` and on
`:TorchlintFixAll`. `.ci/run` installs Debian's Neovim (0.7.2) where it can."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TL104_FIXED, TL104_SRC

ROOT = Path(__file__).resolve().parents[1]


def _neovim_blocks():
    text = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    section = text.split("## Neovim", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```lua\n(.*?)```", section, re.S)


def _older_block() -> str:
    blocks = [
        b
        for b in _neovim_blocks()
        if "vim.lsp.config" not in b and "lspconfig" not in b and "nvim_create_autocmd('FileType'" in b
    ]
    assert len(blocks) == 1, "docs/editors.md should give one plugin-free Neovim setup without vim.lsp.config"
    return blocks[0]


def _fix_all_block() -> str:
    blocks = [b for b in _neovim_blocks() if "TorchlintFixAll" in b]
    assert len(blocks) == 1, "docs/editors.md should give one fix-all block"
    return blocks[0]


def test_the_fix_all_block_uses_only_what_neovim_0_7_has():
    """Issue 27: the docs' fix-all call (`code_action{ apply = true }`) needs
    0.8; the documented one must not."""
    block = _fix_all_block()
    assert "apply = true" not in block and "vim.fs." not in block and "vim.lsp.get_clients" not in block
    for call in ("vim.lsp.buf_request_sync(", "vim.lsp.util.apply_workspace_edit(", "nvim_create_user_command("):
        assert call in block
    assert "'source.fixAll.torchlint'" in block and "BufWritePre" in block


def test_a_neovim_setup_works_without_vim_lsp_config():
    block = _older_block()
    # APIs as old as Neovim 0.7: an autocommand with a Lua callback, and the
    # pre-0.8 client calls as the fallback when vim.lsp.start is missing.
    assert "nvim_create_autocmd('FileType'" in block
    assert "if vim.lsp.start then" in block
    assert "vim.lsp.start_client(" in block and "vim.lsp.buf_attach_client(" in block
    assert "vim.fs." not in block  # vim.fs arrived in 0.8


CHECK = """
vim.cmd('edit t.py')
local ok = vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50)
local out = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(out, (d.lnum + 1) .. ':' .. (d.col + 1) .. ' ' .. tostring(d.code))
end
local f = io.open('result.txt', 'w')
f:write(tostring(ok) .. '\\n' .. table.concat(out, '\\n') .. '\\n')
f:close()
vim.cmd('qa!')
"""


def _nvim(tmp_path, init: str, check: str):
    """Run headless Neovim with `init` as init.lua and `check` as a Lua file,
    `torchlint` on PATH running this checkout; the result.txt it writes."""
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("nvim is not installed: the Neovim setup is checked statically only")
    if importlib.util.find_spec("pygls") is None:
        pytest.skip("pygls is not installed: `torchlint server` needs the server extra")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "torchlint"  # `torchlint` on PATH, running this checkout
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m torchlint "$@"\n')
    launcher.chmod(0o755)
    (tmp_path / "init.lua").write_text(init)
    (tmp_path / "check.lua").write_text(check)
    (tmp_path / "t.py").write_text(TL104_SRC)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(ROOT))
    env["XDG_CONFIG_HOME"] = env["XDG_DATA_HOME"] = env["XDG_STATE_HOME"] = str(tmp_path / "xdg")
    proc = subprocess.run(
        [nvim, "--headless", "-u", "init.lua", "-c", "luafile check.lua"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    result = (tmp_path / "result.txt").read_text() if (tmp_path / "result.txt").exists() else ""
    return result, proc.stdout + proc.stderr + result


@pytest.mark.slow
def test_the_older_neovim_setup_runs_as_written(tmp_path):
    result, log = _nvim(tmp_path, _older_block(), CHECK)
    assert result.splitlines() == ["true", "3:5 TL104"], log


FIX_ON_WRITE = """
vim.cmd('edit t.py')
local ok = vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50)
vim.cmd('write')
local f = io.open('result.txt', 'w')
f:write(tostring(ok) .. '\\n')
f:close()
vim.cmd('qa!')
"""

FIX_COMMAND = """
vim.cmd('edit t.py')
local ok = vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50)
vim.cmd('TorchlintFixAll')
local f = io.open('result.txt', 'w')
f:write(tostring(ok) .. '\\n' .. table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n') .. '\\n')
f:close()
vim.cmd('qa!')
"""


@pytest.mark.slow
def test_fix_all_on_write_works_as_written_on_the_older_setup(tmp_path):
    """Issue 27: Neovim 0.7 had no documented fix-all. The docs' block, with
    the 0.7 setup, fixes the file when it is written."""
    result, log = _nvim(tmp_path, _older_block() + "\n" + _fix_all_block(), FIX_ON_WRITE)
    assert result.splitlines() == ["true"], log
    assert (tmp_path / "t.py").read_text() == TL104_FIXED, log


@pytest.mark.slow
def test_fix_all_command_works_as_written_on_the_older_setup(tmp_path):
    result, log = _nvim(tmp_path, _older_block() + "\n" + _fix_all_block(), FIX_COMMAND)
    assert result.splitlines() == ["true", *TL104_FIXED.splitlines()], log
    assert (tmp_path / "t.py").read_text() == TL104_SRC  # the buffer is fixed, the file not yet written
