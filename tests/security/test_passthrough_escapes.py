"""Passthrough is an allowlist of exact forms: every spelling that could make a
passthrough command run a program or write a local file is sandboxed.

The corpus is judged by the real hook (a fresh process with real hook JSON, as
the client runs it); the escapes the attack pass found are also run the way the
client runs the answer, and must leave nothing on the real disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from manager import config
from manager.claude import passthrough
from manager.claude import rewrite
from manager.claude import shell
from tests.claude.conftest import Claude

from .conftest import in_upper

DEFAULT = tuple(config.SCHEMA["passthrough"].default)   # the real default, not a copy

# Programs named through git: options (abbreviated, =val and separate), -c keys,
# environment prefixes, aliases. git never passes through, in any spelling.
GIT = [
    "git ls-remote --upload-p='touch {m}; git-upload-pack' .",
    "git ls-remote --upload-pack 'touch {m}; git-upload-pack' .",
    "git ls-remote --upload-pack='touch {m}; git-upload-pack' .",
    "git ls-remote -u 'touch {m}; git-upload-pack' .",
    "git grep --open-files-in='touch {m}' hello",
    "git grep --open-files-in-pager 'touch {m}' hello",
    "git grep -O'touch {m}' hello",
    "git log --outp={m}", "git diff --output {m}", "git diff --ext-d",
    "git -c core.fsmonitor='touch {m}' status", "git -c core.pager='touch {m}' -p log",
    "git -c core.sshCommand='touch {m}' ls-remote ssh://x/y",
    "git -c diff.external='touch {m}' diff", "git -c diff.txt.textconv='touch {m}' log -p",
    "git -c credential.helper='!touch {m}' ls-remote https://x.invalid/r",
    "git -c alias.st='!touch {m}' st", "git --config-env=core.pager=X log",
    "GIT_EXTERNAL_DIFF='touch {m}' git diff", "GIT_PAGER='touch {m}' git -p log",
    "GIT_SSH_COMMAND='touch {m}' git ls-remote ssh://x/y", "GIT_DIR=/tmp/evil git status",
    "git -C /tmp/evil status", "git --git-dir=/tmp/evil/.git status", "git --exec-path=/tmp log",
    "git --paginate log", "git -p log", "git branch --edit-description", "git branch --edit-d",
    "git status", "git diff", "git log", "git --no-pager log", "git config --get core.pager",
    "git difftool", "git mergetool", "git submodule foreach 'touch {m}'", "git bisect run x",
    "git rebase --exec='touch {m}' HEAD", "git filter-branch", "git instaweb",
]
# gh: only `gh NOUN VERB` read-only pairs with listed options; pflag has no abbreviations.
GH = [
    "gh pr checkout -R o/r 1", "gh pr -R o/r checkout 1", "gh pr checkout 1",
    "gh run download 1", "gh release download v1", "gh repo create x --clone",
    "gh issue develop 1 --checkout", "gh repo clone o/r", "gh gist clone 1",
    "gh repo fork --clone", "gh pr view 1 --web", "gh pr view 1 -w", "gh repo view -w",
    "gh browse", "gh alias set x '!touch {m}' --shell", "gh x", "gh extension install o/r",
    "gh config set pager 'touch {m}'", "gh -R o/r pr list", "gh api --input {m} /x",
    "gh api --cache 1h /x", "gh auth status --show-token", "gh auth login", "gh auth setup-git",
    "gh pr create -t x -b y", "gh pr merge 1", "gh codespace ssh", "gh pr list --we",
    "GH_PAGER='touch {m}' gh pr list", "gh pr diff 1 --web", "gh issue create -t x -b y",
]
# docker/podman: no global options, nothing that mounts, runs a host program or writes files.
CONTAINERS = [
    "podman unshare touch {m}", "podman unshare sh -c 'touch {m}'",
    "podman container checkpoint --export={m} c", "podman container checkpoint -e {m} c",
    "podman image mount alpine", "podman mount c", "podman system reset", "podman system reset -f",
    "docker run -v /:/host alpine true", "docker run -v/:/host alpine true",
    "docker run --volume=/:/host alpine true", "docker run --mount type=bind,src=/,dst=/h a",
    "docker run --privileged alpine true", "docker run -itv /:/h alpine", "podman run --rootfs / x",
    "docker run --env-file .env alpine", "docker run --cidfile {m} alpine",
    "docker run --pid=host alpine", "podman run --userns=host alpine", "docker exec --privileged c x",
    "podman run --hooks-dir /tmp alpine", "podman --root /tmp ps", "podman ps --root /tmp",
    "docker -H tcp://x ps", "docker --context x ps", "docker cp c:/etc/passwd {m}",
    "docker save -o {m} alpine", "docker export -o {m} c", "docker build .", "docker compose up",
    "docker login", "podman kube play x.yaml", "podman generate systemd --files c",
    "podman play kube x.yaml", "docker container export c -o {m}", "docker image save -o {m} a",
    "DOCKER_HOST=tcp://x docker ps", "podman machine init", "docker plugin install x",
    "docker run -eFOO=1 alpine", "docker logs --output={m} c", "podman rm -v c",
    # image transports that name host paths (the second attack pass wrote ~/.bashrc and a .pth)
    "podman push img oci-archive:{m}", "podman push img docker-archive:{m}",
    "podman push img dir:{m}", "podman image push img oci:{m}", "podman push img oci:{m}:t",
    "podman pull oci-archive:{m}", "podman pull docker-archive:x.tar", "podman pull dir:{m}",
    "podman image pull docker-archive:payload.tar", "podman tag img oci-archive:{m}",
    "podman run --rm docker-archive:x.tar true", "podman create oci:{m} x",
    "podman pull containers-storage:[overlay@/tmp]img", "podman push img /tmp/x",
    "podman push img ./x", "podman pull -q docker-archive:x", "podman run -- oci:{m} true",
    "podman push img docker-daemon:img:latest", "podman push img 'sif:x'",
]
SUDO = ["sudo podman unshare touch {m}", "sudo git status", "sudo -u root docker ps",
        "sudo sh -c 'touch {m}'", "sudo -E docker ps"]
# Attack pass 3: a short letter means what its form says (`auth status -t` is --show-token,
# the token hide keeps from sandboxed commands); gh runs --jq with the process's environment.
GH_SECRETS = ["gh auth status -t", "gh auth status -at", "gh auth status -ta",
              "gh auth status --active -t", "gh api user --jq env", "gh api user -q env",
              "gh api user -q '$ENV'", "gh api user --jq='$ENV.HOME'",
              "gh pr list --json title -q 'env|keys'", "gh api user -q 'include \"x\"; .'"]
CORPUS = GIT + GH + CONTAINERS + SUDO + GH_SECRETS

# The exact forms that still pass through (by default).
STILL_PASS = [
    "gh pr list", "gh pr view 12 --comments", "gh pr view 12 --json title --jq .title",
    "gh pr status", "gh pr diff 12", "gh pr checks 12", "gh issue list -L 5 -s open",
    "gh issue view 3 -R o/r", "gh run list --workflow ci.yml", "gh run view 1 --log-failed",
    "gh release list", "gh repo view o/r", "gh api repos/o/r/pulls -q '.[].title'",
    "gh api -X POST repos/o/r/issues -f title=x", "gh search prs --author me", "gh auth status",
    "gh --version", "docker ps", "docker ps -a --format '{{{{.Names}}}}'", "podman images -q",
    "docker logs -f --tail 10 c", "docker inspect c", "docker run --rm -it alpine sh -c 'ls -l /'",
    "docker run -d --name web -p 8080:80 -e A=1 nginx", "docker exec -it c bash -lc 'make -j2'",
    "docker stop -t 5 c", "docker rm -f c", "podman pull alpine", "docker container ls -a",
    "docker image ls", "podman pod ps", "docker system df", "sudo docker ps", "sudo -n podman ps",
    "podman push localhost:5000/team/app:1.2", "docker push ghcr.io/o/app:v1", "podman push 124f82edf45d",
    "docker pull alpine@sha256:" + "a" * 64, "docker tag app:1 registry.example.com:443/app:1",
    "docker run --rm -e A=1 ghcr.io/o/app:v1 true", "podman image pull quay.io/x/y",
    "gh auth status -a", "gh api user --jq .login",
]


def _marker(tmp_path: Path) -> Path:
    return tmp_path / "escaped"


@pytest.mark.parametrize("command", CORPUS)
def test_corpus_is_sandboxed(command: str, tmp_path: Path) -> None:
    cmd = command.format(m=_marker(tmp_path))
    assert not passthrough.passes(shell.parse(cmd), (*DEFAULT, "git")), cmd


@pytest.mark.parametrize("command", STILL_PASS)
def test_exact_forms_still_pass(command: str) -> None:
    assert passthrough.passes(shell.parse(command.format()), DEFAULT), command


def test_corpus_through_the_real_hook(claude: Claude, tmp_path: Path) -> None:
    """Every corpus entry gets a sandboxed (rewritten) or denied answer from the hook
    itself; none is left to the client unchanged. `git` on the user's list changes nothing."""
    (tmp_path / "config" / "workspace").mkdir(parents=True)
    (tmp_path / "config" / "workspace" / "config.yaml").write_text(
        "passthrough: [git, gh, sudo, docker, podman]\n")
    claude.start()
    marker = _marker(tmp_path)
    for command in CORPUS:
        answer = claude.pre_bash(command.format(m=marker))
        assert answer.returncode == 0, answer.stderr
        assert "updatedInput" in answer.spec or answer.decision == "deny", (command, answer.json)
    for command in STILL_PASS[:5]:
        assert claude.pre_bash(command.format()).json == {}, command


