"""The egress record: every connection attempt through a session's proxy, and every direct
one around it (``via: direct``, refused: engines/overlay/holder/direct.py), as the proxy
appended it to ``egress.jsonl`` in the sandbox directory (see engines/overlay/holder/egress_proxy.py),
summed up for ``workspace status`` and the Stop hook, and listed per call
(``workspace status --network``).

The proxy writes an attempt when it decides it (engines/overlay/holder/live.py): a refusal
as one line; an allowed connection as a ``state: open`` line, then a ``state: close`` line
with the same ``conn`` and its bytes. :func:`attempts` merges them: an attempt with no close
yet is ``open`` while the proxy that wrote it runs (it holds a lock in ``egress.live/``); a
proxy killed outright wrote no close, and its open attempts read as ended, with the error
saying so. Connections refused over the proxy's limit are one line per burst
(``via: limit``, ``count``)."""

from __future__ import annotations

from pathlib import Path

from manager import fastjson  # status may not import json (tests/test_startup_imports.py)

RECORD = "egress.jsonl"
LIVE_DIR = "egress.live"   # holder/live.py: a lock per running proxy
ORPHANED = "the proxy ended without closing it (killed)"
POLICY = "network.json"
SEEN = "egress.seen"     # how many refused attempts the Stop hook has already mentioned

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


CLOSE_FIELDS = ("up", "down", "seconds", "error", "closed")


def attempts(sandbox: Path) -> list[dict[str, Any]]:
    """The attempts in the order they were made, each close merged into its open line
    (``open``: no close yet); a torn or foreign line is skipped."""
    try:
        text = (sandbox / RECORD).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    opened: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            entry = fastjson.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("host"), str):
            continue
        conn, state = entry.pop("conn", None), entry.pop("state", None)
        if state == "close" and isinstance(conn, str) and conn in opened:
            opened.pop(conn).update({k: entry[k] for k in CLOSE_FIELDS if k in entry}, open=False)
            continue
        if state == "open" and isinstance(conn, str):
            opened[conn] = entry
        entry["open"] = state == "open"
        out.append(entry)
    if opened:
        _orphans_ended(sandbox, opened)
    return out


def _orphans_ended(sandbox: Path, opened: dict[str, dict[str, Any]]) -> None:
    """An open attempt whose proxy no longer holds its lock is over: the proxy died."""
    alive: dict[str, bool] = {}
    for conn, entry in opened.items():
        prefix = conn.rpartition(".")[0]
        if prefix not in alive:
            alive[prefix] = _proxy_runs(sandbox, prefix)
        if not alive[prefix]:
            entry.update(open=False, error=ORPHANED)


def _proxy_runs(sandbox: Path, prefix: str) -> bool:
    from manager.fs.util import held

    return "/" not in prefix and prefix not in ("", ".", "..") and held(sandbox / LIVE_DIR / prefix)


def awaited(sandbox: Path, holds: Callable[[list[dict[str, Any]]], bool],
            seconds: float = 5.0) -> tuple[bool, list[dict[str, Any]]]:
    """(whether ``holds`` came true, the attempts last read): the record read again until it
    does or ``seconds`` pass. doctor's probes: the proxy writes an attempt's lines as it
    decides and as the connection ends, on a loaded machine a moment after the call returned."""
    import time

    deadline = time.monotonic() + seconds
    while not holds(found := attempts(sandbox)):
        if time.monotonic() > deadline:
            return False, found
        time.sleep(0.05)
    return True, found


def size(entry: dict[str, Any]) -> int:
    """How many attempts a line stands for (a burst over the proxy's limit is one line)."""
    count = entry.get("count")
    return count if isinstance(count, int) and count > 0 else 1


