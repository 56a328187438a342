import pytest

from torchlint.config import ConfigError, Settings, load_settings
from torchlint.rules import all_codes, preview_codes


def write(tmp_path, body):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n" + body)
    return tmp_path


def test_default_selects_every_stable_rule_and_preview_every_rule():
    assert Settings().enabled() == frozenset(all_codes()) - preview_codes()
    assert Settings(preview=True).enabled() == frozenset(all_codes())


def test_precedence_select_then_extend_then_ignore(tmp_path):
    # (preview on: the selection rules, whatever each rule's status)
    write(tmp_path, 'preview = true\nselect = ["TL1"]\nextend-select = ["TL501"]\nignore = ["TL104"]\n')
    s = load_settings(start=str(tmp_path))
    assert "TL104" not in s.enabled() and "TL501" in s.enabled()
    # CLI select replaces the file's select; file ignore still applies
    s = load_settings(start=str(tmp_path), select=["TL104", "TL5"])
    assert "TL104" not in s.enabled() and "TL501" in s.enabled()
    # ignore wins over select, whichever is more specific; the file's extend-select still adds
    s = load_settings(start=str(tmp_path), select=["TL104"], ignore=["TL1"])
    assert s.enabled() == frozenset({"TL501"})


def test_prefixes_and_all_are_case_insensitive():
    s = Settings(select=("tl1",), extend_select=("all",), ignore=("TL5",), preview=True)
    assert "TL104" in s.enabled() and "TL501" not in s.enabled()


def test_per_file_ignores(tmp_path):
    write(
        tmp_path,
        'preview = true\n[tool.torchlint.per-file-ignores]\n"tests/*" = ["TL104"]\n"scripts/**/*.py" = ["TL5"]\n',
    )
    s = load_settings(start=str(tmp_path))
    assert "TL104" not in s.enabled_for(str(tmp_path / "tests" / "t.py"))
    assert "TL104" in s.enabled_for(str(tmp_path / "src" / "t.py"))
    assert "TL501" not in s.enabled_for(str(tmp_path / "scripts" / "a" / "b.py"))


def test_excludes_relative_to_config_root(tmp_path):
    write(tmp_path, 'extend-exclude = ["generated/"]\n')
    s = load_settings(start=str(tmp_path / "sub"))
    assert s.is_excluded(str(tmp_path / "generated" / "x.py"))
    assert not s.is_excluded(str(tmp_path / "src" / "x.py"))


@pytest.mark.parametrize(
    "body, message",
    [
        ('selct = ["TL1"]\n', "unknown key 'selct'"),
        ('select = ["TL9"]\n', "unknown rule selector 'TL9'"),
        ("select = [1]\n", "`select` must be a list of strings"),
        ("per-file-ignores = 3\n", "`per-file-ignores` must be a table"),
        ('[tool.torchlint.per-file-ignores]\n"a.py" = ["NOPE1"]\n', "unknown rule selector 'NOPE1'"),
    ],
)
def test_config_errors(tmp_path, body, message):
    write(tmp_path, body)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("`", "`")):
        load_settings(start=str(tmp_path))


