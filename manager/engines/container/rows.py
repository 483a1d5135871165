"""Engine output read so that no value can forge a row.

A label (or any string the agent sets) may hold a newline or spaces, so text such as
``ps --format '{{.ID}} {{.Names}} {{.Label ...}}'`` split into lines and words lets one
container's label print a second row naming any other container (attack pass 7: gc then
removed it). Here ids come from ``ps -q`` alone, each checked for an id's shape, and every
other field is JSON, decoded value by value; a row whose id is not one asked for is dropped.
"""

from __future__ import annotations

import json
import re

# One line per container: its id, name and labels, each a JSON value.
INSPECT_FORMAT = "{{json .ID}} {{json .Name}} {{json .Config.Labels}}"   # .ID: podman has no .Id
_ID = re.compile(r"[0-9a-f]{12,64}")


def ids(text: str) -> list[str]:
    """The ids of ``ps -q`` output; any line that is not one is dropped."""
    return [line for line in (raw.strip() for raw in text.splitlines()) if _ID.fullmatch(line)]


def parse(text: str, asked: list[str]) -> list[tuple[str, str, dict[str, object]]]:
    """(id, name, labels) of each line of :data:`INSPECT_FORMAT` output whose id is one of
    ``asked`` and whose name is a string; a line that does not decode is dropped."""
    wanted = set(asked)
    found = []
    for line in text.splitlines():
        values = _values(line)
        if values is None or len(values) != 3:
            continue
        ident, name, labels = values
        if not (isinstance(ident, str) and ident in wanted and isinstance(name, str)):
            continue
        found.append((ident, name.removeprefix("/"), labels if isinstance(labels, dict) else {}))
    return found


def _values(line: str) -> list[object] | None:
    decoder = json.JSONDecoder()
    values, i = [], 0
    try:
        while i < len(line):
            while i < len(line) and line[i] == " ":
                i += 1
            if i == len(line):
                break
            value, i = decoder.raw_decode(line, i)
            values.append(value)
    except ValueError:
        return None
    return values
