"""Differential fuzzing of the passthrough judge against real bash.

A command line that runs outside the sandbox must run exactly the commands the judge
saw. 3,000 command lines are generated (random.Random(SEED), a grammar of words made
of plain characters, quotes of every kind, `$VAR`, `${V:+ #}`, `$IFS`, `${U:--v}`,
`$'..'`, `$".."`, arithmetic, braces, globs, tildes, history, comments, `;`, `&&`,
`||`, `|`, `|&`, `&`, `;;`, newlines, backslash-newlines, heredocs, redirections,
substitutions, with a passthrough program or the plugin's launcher first), plus a fixed
corpus: every line of tests/security/test_passthrough_escapes.py (the git/gh/container/
sudo escapes, the exact forms that still pass, the lines bash read differently: MISREAD)
and the attack passes' findings spelled with `docker` and `podman` (pass 5's: selectors
that pick targets without naming them, a host secret copied into a container; what each
option means per subcommand and engine is held to the engines' own help by
test_ctr_option_tables.py).

For each line the judge lets through (the hook's own functions: ``own_script``,
``passes``), real bash runs both the line as the agent wrote it and the line the hook
hands the client instead (:func:`shell.requote`), in a hostile environment (`__Q=1`,
`U=-v`, an `IFS` with `-` and `/` in every other line, files named `-v`, `x1`, `x2`
for globs to match, `$HOME` elsewhere), with PATH a directory where every passthrough
program is a script recording its argv. What bash ran (argvs, and any other command
name it looked up) must be what the judge's parts say would run. The lines are run
by a few bash processes, each line in its own subshell (a few seconds in all).
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from manager import config
from manager.claude import passthrough
from manager.claude import shell
from tests.claude.conftest import REPO
from tests.claude.conftest import Claude

from . import test_passthrough_escapes as escapes

SEED = 20                       # the issue this fuzzer came with
CASES = 3000
DEFAULT = tuple(config.SCHEMA["passthrough"].default)
FINDINGS = [                    # the attack pass's lines, as it wrote them
    "docker ps -q ${__Q:+ #}; touch {m}",
    "{own} status ${__Q:+ #}; touch {m}",
    "docker run --rm {-v,/victim:/h,IMG,sh,-c,'touch /h/x'}",
    "docker run --rm $IFS-v$IFS/victim:/h IMG sh -c 'touch /h/x'",
    "podman run --rm ${U:--v} /victim:/h IMG sh -c 'touch /h/x'",
    "docker run --rm [-]v /victim:/h IMG",
    # attack pass 5: targets picked by a selector, not named; a host secret copied in
    "docker stop -f name=workspace-x; touch {m}", "docker rm -f --filter label=org.workspace.x",
    "docker pause --filter=label=org.workspace.session", "docker rmi -a -f",
    "docker run --rm --replace --name workspace-x IMG true", "docker image rm --all --force",
    "docker run --rm -e GH_TOKEN IMG sh -c 'touch {m}'", "docker volume prune -f",
]

# -- the grammar -------------------------------------------------------------------

HEADS = ["docker run --rm img", "podman run -it img", "docker exec ctr", "gh api",
         "sudo docker exec ctr", "docker ps", "podman images -q", "gh pr view 1",
         "sudo -n podman run img", "{own} status", "{own} diff", "docker", "podman stop",
         "docker rm -f"]
PLAIN = ["a", "-v", "/victim:/h", "IMG", "x1", "sh", "-c", "--rm", "ps", "A=1", "%", "@x",
         ",", ".", "+", "-", "--", "a=b", "docker", "gh", "x:y", "1", "2", "-f", "--filter",
         "name=x", "-e", "GH_TOKEN"]
QUOTED = ["'a b'", "'#'", "' #; docker ps'", "'$IFS'", "'{-v,x}'", "'*'", "'a\nb'", "''",
          '"a b"', '"#"', '" ; x"', '"\\""', '"\\\\"', '"\\$x"', '"a\\\nb"', '"\'"', '""',
          "\\ ", "\\#", "\\$", "\\;", "\\\\", "\\'", '\\"', "\\*", "\\{", "'-v'", '"-v"',
          "'é'", "'\t'", '"\\a"', "'\\'", "\\\n"]
HOSTILE = ["$V", "${V}", "${__Q:+ #}", "${__Q:+ # }", "${U:--v}", "$IFS", "${IFS}", "$((1+1))",
           "$1", "$@", "$*", "$#", "$$", "$?", "$-", "$'\\x2dv'", "$'a\\'b'", "$'\\n'",
           '$"x"', '"$V"', '"${U:--v}"', '"$(docker ps)"', "$(docker ps)", "`docker ps`",
           "{a,b}", "{1..3}", "{-v,/victim:/h}", "{-v,}", "*", "?", "[-]v", "x[12]", "x?",
           "~", "~root", "~/x", "#", "#x", "a#b", "!", "!!", "!$", "^a^b", "(", ")", "<x",
           ">x", ">>x", "2>x", "<<<x", "<(x)", ">(x)", '"2">/dev/null', "2\\>/dev/null",
           "{fd}>/dev/null", "\\2>&1", "'2'>/dev/null", "2&>/dev/null", "&>x", ">&x",
           "a\rb", "\u00a0", "é", "\\", "$", '"!x"', "a&b", "a;b", "a|b", "<>/dev/null",
           '"`x`"', "\\\n#", "'", '"', "((", "[[", "=~", "a=~", "--x=~", "${V:?x}",
           "${#V}", "${V/a/b}", "$[1]"]
SAFE_REDIRECTS = ["2>/dev/null", ">/dev/null", "2>&1", ">&2", "&>/dev/null", "</dev/null",
                  "2> /dev/null", "1>&-", "2&>/dev/null", "3&>>/dev/null",
                  ">'/dev/null'", '2>"/dev/null"', ">|/dev/null"]
OPERATORS = ["; ", " && ", " || ", " | ", " |& ", " & ", "\n", ";", "&&", "|", "\n\n",
             " ;; ", ";\n", " &&\n", " |\n", "\\\n; "]
ENDINGS = ["", "", "", ";", " &", "\n", " #x", " # ; docker ps", "\\", " \\\n", " &&", " |"]
SEPARATORS = [" ", " ", " ", "\t", "  ", " \\\n "]


def _word(rng: random.Random, hostile: bool) -> str:
    pieces = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        roll = rng.random()
        if hostile and roll < 0.3:
            pieces.append(rng.choice(HOSTILE))
        elif roll < 0.65:
            pieces.append(rng.choice(PLAIN))
        elif roll < 0.95:
            pieces.append(rng.choice(QUOTED))
        else:
            pieces.append(rng.choice(SAFE_REDIRECTS))
    return "".join(pieces)


def _part(rng: random.Random, hostile: bool) -> str:
    words = [rng.choice(HEADS)] + [_word(rng, hostile) for _ in range(rng.randint(0, 4))]
    if rng.random() < 0.15:
        words.insert(rng.randint(1, len(words)), rng.choice(SAFE_REDIRECTS))
    if hostile and rng.random() < 0.05:
        words.append("<<EOF\nbody $V\nEOF\n" + rng.choice(HEADS))
    line = words[0]
    for word in words[1:]:
        line += rng.choice(SEPARATORS) + word
    return line


def generate(seed: int, count: int) -> list[str]:
    """``count`` command lines, the same for the same seed."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        hostile = rng.random() < 0.5
        line = _part(rng, hostile)
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            line += rng.choice(OPERATORS) + _part(rng, hostile)
        lines.append(rng.choice(("", "", "\n", " ")) + line + rng.choice(ENDINGS))
    return lines