def test_pyproject_without_our_table_is_skipped(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL104"]\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    s = load_settings(start=str(tmp_path / "pkg"))
    assert "TL104" not in s.enabled()


def test_settings_are_hashable():
    assert hash(Settings()) == hash(Settings())


def test_symlink_loop_as_the_start_does_not_raise(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    write(tmp_path, 'ignore = ["TL104"]\n')
    assert "TL104" not in load_settings(start=str(loop)).enabled()


@pytest.mark.parametrize(
    "body, message",
    [
        ('select = "TL1"\n', '`select` must be a list of strings, not a string (write `select = ["TL1"]`)'),
        ("ignore = [1]\n", "`ignore` must be a list of strings, not a list with a non-string item"),
        ('[tool.torchlint.per-file-ignores]\n"a.py" = "TL1"\n', '`per-file-ignores."a.py"` must be a list of strings'),
        ('ignore = ["TL9"]\n', "pyproject.toml: unknown rule selector 'TL9' in `ignore`"),
        (
            '[tool.torchlint.per-file-ignores]\n"t/*" = ["XX1"]\n',
            "pyproject.toml: unknown rule selector 'XX1' in `per-file-ignores.\"t/*\"`",
        ),
    ],
)
def test_config_errors_name_the_file_and_the_key(tmp_path, body, message):
    write(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_settings(start=str(tmp_path))
    assert message in str(err.value) and str(err.value).startswith(str(tmp_path / "pyproject.toml"))


def test_new_keys(tmp_path):
    write(tmp_path, 'force-exclude = true\nrespect-gitignore = false\nunsafe-fixes = false\ncache-dir = "c"\n')
    s = load_settings(start=str(tmp_path))
    assert (s.force_exclude, s.respect_gitignore, s.unsafe_fixes) == (True, False, False)
    assert s.cache_dir == str(tmp_path / "c")
    s = load_settings(start=str(tmp_path), force_exclude=False, respect_gitignore=True, unsafe_fixes=True)
    assert (s.force_exclude, s.respect_gitignore, s.unsafe_fixes) == (False, True, True)


@pytest.mark.parametrize(
    "body, where, message",
    [
        # tomllib says "(at end of document)" for these: no line number before issue 27.
        (b'[tool.torchlint]\nselect = ["TL1"', ":2:16: ", "invalid TOML: Unclosed array (at the end of the file)"),
        (b'[tool.torchlint]\nselect = ["TL1"\n', ":3:1: ", "invalid TOML: Unclosed array (at the end of the file)"),
        (b'[tool.torchlint]\nselect = "TL1', ":2:14: ", "invalid TOML: Unterminated string (at the end of the file)"),
        (b"[tool.torchlint]\nselect = []\nfoo = \n", ":3:7: ", "invalid TOML: Invalid value"),
        (b'[tool.torchlint]\n# caf\xe9\nselect = ["TL1"]\n', ":2:6: ", "invalid TOML: byte 0xe9 is not UTF-8"),
    ],
)
def test_invalid_toml_names_the_line_and_column(tmp_path, body, where, message):
    """Issue 27: an invalid-TOML error gave no line number (tomllib's "at end
    of document"); a pyproject.toml that is not UTF-8 was skipped silently."""
    (tmp_path / "pyproject.toml").write_bytes(body)
    with pytest.raises(ConfigError) as err:
        load_settings(start=str(tmp_path))
    text = str(err.value)
    assert text.startswith(str(tmp_path / "pyproject.toml") + where) and message in text, text
    assert "\n" not in text


# -- torchlint.toml, --config, docs-url ---------------------------------------------------------


def test_torchlint_toml_holds_the_settings_at_the_top_level(tmp_path):
    (tmp_path / "torchlint.toml").write_text('preview = true\nignore = ["TL104"]\n')
    s = load_settings(start=str(tmp_path))
    assert s.preview and "TL104" not in s.enabled() and s.config_path == str(tmp_path / "torchlint.toml")
    with pytest.raises(ConfigError, match=r"torchlint\.toml: unknown key 'selekt' in torchlint\.toml"):
        (tmp_path / "torchlint.toml").write_text('selekt = ["TL1"]\n')
        load_settings(start=str(tmp_path))


def test_config_file_precedence_in_a_folder_and_nearest_first(tmp_path):
    """As Ruff: `.torchlint.toml`, then `torchlint.toml`, then a pyproject.toml
    with [tool.torchlint], in the nearest folder that has any of them."""
    sub = tmp_path / "pkg"
    sub.mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL1"]\n')
    assert load_settings(start=str(sub)).config_path == str(tmp_path / "pyproject.toml")
    (tmp_path / "torchlint.toml").write_text('ignore = ["TL2"]\n')
    assert load_settings(start=str(sub)).config_path == str(tmp_path / "torchlint.toml")
    (tmp_path / ".torchlint.toml").write_text('ignore = ["TL3"]\n')
    assert load_settings(start=str(sub)).ignore == ("TL3",)
    (sub / "pyproject.toml").write_text('[project]\nname = "pkg"\n')  # no table: not a configuration
    assert load_settings(start=str(sub)).ignore == ("TL3",)
    (sub / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL4"]\n')  # nearer: wins
    assert load_settings(start=str(sub)).ignore == ("TL4",)


def test_config_option_reads_a_torchlint_toml_or_a_pyproject(tmp_path):
    named = tmp_path / "ci-settings.toml"
    named.write_text('select = ["TL303"]\n')
    assert load_settings(config=str(named)).select == ("TL303",)
    named.write_text('[tool.torchlint]\nselect = ["TL303"]\n')  # a table of the pyproject form works too
    assert load_settings(config=str(named)).select == ("TL303",)
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL4"]\n')
    assert load_settings(config=str(tmp_path / "pyproject.toml")).select == ("TL4",)


@pytest.mark.parametrize(
    "name,body,message",
    [
        ("pyproject.toml", '[project]\nname = "x"\n', "no [tool.torchlint] table (a pyproject.toml holds"),
        ("pyproject.toml", "", "no [tool.torchlint] table"),
        ("other.toml", "[tool.ruff]\nline-length = 100\n", "no [tool.torchlint] table, and a file not named"),
        ("other.toml", '[project]\nname = "x"\n', "no [tool.torchlint] table"),
    ],
)
def test_a_named_config_without_settings_for_torchlint_is_an_error(tmp_path, name, body, message):
    (tmp_path / name).write_text(body)
    with pytest.raises(ConfigError) as err:
        load_settings(config=str(tmp_path / name))
    assert str(err.value).startswith(str(tmp_path / name) + ": ") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_named_config_error_is_one_line_and_exit_2(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from torchlint.doors.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("import torch\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    r = CliRunner().invoke(main, ["check", "--no-cache", "--config", "pyproject.toml", "."])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "torchlint: error: pyproject.toml: no [tool.torchlint] table (a pyproject.toml holds torchlint's "
        "settings there; a torchlint.toml holds them at the top level)"
    ]


def test_docs_url_from_the_configuration_and_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHLINT_DOCS_URL", raising=False)
    assert Settings().rule_url("TL104") == (
        "https://github.com/torchlint/torchlint/blob/main/docs/rules/create-then-move.md"
    )
    write(tmp_path, 'docs-url = "file:///opt/torchlint/docs/rules"\n')
    s = load_settings(start=str(tmp_path))
    assert s.rule_url("TL104") == "file:///opt/torchlint/docs/rules/create-then-move.md"
    assert s.rule_url("TL999") is None
    monkeypatch.setenv("TORCHLINT_DOCS_URL", "https://mirror.example/rules/")
    assert (
        load_settings(start=str(tmp_path)).rule_url("TL303") == "https://mirror.example/rules/loader-no-pin-memory.md"
    )
    write(tmp_path, "docs-url = 3\n")
    with pytest.raises(ConfigError, match="`docs-url` must be a URL"):
        load_settings(start=str(tmp_path))


def test_every_report_that_links_a_rule_uses_the_docs_url(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from torchlint.doors.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHLINT_DOCS_URL", "file:///srv/torchlint-docs/rules")
    (tmp_path / "a.py").write_text("import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3).to(device)\n")
    expected = "file:///srv/torchlint-docs/rules/create-then-move.md"
    out = {}
    for fmt in ("json", "sarif", "rdjson"):
        r = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", fmt, "a.py"])
        assert r.exit_code == 1, r.output
        out[fmt] = json.loads(r.stdout)
    assert out["json"][0]["url"] == expected
    assert out["sarif"]["runs"][0]["tool"]["driver"]["rules"][0]["helpUri"] == expected
    assert out["rdjson"]["diagnostics"][0]["code"]["url"] == expected
