"""One home for the rules both the hooks and the package apply (issue 9)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from manager import config
from manager.claude import hotconfig
from manager.errors import StateError
from manager.session import paths
from manager.session import store

IDS = ["café", "ｗｓ-1", "ws-1", "a.b_c-d", "x" * 128, "x" * 129, "-x", ".x", "a b", "a/b", "",
       "٣", "ws\u200b1"]


@pytest.mark.parametrize("value", IDS)
def test_hook_and_store_agree_on_every_id(value):
    try:
        store.validate_id(value)
        stored = True
    except StateError:
        stored = False
    assert paths.valid_id(value) is stored


def test_cafe_is_not_a_session_id():
    assert not paths.valid_id("café")
    with pytest.raises(StateError):
        store.validate_id("café")


def test_hook_session_dir_is_the_store_s(project):
    session = store.create(project, "overlay", session_id="abc-2")
    assert Path(paths.session_root("abc-2")) == session.dir


def test_config_files_are_the_ones_config_load_reads(tmp_path, monkeypatch):
    plugin_data = tmp_path / "plugin-data"
    monkeypatch.setenv("CLAUDE_PLUGIN_DATA", str(plugin_data))
    project = tmp_path / "proj"
    files = [Path(f) for f in paths.config_files(str(project))]
    # Each file in turn sets the same key; the last one read must win.
    for index, path in enumerate(files):
        path.parent.mkdir(parents=True, exist_ok=True)
        body = f'{{"gc": {{"max_age_days": {index + 1}}}}}' if path.suffix == ".json" \
            else f"gc:\n  max_age_days: {index + 1}\n"
        path.write_text(body)
        loaded = config.load(project)
        assert loaded["gc.max_age_days"] == index + 1
        assert loaded.sources["gc.max_age_days"] == str(path)


def test_the_hook_stamps_the_files_and_variables_config_load_reads(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    marks = hotconfig.stamp(str(project))
    stamped_files = [m[0] for m in marks if m[0].startswith("/")]
    read = paths.config_files(str(project))
    assert stamped_files[:len(read)] == read      # then the trust record (sec-hook)
    stamped_vars = {m[0] for m in marks if not m[0].startswith("/")}
    assert stamped_vars == {paths.env_name(key) for key in hotconfig.STAMPED}
    for key in hotconfig.STAMPED:
        assert key in config.SCHEMA
        monkeypatch.setenv(paths.env_name(key), "1" if config.SCHEMA[key].type is bool else "x")
        assert config.load(project).sources[key] == f"${paths.env_name(key)}"


def test_the_test_guard_holds_for_the_hook_side_too(monkeypatch):
    monkeypatch.delenv("XDG_STATE_HOME")
    assert os.environ.get(paths.FORBID_DEFAULT)
    with pytest.raises(StateError):
        paths.state_root()


@pytest.mark.parametrize(("path", "root", "inside"), [
    ("/a", "/a", True), ("/a/b", "/a", True), ("/a/b", "/a/", True), ("/a", "/a/", True),
    ("/ab", "/a", False), ("/", "/a", False), ("/a", "/", True), ("/", "/", True),
    ("/a/b", "//", True), ("relative", "/", False),
])
def test_is_within_is_one_rule_for_every_root(path: str, root: str, inside: bool):
    assert paths.is_within(path, root) is inside
    assert paths.is_within(Path(path), Path(root)) is inside



def test_within_any_is_is_within_of_any_root():
    """within_any (review's filter of every change) is the same rule as is_within, for every
    path and set of roots drawn from the table's cases and their neighbours."""
    names = ["/", "//", "/a", "/a/", "/ab", "/a/b", "/a/b/c", "/a/bc", "/b", "relative", ""]
    for size in range(4):
        for start in range(len(names)):
            roots = [names[(start + i * 3) % len(names)] for i in range(size)]
            inside = paths.within_any(roots)
            for path in names:
                assert inside(path) is any(paths.is_within(path, r) for r in roots), (path, roots)
