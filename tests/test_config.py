from __future__ import annotations

import json
from pathlib import Path

import pytest

from manager import config
from manager.errors import ConfigError
from manager.errors import StateError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_then_user_then_project_then_env_then_flags(tmp_path, project, monkeypatch):
    user = write(tmp_path / "config/workspace/config.yaml", "engine: try\ngc:\n  max_age_days: 3\n")
    config.set_trust(write(project / ".workspace.yaml", "engine: overlay\n"), True)
    cfg = config.load(project)
    assert (cfg["engine"], cfg.sources["engine"]) == ("overlay", str(project / ".workspace.yaml"))
    assert (cfg["gc.max_age_days"], cfg.sources["gc.max_age_days"]) == (3, str(user))
    assert cfg.sources["exclude"] == "default"
    monkeypatch.setenv("WORKSPACE_ENGINE", "podman")
    assert config.load(project)["engine"] == "podman"
    cfg = config.load(project, {"engine": "docker"})
    assert (cfg["engine"], cfg.sources["engine"]) == ("docker", "command line")


def test_plugin_data_config_is_read(tmp_path, project, monkeypatch):
    monkeypatch.setenv("CLAUDE_PLUGIN_DATA", str(tmp_path / "plugin-data"))
    write(tmp_path / "plugin-data/config.json", json.dumps({"exclude": ["*.log"]}))
    assert config.load(project)["exclude"] == ["*.log"]


def test_unknown_key_names_file_and_key(project):
    path = write(project / ".workspace.yaml", "engnie: overlay\n")
    with pytest.raises(ConfigError) as err:
        config.load(project)
    assert str(path) in str(err.value) and "'engnie'" in str(err.value)
    assert "did you mean 'engine'" in str(err.value)


@pytest.mark.parametrize("text, needle", [
    ("engine: 3\n", "expects str"),
    ("engine: nope\n", "must be one of"),
    ("gc:\n  max_age_days: many\n", "expects int"),
    ("exclude: x\n", "expects list"),
    ("container:\n  network: maybe\n", "expects bool"),
])
def test_wrong_types_are_clear_errors(project, text, needle):
    write(project / ".workspace.yaml", text)
    with pytest.raises(ConfigError, match=needle):
        config.load(project)


def test_malformed_yaml_is_a_clear_error_and_the_file_is_untouched(project):
    text = "engine: [overlay\n"
    path = write(project / ".workspace.yaml", text)
    with pytest.raises(ConfigError, match="not valid YAML"):
        config.load(project)
    assert path.read_text() == text


def test_env_values_are_parsed(project, monkeypatch):
    monkeypatch.setenv("WORKSPACE_EXCLUDE", "a/*,b")
    monkeypatch.setenv("WORKSPACE_CONTAINER__NETWORK", "off")
    cfg = config.load(project)
    assert cfg["exclude"] == ["a/*", "b"] and cfg["container.network"] is False


def test_bad_env_value_names_the_variable(project, monkeypatch):
    monkeypatch.setenv("WORKSPACE_GC__MAX_AGE_DAYS", "soon")
    with pytest.raises(ConfigError, match=r"\$WORKSPACE_GC__MAX_AGE_DAYS"):
        config.load(project)


def test_config_command_shows_sources(ws, project):
    write(project / ".workspace.yaml", "engine: overlay\n")
    data = json.loads(ws("config", "--json", check=True).stdout)
    assert data["engine"]["source"] == "default" and "not trusted" in data["engine"]["ignored"]
    assert "engine: overlay" in ws("config", "trust", check=True).stdout
    data = json.loads(ws("config", "--json", check=True).stdout)
    assert data["engine"] == {"value": "overlay", "source": str(project / ".workspace.yaml")}


def test_project_file_sets_sandbox_weakening_settings_only_when_trusted(project):
    path = write(project / ".workspace.yaml",
                 "passthrough: [bash, git]\nplugin:\n  allow_model_bypass: true\n"
                 "container:\n  network: true\n  memory: 2g\nexclude: ['*.log']\n")
    cfg = config.load(project)
    assert cfg["passthrough"] == ["gh", "sudo", "docker", "podman"]
    assert cfg["plugin.allow_model_bypass"] is False and cfg["container.network"] is False
    assert set(cfg.ignored) == {"passthrough", "plugin.allow_model_bypass", "container.network"}
    assert cfg["container.memory"] == "2g" and cfg["exclude"] == ["*.log"]   # harmless ones apply
    config.set_trust(path, True)
    assert config.load(project)["passthrough"] == ["bash", "git"]
    path.write_text(path.read_text() + "# changed\n")             # changed: asked again
    assert config.load(project)["passthrough"] == ["gh", "sudo", "docker", "podman"]
    config.set_trust(path, True)
    config.set_trust(path, False)
    assert config.load(project)["plugin.allow_model_bypass"] is False


def test_cli_reports_config_error_with_exit_1(ws, project):
    write(project / ".workspace.yaml", "bogus: 1\n")
    proc = ws("status")
    assert proc.returncode == 1 and "unknown setting 'bogus'" in proc.stderr


def test_trust_record_from_a_newer_release_trusts_nothing_and_is_not_overwritten(project):
    path = write(project / ".workspace.yaml", "engine: overlay\n")
    config.set_trust(path, True)
    record = config.trust_path()
    data = json.loads(record.read_text())
    assert data["format"] == 1 and list(data["files"].values()) == [config.file_hash(path)]
    record.write_text(json.dumps(dict(data, format=99, written_by="9.1.0")))
    before = record.read_bytes()
    assert "engine" in config.load(project).ignored          # fail safe: not trusted
    with pytest.raises(StateError, match="format 99"):
        config.set_trust(path, True)
    assert record.read_bytes() == before
