from __future__ import annotations

import pytest

from manager.claude import shell


def words(command: str) -> list[list[str]]:
    return [p.words for p in shell.parse(command).parts]


@pytest.mark.parametrize(("command", "expected"), [
    ("git status && ls -la", [["git", "status"], ["ls", "-la"]]),
    ("a || b; c | d |& e & f", [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]),
    ("echo 'x; y' \"a b\" c\\ d", [["echo", "x; y", "a b", "c d"]]),
    ("echo $'it\\'s'", [["echo", "it\\'s"]]),
    ("a\nb", [["a"], ["b"]]),
    ("ls \\\n -la", [["ls", "-la"]]),
    ("ls # a comment; rm -rf /", [["ls"]]),
    ("echo héllo ✓", [["echo", "héllo", "✓"]]),
])
def test_splits_into_simple_commands(command: str, expected: list[list[str]]) -> None:
    assert words(command) == expected


@pytest.mark.parametrize("command", ["echo $(rm x)", "echo `id`", 'echo "$(id)"',
                                     "diff <(ls) b", "tee >(cat)"])
def test_substitutions_are_flagged(command: str) -> None:
    assert shell.parse(command).substitution


def test_nested_commands_are_kept_for_judging() -> None:
    assert shell.parse("echo $(rm -rf x) `id`").nested == ["rm -rf x", "id"]


@pytest.mark.parametrize(("command", "redirect"), [
    ("ls > out", True), ("ls >> out", True), ("cat < in", True), ("ls &> out", True),
    ("ls 2>/dev/null", False), ("ls 2>&1", False), ("ls >&2", False), ("ls &>/dev/null", False),
    ("cat <<< text", True), ("ls 2>&-", False),
])
def test_redirections(command: str, redirect: bool) -> None:
    (part,) = shell.parse(command).parts
    assert part.file_redirect is redirect


def test_heredoc_body_is_not_commands() -> None:
    script = shell.parse("cat <<'EOF' > f\nrm -rf /\n$(boom)\nEOF\necho done")
    assert [p.words for p in script.parts] == [["cat"], ["echo", "done"]]
    assert script.parts[0].file_redirect and not script.unterminated


def test_compound_syntax_is_flagged_and_inner_commands_kept() -> None:
    script = shell.parse("if true; then rm -rf x; fi")
    assert script.compound
    assert [p.text for p in script.parts] == ["true", "rm -rf x"]
    assert shell.parse("(cd x && ls)").compound
    assert shell.parse("{ ls; }").compound
    assert shell.parse("f() { ls; }").compound


@pytest.mark.parametrize("command", ["echo 'open", 'echo "open', "echo $(open", "cat <<EOF\nx"])
def test_unterminated(command: str) -> None:
    assert shell.parse(command).unterminated


def test_assignments_prefix() -> None:
    (part,) = shell.parse("FOO=1 BAR+=2 git log").parts
    assert part.assignments == ["FOO=1", "BAR+=2"] and part.argv == ["git", "log"]


def test_huge_and_binary_looking_input_does_not_break() -> None:
    text = "echo " + "a'b\"c$d`e\\" * 20000 + "\x01\x7f\x1b[0m"
    shell.parse(text)                          # terminates, no exception
    assert shell.parse("echo \x01\x02 \x1b[31m").parts[0].words == ["echo", "\x01\x02", "\x1b[31m"]


@pytest.mark.parametrize("command", [
    "docker ps ${X:+ #}; id", "docker ps $X", 'docker ps "$X"', "docker ps {a,b}", "docker ps *",
    "docker ps [-]v", "docker ps ~", "docker ps # note", "docker ps a#b", "docker ps !x",
    "docker ps $'\\x2dv'", 'docker ps $"x"', "docker ps $((1))", "docker ps \\", "; docker ps",
    "docker ps ;; x", "docker ps &&", "docker ps |", "docker ps 'a", "docker ps\0x",
    "docker ps '2'>/dev/null", "docker ps \\2>&1", "docker ps é", "(docker ps)",
    "docker ps > out", "docker ps >&3", "docker ps 5</dev/null", "docker ps 21>&-",
])
def test_lines_bash_would_interpret_are_not_plain(command: str) -> None:
    assert not shell.parse(command).plain


@pytest.mark.parametrize(("command", "requoted"), [
    ("docker  ps\t-a", "docker ps -a"),
    ("docker ps 'a b' \"c'd\" e\\ f", "docker ps 'a b' 'c'\"'\"'d' 'e f'"),
    ("docker ps 2>/dev/null |& gh pr list &", "docker ps 2>/dev/null |& gh pr list &"),
    ("a\n\nb;\nc &&\n d", "a; b; c && d"),
    ("docker ps 2&>/dev/null", "docker ps 2 &>/dev/null"),   # &> takes no fd: 2 is a word
    ("'A=1' y", "'A=1' y"),                   # a program of that name, not an assignment
    ('docker ps "a\\\nb"', "docker ps ab"),
])
def test_requote(command: str, requoted: str) -> None:
    script = shell.parse(command)
    assert script.plain and shell.requote(script) == requoted