def mode(sandbox: Path) -> dict[str, Any]:
    """The policy the sandbox was started with (open when none was written)."""
    try:
        policy = fastjson.loads((sandbox / POLICY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"mode": "open", "allow": []}
    return policy if isinstance(policy, dict) else {"mode": "open", "allow": []}


def address(host: str, port: object) -> str:
    """A host as the record's text shows it: the name the sandbox gave (any bytes, through
    SOCKS5's domain field) quoted as file names are, so it cannot drive a terminal or make a
    line of its own (ui.quote)."""
    from manager import ui

    host = ui.quote(host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def way(entry: dict[str, Any]) -> str:
    """"direct tcp" / "direct udp" for an attempt around the proxy, "over the limit" for
    connections the proxy refused unread, "" for one through it."""
    if entry.get("via") == "limit":
        return "over the limit"
    return f"direct {entry.get('proto') or 'tcp'}" if entry.get("via") == "direct" else ""


def where(host: str, port: object, via: object) -> str:
    return "(too many connections at once)" if via == "limit" else address(host, port)


def hosts(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (host, port, allowed, way): counts, bytes and calls; refused first, then by count."""
    table: dict[tuple[str, int, bool, str], dict[str, Any]] = {}
    for e in entries:
        key = (e["host"], int(e.get("port") or 0), bool(e.get("allowed")), way(e))
        row = table.setdefault(key, {"host": key[0], "port": key[1], "allowed": key[2],
                                     "via": str(e.get("via")) if key[3] else "proxy",
                                     "count": 0, "open": 0, "up": 0, "down": 0, "calls": []})
        row["count"] += size(e)
        row["open"] += 1 if e.get("open") else 0
        row["up"] += int(e.get("up") or 0)
        row["down"] += int(e.get("down") or 0)
        call = e.get("call") or ""
        if call and call not in row["calls"]:
            row["calls"].append(call)
    return sorted(table.values(), key=lambda r: (r["allowed"], -r["count"], r["host"], r["port"]))


def as_json(sandbox: Path) -> dict[str, Any]:
    entries = attempts(sandbox)
    policy = mode(sandbox)
    return {"mode": policy.get("mode", "open"), "allow": policy.get("allow", []),
            "attempts": sum(map(size, entries)),
            "refused": sum(size(e) for e in entries if not e.get("allowed")),
            "open": sum(1 for e in entries if e.get("open")),
            "hosts": hosts(entries), "record": entries}


def render(sandbox: Path) -> list[str]:
    """The status section; nothing when the network is open and nothing went through a proxy."""
    data = as_json(sandbox)
    if data["mode"] == "open" and not data["attempts"]:
        return []
    what = {"off": "off", "list": "only " + ", ".join(map(_quoted, data["allow"]))}.get(
        data["mode"], data["mode"])
    out = [f"Network ({what}): {data['attempts']} attempts, {data['refused']} refused{_open(data['open'])}"]
    for row in data["hosts"]:
        verdict = "allowed" if row["allowed"] else "REFUSED"
        calls = f"  calls: {', '.join(map(_quoted, row['calls']))}" if row["calls"] else ""
        sent = f", {row['up']} B up, {row['down']} B down" if row["allowed"] else ""
        direct = " direct" if row["via"] == "direct" else ""
        out.append(f"  {verdict} {where(row['host'], row['port'], row['via'])}{direct}  "
                   f"{row['count']}x{sent}{_open(row['open'])}{calls}")
    return out


def _open(count: int) -> str:
    return f", {count} still open" if count else ""


def by_call(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The attempts grouped by the call that made them, calls in the order of their first
    attempt; those no call can be told for ("": a `workspace run`, a command left running,
    a datagram whose sender had ended) last."""
    calls: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        calls.setdefault(str(e.get("call") or ""), []).append(e)
    ordered = [c for c in calls if c] + ([""] if "" in calls else [])
    return [{"call": c, "attempts": calls[c],
             "refused": sum(size(e) for e in calls[c] if not e.get("allowed"))} for c in ordered]


def describe(entry: dict[str, Any]) -> str:
    verdict = "allowed" if entry.get("allowed") else "REFUSED"
    what = way(entry) or _quoted(entry.get("method") or "")
    query = f" (dns {_quoted(entry['query'])})" if entry.get("query") else ""
    sent = f", {entry.get('up', 0)} B up, {entry.get('down', 0)} B down" if entry.get("allowed") else ""
    if entry.get("open"):
        sent = ", open"
    count = f", {size(entry)}x" if size(entry) > 1 else ""
    error = f", {_quoted(entry['error'])}" if entry.get("error") else ""
    host = where(entry["host"], entry.get("port", 0), entry.get("via"))
    return f"{verdict} {host} {what}{query}{sent}{count}{error}".rstrip()


def _quoted(text: object) -> str:
    from manager import ui

    return ui.shown(str(text))


def render_calls(sandbox: Path) -> list[str]:
    """``workspace status --network``: each call's attempts, in order."""
    import time

    data = as_json(sandbox)
    what = {"off": "off", "list": "only " + ", ".join(map(_quoted, data["allow"]))}.get(
        data["mode"], data["mode"])
    out = [f"Network ({what}): {data['attempts']} attempts, {data['refused']} refused"]
    for group in by_call(data["record"]):
        name = _quoted(group["call"]) if group["call"] else \
            "(no call: workspace run, or a command left running)"
        out.append(f"call {name}: {sum(map(size, group['attempts']))} attempts, {group['refused']} refused")
        for e in group["attempts"]:
            when = time.strftime("%H:%M:%S", time.localtime(float(e.get("time") or 0)))
            out.append(f"  {when} {describe(e)}")
    return out


def refused_since_last(sandbox: Path) -> list[dict[str, Any]]:
    """Refused attempts not mentioned before (the Stop hook's context); marks them seen."""
    entries = attempts(sandbox)
    try:
        seen = int((sandbox / SEEN).read_text().strip() or 0)
    except (OSError, ValueError):
        seen = 0
    if len(entries) <= seen:
        return []
    from manager.fs.util import write_atomic

    write_atomic(sandbox / SEEN, f"{len(entries)}\n".encode())
    return [e for e in entries[seen:] if not e.get("allowed")]


def stop_context(sandbox: Path) -> str | None:
    refused = refused_since_last(sandbox)
    if not refused:
        return None
    rows = hosts(refused)
    named = ", ".join(f"{where(r['host'], r['port'], r['via'])} ({r['count']}x)" for r in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    count = sum(map(size, refused))
    if mode(sandbox).get("mode") == "off":   # only direct attempts: there is no proxy
        return (f"workspace: the sandbox refused {count} network connection(s): {named}{more}; "
                "setting `network` is off for this session. Ask the user if the task needs the "
                "network; do not try to get around it.")
    return (f"workspace: the sandbox refused {count} network connection(s) to hosts not in "
            f"this session's allow list (setting `network`): {named}{more}. Ask the user to allow "
            "a host if the task needs it; do not try to get around the proxy.")
