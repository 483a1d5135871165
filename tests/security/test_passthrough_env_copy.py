"""Issue 20 (attack pass 5, lesser): passthrough ``docker run -e GH_TOKEN …`` copied a host
credential into a container.

``-e NAME`` (no ``=``) copies the host's value of NAME, and podman's ``--env 'GH*'`` every
variable matching the glob. The container engines keep such variables from sandboxed calls
(engines/container/enter.sh: ``*TOKEN*``, ``*SECRET*``… ``ANTHROPIC_*``…); a passthrough
form that copies one is sandboxed by the same rule (manager/claude/ctrforms.py), in any case
and spelling; a value the command gives itself (``-e NAME=VALUE``) is the agent's own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from manager import config
from manager.claude import ctrforms
from manager.claude import passthrough
from manager.claude import shell

DEFAULT = tuple(config.SCHEMA["passthrough"].default)
ENTER = Path(ctrforms.__file__).resolve().parents[1] / "engines" / "container" / "enter.sh"


def test_the_rule_is_the_container_engines_filter() -> None:
    """The names enter.sh keeps from calls are the ones passthrough may not copy."""
    text = ENTER.read_text()
    parts = re.search(r"^\s*(\*TOKEN\*\|[^)]*)\) continue", text, re.M)
    prefixes = re.search(r"^\s*(ANTHROPIC_\*\|[^)]*)\) continue", text, re.M)
    assert parts and prefixes, "enter.sh's secret patterns moved: update this test and ctrforms"
    assert tuple(p.strip("*") for p in parts.group(1).split("|")) == ctrforms.SECRET_PARTS
    assert tuple(p.rstrip("*") for p in prefixes.group(1).split("|")) == ctrforms.SECRET_PREFIXES


@pytest.mark.parametrize("line", [
    "docker run -e GH_TOKEN alpine env", "docker run --env GH_TOKEN alpine env",
    "docker run --env=AWS_SECRET_ACCESS_KEY alpine env", "podman run --env 'GH*' alpine env",
    "podman run -e '*' alpine env", "docker exec -e anthropic_api_key c env",
    "sudo -n docker run -it -e MY_PASSWORD alpine env", "docker create -e DB_PASSWD alpine",
    "podman exec -it -e NPM_TOKEN c sh", "docker run -d -e A=1 -e Azure_Client_Id alpine",
    "docker run -e X=1 --env Git_Credentials alpine", "podman run -e OPENAI_APIKEY alpine",
])
def test_copying_a_host_secret_into_a_container_is_sandboxed(line: str) -> None:
    assert not passthrough.passes(shell.parse(line), DEFAULT), line


@pytest.mark.parametrize("line", [
    "docker run -e GH_TOKEN=given-here alpine env", "docker run -e TERM alpine env",
    "podman run --env=HOME alpine true", "docker exec -e LANG c env",
    "docker run --rm alpine sh -c 'echo -e GH_TOKEN'",     # the container's own words
])
def test_other_env_forms_still_pass(line: str) -> None:
    assert passthrough.passes(shell.parse(line), DEFAULT), line
