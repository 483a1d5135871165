"""The user's permission rules, judged against the command the model asked for.

Claude Code matches its rules against the *rewritten* command (measured: see
docs/notes-claude-client.md), so a rewriter that only returned ``updatedInput``
would silently bypass deny rules and break allow rules. The hook therefore
reads the rules itself, from the same places the client does, and answers
``deny``, ``ask`` or ``allow`` for the original command:

- deny when any simple command of it (or the whole line) matches a deny rule,
- ask when any matches an ask rule,
- allow when the whole line, or every simple command in it, matches an allow
  rule (never with a ``$(...)`` in it, whose inside no rule has seen),
- otherwise what the permission mode would do.

Sources: managed settings, ``$CLAUDE_CONFIG_DIR/settings.json`` (or
``~/.claude/settings.json``), the project's ``.claude/settings.json`` (its allow
rules only when the project is trusted, as the client does) and
``.claude/settings.local.json``, and the ``--allowedTools`` /
``--disallowedTools`` / ``--settings`` flags on the client's command line (read
from ``/proc/$CLAUDE_PID/cmdline``: hooks are not told about them).
"""

from __future__ import annotations

import os

from manager import fastjson
from manager.claude import shell

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

MANAGED = "/etc/claude-code/managed-settings.json"
MANAGED_DROP_INS = "/etc/claude-code/managed-settings.d"
KINDS = ("deny", "ask", "allow")
# Commands the client lets run without a prompt in the default mode (read-only).
READ_ONLY = frozenset((
    "ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "grep", "egrep", "fgrep", "rg",
    "which", "type", "file", "stat", "du", "df", "tree", "sort", "uniq", "diff", "cut", "tr",
    "basename", "dirname", "realpath", "readlink", "date", "whoami", "id", "uname", "true",
    "false", "test", "[", "cd", "nl", "less", "more", "cmp", "comm", "jq", "hostname", "env",
))
# ... and what acceptEdits adds: file-editing commands.
EDITS = frozenset(("mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"))
UNSAFE_ARGS = {"find": ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf",
                        "-fls", "-fprint0"),
               "rg": ("--pre",), "sort": ("-o", "--output"), "env": ()}


class Rule:
    __slots__ = ("kind", "text", "source", "pattern")

    def __init__(self, kind: str, text: str, source: str, pattern: str | None) -> None:
        self.kind = kind
        self.text = text
        self.source = source
        self.pattern = pattern       # None: every use of the tool

    def matches(self, command: str) -> bool:
        if self.pattern is None:
            return True
        return _pattern_matches(self.pattern, command)


def _pattern_matches(pattern: str, command: str) -> bool:
    if pattern.endswith(":*"):               # legacy prefix rule: `npm run test:*`
        prefix = pattern[:-2]
        return command == prefix or command.startswith(prefix + " ")
    if "*" not in pattern:
        return command == pattern
    import re  # only for wildcard rules: re costs the hook start-up ~5 ms

    regex = ""
    for i, piece in enumerate(pattern.split("*")):
        if i:
            regex += ".*"
        regex += re.escape(piece)
    if pattern.endswith(" *"):               # `ls *` also matches a bare `ls`
        regex = regex[:-len(re.escape(" ")) - 2] + "(?: .*)?"
    return re.fullmatch(regex, command, re.DOTALL) is not None


def parse_rule(kind: str, text: Any, source: str, tool: str = "Bash") -> Rule | None:
    """A rule for ``tool`` (``Tool`` or ``Tool(specifier)``), or None for other tools."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if text in (tool, f"{tool}(*)"):
        return Rule(kind, text, source, None)
    if text.startswith(f"{tool}(") and text.endswith(")"):
        return Rule(kind, text, source, text[len(tool) + 1:-1].strip())
    return None


# -- where the rules come from ---------------------------------------------------


def config_dir() -> str:
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return fastjson.loads(f.read())
    except (OSError, ValueError):
        # An unreadable settings file: the client reports it; its rules are not applied.
        return None


def _rules_in(path: str, source: str, tool: str) -> Iterator[Rule]:
    yield from _rules_of(_read_json(path), source, tool)


def _rules_of(data: Any, source: str, tool: str) -> Iterator[Rule]:
    perms = data.get("permissions") if isinstance(data, dict) else None
    if not isinstance(perms, dict):
        return
    for kind in KINDS:
        entries = perms.get(kind)
        if isinstance(entries, list):
            for text in entries:
                rule = parse_rule(kind, text, source, tool)
                if rule is not None:
                    yield rule


def trusted(project: str) -> bool:
    """Whether the user accepted the trust dialog for the project (or a parent)."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    path = os.path.join(base, ".claude.json") if base else os.path.expanduser("~/.claude.json")
    data = _read_json(path)
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        return False
    candidate = project
    while True:
        entry = projects.get(candidate)
        if isinstance(entry, dict) and entry.get("hasTrustDialogAccepted"):
            return True
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return False
        candidate = parent


