"""The passthrough judge's docker/podman option tables, against the installed engines' own help.

Issue 20 (attack pass 5): the judge read every docker/podman option with one table for all
subcommands, so podman's ``stop -f name=…`` (``-f`` is ``--filter`` there; on ``rm`` it is
``--force``) passed as a flag and its selector went unread, and ``--filter``, ``--all``,
``--replace`` were allowed wherever they came. The tables are now per subcommand and per
engine (manager/claude/ctrforms.py), and this test holds them to what each engine says of
itself: for every form, ``ENGINE FORM --help`` (pflag's own listing, which also marks an
option whose value is optional) must list each option of the table with the letter and
arity the table gives it; every option the engine lists that the table leaves out, in each
spelling, is sandboxed; every table option passes; and no form that changes something has
an option whose own help says it picks targets (all, latest, filter, replace, depend...).
Both engines must be installed (CI: no skip). ``--help`` touches no storage or daemon.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from manager import config
from manager.claude import ctrforms
from manager.claude import passthrough
from manager.claude import shell

pytestmark = [pytest.mark.as_user]

DEFAULT = tuple(config.SCHEMA["passthrough"].default)
# Forms that change nothing: they may select what they show.
READS = frozenset(("ps", "images", "container inspect", "image inspect", "inspect", "version",
                   "info", "system info", "top", "port", "history", "events", "system events",
                   "system df", "network ls", "network inspect", "volume ls", "volume inspect",
                   "logs", "stats", "diff", "search", "container exists", "image exists",
                   "image tree", "network exists", "volume exists", "pod ps", "pod inspect",
                   "pod exists", "pod top", "pod logs", "pod stats"))
# What an option's own help says when it picks targets without naming them.
SELECTS = re.compile(r"\ball (the )?(running |paused |non-running |stopped )?(containers|images|"
                     r"volumes|pods|networks)\b|\blatest\b|\bfilter|\breplace\b|\bdepend|"
                     r"containers using|used by a container|from the file", re.I)
OPTION = re.compile(r"^\s+(?:-(\S), )?--([\w.-]+)(?: (\S+))?(?:\s\s+(.*))?$")
# Operands that make a form pass with no option.
OPERANDS = {"run": ["alpine", "true"], "create": ["alpine", "true"], "exec": ["c", "true"],
            "network connect": ["n", "c"], "network disconnect": ["n", "c"],
            "tag": ["a:1", "b:1"], "rename": ["a", "b"], "pull": ["alpine"], "push": ["alpine"]}


def _help(cli: str, key: str) -> dict[str, tuple[str | None, bool, str]]:
    """--long -> (its letter, whether it takes a value, its description), from the help."""
    out = subprocess.run([cli, *key.split(), "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    section = re.split(r"^(?:Options|Flags):$", out, maxsplit=1, flags=re.M)
    found: dict[str, tuple[str | None, bool, str]] = {}
    for line in (section[1] if len(section) > 1 else "").splitlines():
        match = OPTION.match(line)
        if match:
            letter, name, kind, text = match.groups()
            optional = kind is not None and "[=" in kind     # a value only after "="
            found["--" + name] = (letter, kind is not None and not optional, text or "")
    return found


@pytest.fixture(scope="module")
def helps() -> dict[tuple[str, str], dict[str, tuple[str | None, bool, str]]]:
    for cli in ctrforms.ENGINES:
        if shutil.which(cli) is None:
            if os.environ.get("CI"):
                pytest.fail(f"{cli} must be installed in CI")
            pytest.skip(f"{cli} is not installed")
    keys = [(cli, key) for cli, forms in ctrforms.ENGINES.items() for key in forms]
    with ThreadPoolExecutor(8) as pool:
        return dict(zip(keys, pool.map(lambda k: _help(*k), keys), strict=True))


def _base(cli: str, key: str) -> list[str]:
    return [cli, *key.split(), *OPERANDS.get(key, ["c"])]


def _with(cli: str, key: str, option: list[str]) -> list[str]:
    base = _base(cli, key)
    at = len(base) - len(OPERANDS.get(key, ["c"]))
    return base[:at] + option + base[at:]


def test_each_table_option_is_the_engines_own(helps) -> None:
    """Letter and arity as the engine lists them: an option read as a flag where it takes a
    value would hide the next word (a target) from the judge."""
    wrong = []
    for (cli, key), listed in helps.items():
        for item in ctrforms.ENGINES[cli][key].split():      # "x/--long=", as the table reads
            letter, _, option = item.rpartition("/")
            entry = listed.get(option.removesuffix("="))
            if entry is None or entry[:2] != (letter or None, option.endswith("=")):
                wrong.append(f"{cli} {key} {item}: the engine's help says {entry}")
    assert not wrong, "\n".join(wrong)


def test_no_changing_form_has_a_selector(helps) -> None:
    found = [f"{cli} {key} {option}: {text}" for (cli, key), listed in helps.items()
             if key not in READS
             for option, (_, _, text) in listed.items()
             if option in ctrforms._read(ctrforms.ENGINES[cli][key]) and SELECTS.search(text)]
    assert not found, "\n".join(found)


def test_options_left_out_are_sandboxed_and_listed_ones_pass(helps) -> None:
    """Every option an engine lists for a form, long and short: it passes exactly when the
    table of the program that reads it has it (docker: of both engines, alike)."""
    wrong = []
    for (engine, key), listed in helps.items():
        for cli in ("docker", "podman") if engine == "podman" else ("docker",):
            if ctrforms.table(cli, key) is None:
                continue
            allowed = ctrforms.table(cli, key) or {}
            assert passthrough.words_pass(_base(cli, key), DEFAULT), _base(cli, key)
            for option, (letter, value, _) in listed.items():
                for spelling in filter(None, (option, letter and "-" + letter)):
                    words = _with(cli, key, [spelling, "X=1"] if value else [spelling])
                    want = allowed.get(spelling) is value
                    if passthrough.words_pass(words, DEFAULT) != want:
                        wrong.append(f"{' '.join(words)}: passes {not want}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("line", [
    "podman stop -f name=workspace-x", "podman start -f label=org.workspace.session",
    "podman pause --filter=name=x", "podman unpause -f x", "podman restart --filter name=x",
    "podman rm -f --filter label=x", "podman rm --depend c", "podman rm --cidfile f",
    "podman kill -a", "podman wait -l", "podman run --replace --name c alpine",
    "podman create --replace --name=c alpine", "podman rmi -a -f", "podman image rm --all -f",
    "podman network rm -f podman", "podman volume rm -f v", "podman pod rm -f p",
    "podman pod stop -a", "docker stop -f x", "docker logs -n 5 c", "docker container prune",
    "docker volume prune -f", "docker image prune -a", "podman system prune",
    "docker push -a app", "docker rm -l c", "docker run -a stdout alpine", "docker run -ite X a",
])
def test_selectors_and_misread_letters_are_sandboxed(line: str) -> None:
    assert not passthrough.passes(shell.parse(line), DEFAULT), line


@pytest.mark.parametrize(("line", "names"), [
    ("podman rm -f c", ["c"]), ("docker rm -f c", ["c"]), ("docker logs -f c", ["c"]),
    ("docker logs --tail 5 c", ["c"]), ("podman logs -n c", ["c"]),
    ("podman stop -t 5 c", ["c"]), ("docker stop -t 5 c", ["c"]),
    ("docker exec -u 0 -e A=1 c ls -a", ["c", "ls", "-a"]), ("docker rm c -f d", ["c", "d"]),
    ("docker rm -f -- -c", ["-c"]), ("podman inspect -t container c", ["c"]),
])
def test_operands_are_read_as_the_engine_reads_them(line: str, names: list[str]) -> None:
    words = shell.parse(line).parts[0].words
    key, rest = ctrforms.form(words[1:]) or ("", [])
    assert passthrough.words_pass(words, DEFAULT), line
    assert ctrforms.operands(words[0], key, rest) == names
