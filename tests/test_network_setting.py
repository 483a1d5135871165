"""Setting ``network`` (issue 24): its values, the hosts a list allows, the requests the
proxy reads, and the trust rule (an untrusted project file may only narrow it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manager import config
from manager.egress import launch
from manager.egress import setting
from manager.engines.overlay.holder import egress_proxy
from manager.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("raw, value", [
    ("open", "open"), ("OFF", "off"), (False, "off"), ("none", "off"),
    (["pypi", "Example.com:8080", "*.corp.example"], ["pypi", "example.com:8080", "*.corp.example"]),
    ("pypi,github.com", ["pypi", "github.com"]),
    ('["127.0.0.1:80"]', ["127.0.0.1:80"]),
])
def test_values(raw, value):
    assert setting.parse(raw) == value


@pytest.mark.parametrize("bad", ["exa mple.com", "host:99999", "a/b", "http://x.com", 3])
def test_malformed_entries_are_config_errors(project, bad):
    write(project / ".workspace.yaml", f"network: {json.dumps([bad] if bad != 3 else bad)}\n")
    config.set_trust(project / ".workspace.yaml", True)
    with pytest.raises(ConfigError, match="network"):
        config.load(project)


def test_a_preset_expands_to_its_registry_hosts():
    policy = setting.policy(["pypi", "example.com"])
    assert policy == {"mode": "list", "allow": ["pypi.org:443", "files.pythonhosted.org:443",
                                                "example.com"]}


@pytest.mark.parametrize("host, port, ok", [
    ("example.com", 1, True), ("EXAMPLE.com.", 443, True), ("sub.example.com", 443, False),
    ("api.corp.example", 443, True), ("a.b.corp.example", 8, True), ("corp.example", 443, False),
    ("evilcorp.example", 443, False), ("pypi.org", 443, True), ("pypi.org", 80, False),
    ("127.0.0.1", 8080, True), ("127.0.0.1", 8081, False), ("::1", 9, True),
])
def test_which_hosts_a_list_allows(host, port, ok):
    allow = setting.expand(["example.com", "*.corp.example", "pypi", "127.0.0.1:8080", "[::1]"])
    assert egress_proxy.allowed(allow, host, port) is ok


@pytest.mark.parametrize("current, proposed, ok", [
    ("open", "off", True), ("open", ["x.com"], True), ("open", "open", True),
    (["x.com"], "off", True), (["x.com"], "open", False), ("off", ["x.com"], False),
    (["x.com"], ["x.com:443"], True), (["x.com:443"], ["x.com"], False),
    (["*.x.com"], ["a.x.com", "*.b.x.com"], True), (["*.x.com"], ["x.com"], False),
    (["pypi"], ["pypi.org:443"], True), (["pypi.org:443"], ["pypi"], False),
])
def test_what_narrows(current, proposed, ok):
    assert setting.narrows(current, proposed) is ok


def test_an_untrusted_project_file_may_narrow_the_network_but_never_open_it(tmp_path, project):
    user = write(tmp_path / "config/workspace/config.yaml", "network: [pypi, example.com]\n")
    path = write(project / ".workspace.yaml", "network: [example.com:443]\n")
    cfg = config.load(project)
    assert (cfg["network"], cfg.sources["network"]) == (["example.com:443"], str(path))
    write(path, "network: open\n")
    cfg = config.load(project)
    assert (cfg["network"], cfg.sources["network"]) == (["pypi", "example.com"], str(user))
    assert "not trusted" in cfg.ignored["network"]
    write(path, "network: [evil.example]\n")
    assert config.load(project)["network"] == ["pypi", "example.com"]
    config.set_trust(path, True)   # the user read it: it may widen
    assert config.load(project)["network"] == ["evil.example"]


def test_claude_allowed_domains_apply_when_network_is_not_set(tmp_path, project, monkeypatch):
    settings = {"sandbox": {"network": {"allowedDomains": ["github.com", "*.npmjs.org", "a b"]}}}
    write(project / ".claude/settings.json", json.dumps(settings))
    assert launch.effective(config.load(project), str(project)) == ["github.com", "*.npmjs.org"]
    monkeypatch.setenv("WORKSPACE_NETWORK", "off")
    assert launch.effective(config.load(project), str(project)) == "off"


@pytest.mark.parametrize("head, parsed", [
    (b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", ("CONNECT", "pypi.org", 443)),
    (b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", ("CONNECT", "::1", 8443)),
    (b"GET http://Example.com/a?b HTTP/1.1\r\nHost: example.com\r\n\r\n", ("GET", "example.com", 80)),
    (b"POST http://u:p@h.example:81/ HTTP/1.0\r\n\r\n", ("POST", "h.example", 81)),
    (b"GET /relative HTTP/1.1\r\n\r\n", None),
    (b"CONNECT h.example:0 HTTP/1.1\r\n\r\n", None),
    (b"garbage\r\n\r\n", None),
])
def test_requests_the_proxy_reads(head, parsed):
    request = egress_proxy.parse_request(head)
    assert (request[:3] if request else None) == parsed


def test_a_plain_request_goes_on_in_origin_form_without_proxy_headers():
    head = (b"GET http://h.example:8080/x/y?z=1 HTTP/1.1\r\nHost: h.example:8080\r\n"
            b"Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n")
    request = egress_proxy.parse_request(head)
    assert request is not None
    assert request[3] == (b"GET /x/y?z=1 HTTP/1.1\r\nHost: h.example:8080\r\nAccept: */*\r\n"
                          b"Connection: close\r\n\r\n")


def test_containers_get_the_network_only_when_both_settings_open_it(project, monkeypatch):
    """A list never opens the engine's network: it goes through the session's proxy
    (tests/engines/test_network_containers.py)."""
    for container, network, gets in (("true", "open", True), ("true", "off", False),
                                      ("false", "open", False), ("false", "pypi", False),
                                      ("true", "pypi", False)):
        monkeypatch.setenv("WORKSPACE_CONTAINER__NETWORK", container)
        monkeypatch.setenv("WORKSPACE_NETWORK", network)
        assert launch.container_network(config.load(project)) is gets