@pytest.mark.parametrize("command", [
    "git ls-remote --upload-p='touch {m}; git-upload-pack' .",
    "git grep --open-files-in='touch {m}' hello",
    "git -c core.fsmonitor='touch {m}' status",
    "GIT_EXTERNAL_DIFF='touch {m}' git diff",
    "git -c alias.st='!touch {m}' st",
    "podman unshare touch {m}",
])
def test_escapes_run_only_in_the_sandbox(claude: Claude, repo: Path, tmp_path: Path,
                                         command: str) -> None:
    (repo / "a.txt").write_text("changed\n")      # something for diff to show
    claude.start()
    marker = _marker(tmp_path)
    claude.bash(command.format(m=marker))
    assert not marker.exists(), f"{command} ran a program on the host"
    if "podman" not in command:                   # podman may be absent inside: no marker then
        assert in_upper(marker).exists(), "the program did not run in the sandbox either"



# What bash reads differently from the judge (issue 20): a comment the judge saw inside
# `${...}`, and options that only exist once bash expands braces, $IFS, defaults and globs.
# {ctr}: a stand-in docker or podman that records the arguments it ran with, where it ran.
MISREAD = [line.replace("{ctr}", ctr) for ctr in ("docker", "podman") for line in (
    "{ctr} ps -q ${{__Q:+ #}}; touch {m}",
    "{ctr} run --rm {{-v,/victim:/h,IMG,sh,-c,'touch /h/x'}}",
    "{ctr} run --rm $IFS-v$IFS/victim:/h IMG sh -c 'touch /h/x'",
    "{ctr} run --rm ${{U:--v}} /victim:/h IMG sh -c 'touch /h/x'",
    "{ctr} run --rm [-]v /victim:/h IMG sh -c 'touch /h/x'",
)] + ["{own} status ${{__Q:+ #}}; touch {m}"]


