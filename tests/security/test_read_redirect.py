"""A Read redirected into the sandbox is judged on the file the sandbox's view ends at.

The sandbox can make ``notes.md -> /secret/key``; Read on ``notes.md`` is redirected to
the sandbox's copy, and the client, on the host, would follow that symlink to a file the
user's ``Read(//secret/**)`` rule denies, without a prompt. The hook resolves the chain
as the sandbox does (its upper directory over the real tree), applies the user's rules
to where it ends, and hands the client that file, never the symlink."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.claude.conftest import Claude


def _read(claude: Claude, path: Path | str, mode: str = "default") -> dict[str, object]:
    answer = claude.hook("PreToolUse", {"tool_name": "Read", "permission_mode": mode,
                                        "tool_use_id": "toolu_r",
                                        "tool_input": {"file_path": str(path)}})
    assert answer.returncode == 0, answer.stderr
    return answer.spec


@pytest.fixture
def secret(claude: Claude, tmp_path: Path) -> Path:
    """A directory the user's settings say deny (key) and ask (asked) for."""
    found = tmp_path / "secret"
    found.mkdir()
    (found / "key").write_text("the secret\n")
    (found / "asked").write_text("ask first\n")
    settings = Path(claude.env["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"permissions": {
        "deny": [f"Read(/{found}/key)"], "ask": [f"Read(/{found}/asked)"]}}))
    claude.start()
    return found


@pytest.mark.parametrize("how", ["absolute", "relative", "chain", "directory", "real-then-sandbox"])
@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
def test_a_sandbox_symlink_to_a_denied_file_is_denied(claude: Claude, project: Path, secret: Path,
                                                      how: str, mode: str) -> None:
    links = {"absolute": f"ln -s {secret}/key notes.md",
             "relative": "ln -s ../secret/key notes.md",
             "chain": f"ln -s {secret} hop && ln -s hop/key step && ln -s step notes.md",
             "directory": f"mkdir notes.md.d && ln -s {secret} notes.md.d/in && "
                          "ln -s notes.md.d/in/key notes.md",
             "real-then-sandbox": f"rm real-link && ln -s {secret}/key real-link"}
    if how == "real-then-sandbox":
        (project / "real-link").symlink_to(project / "README.txt")   # real, then retargeted
        (project / "notes.md").symlink_to(project / "real-link")
    assert claude.bash(links[how]).returncode == 0
    for path in (project / "notes.md", project / "." / "notes.md"):
        spec = _read(claude, path, mode)
        assert spec.get("permissionDecision") == "deny", spec
        assert "key" in str(spec.get("permissionDecisionReason")), spec


def test_an_ask_rule_on_the_target_asks(claude: Claude, project: Path, secret: Path) -> None:
    assert claude.bash(f"ln -s {secret}/asked notes.md").returncode == 0
    spec = _read(claude, project / "notes.md", "bypassPermissions")
    assert spec["permissionDecision"] == "ask", spec
    handed = Path(spec["updatedInput"]["file_path"])        # type: ignore[index]
    assert not handed.is_symlink() and handed.read_text() == "ask first\n"


def test_the_client_is_handed_the_file_not_the_symlink(claude: Claude, project: Path,
                                                       secret: Path, tmp_path: Path) -> None:
    (tmp_path / "free.txt").write_text("no rule\n")
    assert claude.bash(f"ln -s {tmp_path}/free.txt out && echo mine > in.txt && "
                       "ln -s in.txt inside").returncode == 0
    outside = _read(claude, project / "out")
    assert outside.get("permissionDecision") is None, outside   # outside: the client decides
    assert outside["updatedInput"] == {"file_path": str(tmp_path / "free.txt")}
    inside = _read(claude, project / "inside")
    assert inside["permissionDecision"] == "allow", inside
    handed = Path(inside["updatedInput"]["file_path"])      # type: ignore[index]
    assert not handed.is_symlink() and handed.read_text() == "mine\n"


def test_a_real_symlink_to_a_file_the_sandbox_changed_reads_the_sandboxs_copy(
        claude: Claude, project: Path, secret: Path) -> None:
    (project / "alias").symlink_to("README.txt")
    assert claude.bash("echo sandboxed >> README.txt").returncode == 0
    spec = _read(claude, project / "alias")
    assert Path(spec["updatedInput"]["file_path"]).read_text() == "hello\nsandboxed\n"  # type: ignore[index]
    assert _read(claude, secret / "key").get("permissionDecision") is None  # the client's own


def test_a_symlink_loop_and_a_dangling_link_are_refused(claude: Claude, project: Path,
                                                        secret: Path) -> None:
    assert claude.bash("ln -s loop-b loop-a && ln -s loop-a loop-b && "
                       "ln -s nowhere dangling").returncode == 0
    for name in ("loop-a", "dangling"):
        assert _read(claude, project / name)["permissionDecision"] == "deny", name


def test_the_client_reads_a_private_copy_that_a_later_swap_cannot_change(
        claude: Claude, project: Path, secret: Path) -> None:
    """Between the answer and the client's open, the sandbox may swap the file it judged
    for a symlink to a denied one: the client is handed a copy in the session's state."""
    assert claude.bash("echo judged > notes.md").returncode == 0
    spec = _read(claude, project / "notes.md")
    assert spec["permissionDecision"] == "allow", spec
    handed = Path(spec["updatedInput"]["file_path"])        # type: ignore[index]
    assert handed.name == "notes.md" and "upperdir" not in handed.parts
    assert claude.bash(f"rm notes.md && ln -s {secret}/key notes.md").returncode == 0
    assert handed.read_text() == "judged\n" and not handed.is_symlink()
    assert _read(claude, project / "notes.md")["permissionDecision"] == "deny"


@pytest.mark.parametrize("swap", ["file", "directory"])
def test_a_copy_never_follows_a_symlink_in_the_upper_directory(tmp_path: Path, swap: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy is opened component by component without following symlinks: a swap
    between the hook's look and its copy is refused, never read through."""
    from manager.claude import readcopy

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    upper, secret = tmp_path / "upper", tmp_path / "secret"
    (upper / "proj").mkdir(parents=True)
    secret.mkdir()
    (secret / "notes.md").write_text("the secret\n")
    if swap == "file":
        (upper / "proj" / "notes.md").symlink_to(secret / "notes.md")
        target = upper / "proj" / "notes.md"
    else:
        (upper / "proj" / "sub").symlink_to(secret)
        target = upper / "proj" / "sub" / "notes.md"
    with pytest.raises(readcopy.NotReadable):
        readcopy.take("ws-test", str(target), [str(upper)])
    real = tmp_path / "real.txt"
    real.write_text("real\n")
    assert readcopy.take("ws-test", str(real), [str(upper)]) == str(real)   # not the sandbox's
