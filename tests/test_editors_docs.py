"""docs/editors.md's Neovim setups: one needs no `vim.lsp.config` (Neovim 0.11),
so it works on the 0.7 that Debian 12 ships; where `nvim` is installed, that
block is run as written, headless, and must show torchlint's diagnostics."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TL104_SRC

ROOT = Path(__file__).resolve().parents[1]


def _neovim_blocks():
    text = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    section = text.split("## Neovim", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```lua\n(.*?)```", section, re.S)


def _older_block() -> str:
    blocks = [b for b in _neovim_blocks() if "vim.lsp.config" not in b and "lspconfig" not in b]
    assert len(blocks) == 1, "docs/editors.md should give one plugin-free Neovim setup without vim.lsp.config"
    return blocks[0]


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


@pytest.mark.slow
def test_the_older_neovim_setup_runs_as_written(tmp_path):
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
    (tmp_path / "init.lua").write_text(_older_block())
    (tmp_path / "check.lua").write_text(CHECK)
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
    assert result.splitlines() == ["true", "3:5 TL104"], proc.stdout + proc.stderr + result