def _stand_ins(tmp_path: Path, record: Path) -> Path:
    """docker and podman first on PATH, writing their arguments to ``record``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("docker", "podman"):
        (bin_dir / name).write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" >> {record}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("command", MISREAD)
def test_misread_lines_run_only_in_the_sandbox(claude: Claude, tmp_path: Path,
                                               command: str) -> None:
    """Each line passed through before: bash ran the part after the comment the judge saw,
    or a container with a host directory mounted. Now each runs in the sandbox."""
    marker, record = _marker(tmp_path), tmp_path / "ran"
    bin_dir = _stand_ins(tmp_path, record)
    (claude.project / "-v").write_text("")       # what the glob [-]v matches
    claude.env.update(PATH=f"{bin_dir}:{claude.env['PATH']}", __Q="1", U="-v")
    claude.start()
    own = Path(claude.env["CLAUDE_PLUGIN_ROOT"], passthrough.OWN)
    line = command.format(m=marker, own=own)
    answer = claude.pre_bash(line)
    assert answer.decision != "deny", answer.json
    claude.shell(answer.command if "updatedInput" in answer.spec else line)
    assert not marker.exists() and not record.exists(), f"{line} ran on the host"
    assert rewrite.FINISH in answer.command, answer.json        # the sandbox's wrapper
    assert in_upper(marker).exists() or in_upper(record).exists(), "nor in the sandbox"