def client_argv(pid: str | None) -> list[str]:
    """The client's command line (hooks are not told about its flags), or []."""
    if not pid or not pid.isdigit():
        return []
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="surrogateescape").split("\0")
    except OSError:
        return []


def flag_rules(pid: str | None, tool: str = "Bash") -> Iterator[Rule]:
    """Rules given as --allowedTools/--disallowedTools on the client's command line."""
    kind = None
    for arg in client_argv(pid):
        name, _, value = arg.partition("=")
        if name in ("--allowedTools", "--allowed-tools", "--disallowedTools",
                    "--disallowed-tools"):
            kind = "allow" if name.startswith("--allowed") else "deny"
            if not value:
                continue
            arg = value
        elif arg.startswith("-"):
            kind = None
            continue
        if kind is not None:
            for text in _split_rule_list(arg):
                rule = parse_rule(kind, text, "command line", tool)
                if rule is not None:
                    yield rule


def settings_flag_rules(pid: str | None, tool: str = "Bash") -> Iterator[Rule]:
    """Rules in ``--settings FILE_OR_JSON`` on the client's command line."""
    argv = client_argv(pid)
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name != "--settings":
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        yield from _rules_of(_settings_value(value, pid), "--settings rules", tool)


def _settings_value(value: str, pid: str | None) -> Any:
    """--settings takes inline JSON or a file, relative to the client's directory."""
    if value.lstrip().startswith("{"):
        try:
            return fastjson.loads(value)
        except ValueError:
            return None
    if value and not value.startswith("/"):
        try:
            value = os.path.join(os.readlink(f"/proc/{pid}/cwd"), value)
        except OSError:
            return None
    return _read_json(value) if value else None


def _split_rule_list(value: str) -> list[str]:
    """``"Bash(git:*) Edit, Read"`` into rules; spaces inside parentheses kept."""
    rules, depth, current = [], 0, ""
    for c in value:
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        if depth == 0 and c in " ,":
            if current:
                rules.append(current)
            current = ""
        else:
            current += c
    if current:
        rules.append(current)
    return rules