def corpus(bench: Bench) -> list[str]:
    """The escape tests' lines (str.format templates there) and the findings."""
    own, marker = str(bench.plugin / passthrough.OWN), str(bench.root / "escaped")
    return ([t.format(m=marker, own=own)
             for t in escapes.CORPUS + escapes.STILL_PASS + escapes.MISREAD]
            + [bench.line(t) for t in FINDINGS]
            + [bench.line(t.replace("docker ", "podman ", 1)) for t in FINDINGS])


# -- what the judge says would run ---------------------------------------------------


def judged(line: str, plugin_root: str) -> shell.Script | None:
    """The parsed line when the hook would run it outside the sandbox, else None."""
    script = shell.parse(line)
    own = passthrough.own_script(script, plugin_root)
    if own == "run" or (own is None and passthrough.passes(script, DEFAULT)):
        return script
    return None


def expected_runs(script: shell.Script) -> list[tuple[str, ...]]:
    """The argvs bash runs for the judged parts when every program exits 0: a pipeline
    after `||` is skipped (and the status stays 0), every other one runs."""
    runs: list[tuple[str, ...]] = []
    before, pipeline = ";", []
    for part in script.parts:
        pipeline.append(tuple(part.words))
        if part.after in ("|", "|&"):
            continue
        if before != "||":
            runs += pipeline
        before, pipeline = part.after, []
    return sorted(runs)


