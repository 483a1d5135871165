"""doctor proves confinement on the engine in use (issue 24): one call of a scratch session
reads a hidden secret and connects out. Where the engine takes a list of hosts (overlay,
podman, docker), a test server on this host's 127.0.0.2 is listed: it must answer through
the session's proxy, a host not listed must be refused, both must be on the record, and no
connection goes around the proxy (one that tries is refused at once and on the record); where
it cannot (try), ``network: off`` is probed and nothing may answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.commands import confine_probe
from tests.engines.conftest import engine_cli
from tests.engines.conftest import using_engine

pytestmark = pytest.mark.engine

PROBED = {"overlay": "list", "try-main": "off", "podman": "list", "docker": "list"}


@pytest.fixture(params=sorted(PROBED))
def probed_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def test_doctor_probes_the_network_of_the_engine_in_use(ws, tmp_path: Path, probed_engine: str):
    config = tmp_path / "config/workspace/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("network: off\n")
    only = ["--engine", engine_cli(probed_engine)]
    report = json.loads(ws("doctor", *only, "--json").stdout)
    network = report["network"]
    assert (network["setting"], network["probed"], network["held"]) == (
        "off", PROBED[probed_engine], True), network
    assert report["hide"]["held"] is not None, report["hide"]
    if PROBED[probed_engine] == "list":   # the watched pair: around the proxy, on the record too
        assert network["detail"].endswith("a direct attempt was refused and recorded"), network
    if probed_engine == "overlay":   # the text form: one engine is enough
        text = ws("doctor", *only).stdout
        assert "network: off" in text and "probe (overlay, network list)" in text, text


def _said(*lines: str) -> str:
    return "".join(f"net {line}\n" for line in lines)


@pytest.mark.parametrize("seen", [
    _said("listed failed URLError", "unlisted failed URLError", "direct reached 127.0.0.2",
          "direct failed 192.0.2.1"),
    _said("listed workspace network probe", "unlisted failed URLError",
          "direct failed 127.0.0.2", "direct failed 192.0.2.1"),
    _said("listed failed URLError"),
])
def test_a_connection_that_answers_with_network_off_fails_the_probe(seen: str):
    verdict = confine_probe._network(seen, "off", None)   # type: ignore[arg-type]
    assert verdict.held is False, verdict


@pytest.mark.parametrize("seen", [
    _said("listed workspace network probe", "unlisted reached", "direct failed 127.0.0.2",
          "direct failed 192.0.2.1"),
    _said("listed workspace network probe", "unlisted 403", "direct failed 127.0.0.2",
          "direct reached 192.0.2.1"),
    _said("listed failed URLError", "unlisted 403", "direct failed 127.0.0.2",
          "direct failed 192.0.2.1"),
])
def test_a_list_that_lets_through_what_it_should_not_fails_the_probe(seen: str):
    verdict = confine_probe._network(seen, "list", None)   # type: ignore[arg-type]
    assert verdict.held is False, verdict


def test_a_direct_attempt_refused_at_once_must_be_on_the_record(tmp_path: Path):
    """The watched pair answered (ECONNREFUSED), so its record must hold the attempt: a
    record with only the proxy's two fails the probe, one with it too holds."""
    from types import SimpleNamespace

    from manager.engines.overlay import netprobe

    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    session = SimpleNamespace(sandbox=sandbox)
    seen = _said(f"listed {netprobe.GREETING.decode()}", "unlisted 403",
                 "direct failed 127.0.0.2 111", "direct failed 192.0.2.1 111")
    lines = [{"host": "127.0.0.2", "port": 1, "allowed": True, "call": ""},
             {"host": "refused.invalid", "port": 1, "allowed": False, "call": ""}]
    record = sandbox / "egress.jsonl"
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert confine_probe._network(seen, "list", session).held is False   # type: ignore[arg-type]
    with record.open("a") as f:
        f.write(json.dumps({"host": "192.0.2.1", "port": 1, "allowed": False, "via": "direct",
                            "call": ""}) + "\n")
    verdict = confine_probe._network(seen, "list", session)   # type: ignore[arg-type]
    assert verdict.held is True and verdict.detail.endswith("refused and recorded"), verdict
    # Unreachable (no pair: the helper could not): it holds, and says the log's reason.
    (sandbox / "egress.log").write_text("network: direct connections are refused but not "
                                        "recorded (no such image)\n")
    seen = seen.replace("192.0.2.1 111", "192.0.2.1 101")
    verdict = confine_probe._network(seen, "list", session)   # type: ignore[arg-type]
    assert verdict.held is True and verdict.detail.endswith("not recorded (no such image)"), verdict