def _drop_ins(directory: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    except OSError:
        return []


def load_rules(project: str, tool: str = "Bash") -> list[Rule]:
    """Every rule for ``tool`` the client applies, from every source."""
    rules = list(_rules_in(MANAGED, "managed settings", tool))
    for name in _drop_ins(MANAGED_DROP_INS):
        rules += _rules_in(os.path.join(MANAGED_DROP_INS, name), "managed settings", tool)
    rules += _rules_in(os.path.join(config_dir(), "settings.json"), "user settings", tool)
    project_settings = os.path.join(project, ".claude", "settings.json")
    project_rules = list(_rules_in(project_settings, "project settings", tool))
    if any(r.kind == "allow" for r in project_rules) and not trusted(project):
        project_rules = [r for r in project_rules if r.kind != "allow"]
    rules += project_rules
    rules += _rules_in(os.path.join(project, ".claude", "settings.local.json"),
                       "local settings", tool)
    pid = os.environ.get("CLAUDE_PID")
    rules += flag_rules(pid, tool)
    rules += settings_flag_rules(pid, tool)
    return rules


# -- judging ----------------------------------------------------------------------


class Verdict:
    __slots__ = ("decision", "reason")

    def __init__(self, decision: str, reason: str) -> None:
        self.decision = decision
        self.reason = reason


def _candidates(part: shell.Part) -> list[str]:
    """A simple command as rules see it: as written, and without leading VAR=value."""
    texts = [part.text]
    if part.assignments and part.argv:
        texts.append(" ".join(part.argv))
    return texts


# Commands that run their arguments as a command: a deny or ask rule for `rm` also
# holds for `sudo rm`, `command rm`, `env X=1 rm`... (options skipped; values of the
# options listed with them too).
WRAPPERS = {"sudo": ("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"), "doas": ("-u",),
            "command": (), "builtin": (), "exec": ("-a",), "nohup": (), "time": (),
            "nice": ("-n",), "env": ("-u", "-C", "-S"), "timeout": ("-s", "-k"),
            "stdbuf": ("-i", "-o", "-e"), "ionice": ("-c", "-n", "-p"), "xargs": (),
            "setsid": (), "chroot": ()}


def unwrapped(argv: list[str]) -> list[str]:
    """``argv`` without the wrappers in front of the command they run."""
    for _ in range(8):
        if not argv or argv[0] not in WRAPPERS:
            return argv
        name, takes_value, i = argv[0], WRAPPERS[argv[0]], 1
        if name == "command" and any(a in ("-v", "-V") for a in argv[1:2]):
            return []                          # only looks the name up
        while i < len(argv) and (argv[i].startswith("-") or
                                 (name == "env" and shell.is_assignment(argv[i]))):
            i += 2 if argv[i] in takes_value else 1
        if name in ("timeout", "chroot") and i < len(argv):
            i += 1                             # the duration, the new root
        argv = argv[i:]
    return argv


def _strict_candidates(part: shell.Part) -> list[str]:
    """For deny and ask: also the command a wrapper runs."""
    texts = _candidates(part)
    inner = unwrapped(part.argv)
    if inner and inner != part.argv:
        texts.append(" ".join(inner))
    return texts


def _all_parts(command: str, script: shell.Script, depth: int = 0) -> list[shell.Part]:
    parts = list(script.parts)
    if depth < 4:
        for inner in script.nested:
            parts += _all_parts(inner, shell.parse(inner), depth + 1)
    return parts


def _first(rules: list[Rule], kind: str, texts: list[str]) -> Rule | None:
    for rule in rules:
        if rule.kind == kind and any(rule.matches(t) for t in texts):
            return rule
    return None


def by_rule(command: str, script: shell.Script, rules: list[Rule]) -> Verdict | None:
    """A deny or ask rule that holds for any part of the command, or None."""
    every = [command.strip()] + [t for p in _all_parts(command, script)
                                 for t in _strict_candidates(p)]
    for kind in ("deny", "ask"):
        rule = _first(rules, kind, every)
        if rule is not None:
            return Verdict(kind, f"your {rule.source} say {kind} for {rule.text}")
    return None


def judge(command: str, script: shell.Script, mode: str, rules: list[Rule]) -> Verdict:
    verdict = by_rule(command, script, rules)
    if verdict is not None:
        return verdict
    whole = command.strip()
    parts = _all_parts(command, script)
    simple = len(script.parts) == 1 and not (script.compound or script.substitution)
    rule = _first(rules, "allow", [whole]) if simple else None
    if rule is not None:
        return Verdict("allow", f"allowed by {rule.text} ({rule.source}); runs in the sandbox")
    if parts and not script.substitution and all(_first(rules, "allow", _candidates(p))
                                                 for p in parts):
        return Verdict("allow", "allowed by your rules; runs in the workspace sandbox")
    return by_mode(mode, script)


def by_mode(mode: str, script: shell.Script) -> Verdict:
    """No rule matched: what the client itself would do in this permission mode."""
    if mode == "bypassPermissions":
        return Verdict("allow", "bypassPermissions; runs in the workspace sandbox")
    if mode == "dontAsk":
        return Verdict("deny", "this command is not pre-approved and Claude Code runs in "
                               "don't-ask mode (add an allow rule for it)")
    allowed = READ_ONLY | EDITS if mode == "acceptEdits" else READ_ONLY
    if _only(script, allowed):
        return Verdict("allow", "a read-only command; runs in the workspace sandbox")
    return Verdict("ask", "its changes wait for your review")


def _only(script: shell.Script, allowed: frozenset[str]) -> bool:
    if script.substitution or script.compound or script.unterminated or not script.parts:
        return False
    for part in script.parts:
        argv = part.argv
        if part.assignments or not argv or argv[0] not in allowed:
            return False
        if part.file_redirect and argv[0] not in EDITS:
            return False
        if any(a.startswith(u) for a in argv[1:] for u in UNSAFE_ARGS.get(argv[0], ())):
            return False
        if argv[0] == "env" and len(argv) > 1:
            return False
    return True