# -- what bash runs ------------------------------------------------------------------

RECORDER = "#!/bin/sh\nprintf '%s\\0' \"$(($# + 1))\" \"$0\" \"$@\" >> \"$LOG\"\n"
DRIVER = r"""
shopt -u extglob
command_not_found_handle() { printf '%s\0' "$#" "?$1" "${@:2}" >> "$LOG"; return 127; }
cd "$1"
i=0
while IFS= read -r -d '' line; do
    export LOG="$2/$i"
    if (( i % 2 )); then
        ( IFS=$' \t\n-/'; eval "$line"; wait ) < /dev/null > /dev/null 2>&1
    else
        ( eval "$line"; wait ) < /dev/null > /dev/null 2>&1
    fi
    i=$((i + 1))
done
"""


class Bench:
    """A directory with the recording programs, a cwd for globs, and a plugin root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.plugin = root / "plugin"
        self.cwd = root / "cwd"
        self.out = root / "out"
        for d in (self.bin, self.plugin / "bin", self.cwd, self.out):
            d.mkdir(parents=True)
        for name in DEFAULT:
            self._recorder(self.bin / name)
        self._recorder(self.plugin / passthrough.OWN)
        for name in ("-v", "x1", "x2", "a", "IMG"):
            (self.cwd / name).write_text("")

    def _recorder(self, path: Path) -> None:
        path.write_text(RECORDER)
        path.chmod(0o755)

    def line(self, template: str) -> str:
        return template.replace("{own}", str(self.plugin / passthrough.OWN)).replace(
            "{m}", str(self.root / "escaped"))

    def run(self, lines: list[str], batches: int = 2) -> list[list[tuple[str, ...]]]:
        """What bash ran for each line (sorted argvs), each line in its own subshell;
        ``batches`` bash processes side by side."""
        size = max(1, -(-len(lines) // batches))
        chunks = [lines[b:b + size] for b in range(0, len(lines), size)]
        procs = []
        for chunk in chunks:
            out = self.out / f"{len(list(self.out.iterdir()))}"
            out.mkdir()
            proc = subprocess.Popen(
                ["/bin/bash", "-c", DRIVER, "driver", str(self.cwd), str(out)],
                stdin=subprocess.PIPE,
                env={"PATH": str(self.bin), "HOME": str(self.root / "home"), "__Q": "1",
                     "U": "-v", "V": "-v /victim:/h", "LC_ALL": "C.UTF-8"})
            assert proc.stdin is not None
            proc.stdin.write("".join(line + "\0" for line in chunk).encode())
            proc.stdin.close()
            procs.append((out, proc, len(chunk)))
        ran: list[list[tuple[str, ...]]] = []
        for out, proc, count in procs:
            assert proc.wait(timeout=300) == 0
            ran += [self._read(out / str(i)) for i in range(count)]
        return ran

    def _read(self, log: Path) -> list[tuple[str, ...]]:
        if not log.exists():
            return []
        fields = log.read_bytes().decode("utf-8", "surrogateescape").split("\0")[:-1]
        runs, i = [], 0
        while i < len(fields):
            n = int(fields[i])
            argv = list(fields[i + 1:i + 1 + n])
            if argv[0].startswith(str(self.bin) + "/"):
                argv[0] = argv[0].rsplit("/", 1)[1]      # found on PATH: its name
            runs.append(tuple(argv))
            i += 1 + n
        return sorted(runs)


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return Bench(tmp_path / "bench")


def _differences(bench: Bench, lines: list[str]) -> tuple[int, list[str]]:
    """How many lines the judge passes, and each that bash ran otherwise than judged."""
    scripts = [(line, judged(line, str(bench.plugin))) for line in lines]
    passing = [(line, script) for line, script in scripts if script is not None]
    to_run = [text for line, script in passing for text in (line, shell.requote(script))]
    ran = bench.run(to_run)
    bad = []
    for i, (line, script) in enumerate(passing):
        want = expected_runs(script)
        for what, got in (("as written", ran[2 * i]), ("requoted", ran[2 * i + 1])):
            if got != want:
                bad.append(f"{line!r} {what} ({shell.requote(script)!r}): judged {want}, "
                           f"bash ran {got}")
    return len(passing), bad


def test_generated_lines_run_as_judged(bench: Bench) -> None:
    passed, bad = _differences(bench, [bench.line(t) for t in generate(SEED, CASES)])
    assert not bad, "\n".join(bad[:20])
    assert passed > CASES // 5, passed      # the grammar reaches the interesting lines


def test_corpus_runs_as_judged(bench: Bench) -> None:
    """The past escapes: none of the findings passes; whatever passes runs as judged."""
    lines = corpus(bench)
    passed, bad = _differences(bench, lines)
    assert not bad, "\n".join(bad)
    assert not any(judged(line, str(bench.plugin)) for line in lines[-2 * len(FINDINGS):])
    assert passed >= len(escapes.STILL_PASS)


def _may_be_an_id(line: str) -> bool:
    """A word the engine may read as an id prefix (hex: ``a``, ``1``): whether it names one
    of workspace's containers depends on which run on the daemon now (the other test pass's
    among them), and the hook rightly sandboxes it when one does (flaky in CI11: `c`)."""
    import re

    return any(re.fullmatch(r"[0-9a-f]{1,64}", word) for word in re.split(r"[\s;&|()<>'\"\\]+", line))


def test_the_hook_hands_over_the_requoted_line(claude: Claude, bench: Bench) -> None:
    """The real hook: a passing line that requote changes comes back as that line, with
    no decision of the hook's own (the client's permission flow applies to it). Lines that
    name a container the engine cannot tell apart from workspace's (ownctr: `docker rm ''`)
    are sandboxed by the hook, as the hook itself asks the engine."""
    import itertools

    claude.start()
    own = str(REPO / passthrough.OWN)
    image = config.SCHEMA["container.image"].default
    lines = [line.replace(str(bench.plugin / passthrough.OWN), own)
             for line in map(bench.line, generate(SEED, 400))]
    changed = list(itertools.islice(
        ((line, script) for line in lines
         if (script := judged(line, str(REPO))) is not None and shell.requote(script) != line
         and not passthrough.touches_workspace(script, image) and not _may_be_an_id(line)), 25))
    assert len(changed) == 25
    for line, script in changed:
        answer = claude.pre_bash(line)
        assert answer.json == {"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "updatedInput": {"command": shell.requote(script)}}}, (line, answer.json)
    unchanged = "docker ps -a --format '{{.Names}}' && gh pr list"
    assert claude.pre_bash(unchanged).json == {}


def test_requote_is_shlex() -> None:
    """requote quotes each word as shlex.join does (the standard, outside the hot path)."""
    import shlex

    for line in generate(SEED, 500):
        script = shell.parse(line)
        for part in script.parts:
            if part.words and part.words[0] not in shell.RESERVED and not shell.is_assignment(
                    part.words[0]):
                assert " ".join(map(shell.quote, part.words)) == shlex.join(part.words)


@pytest.mark.parametrize("line", [
    "docker ps", "docker ps  -a\n", "docker ps 2>/dev/null | docker images -q &",
    "docker ps && gh pr list || podman ps\ndocker ps ;", "docker ps |\n docker ps",
    "docker exec c 'if' then", "sudo docker exec c sh -c 'echo \"$HOME\"; ls *'",
])
def test_requoted_plain_lines(bench: Bench, line: str) -> None:
    """Plain lines that pass: requoted, bash runs the same argvs as the original."""
    assert judged(line, str(bench.plugin)) is not None
    passed, bad = _differences(bench, [line])
    assert passed == 1 and not bad, bad
