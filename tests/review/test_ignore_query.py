"""The project's ignore rules asked while the walk runs: the same answer as asking after
it, at any size (git's answers must be read while paths are still being written)."""

from __future__ import annotations

import subprocess

from manager.changes.model import read_changes
from manager.review.grouping import IgnoreQuery
from manager.review.grouping import group
from tests.overlay_model import Tree
from tests.overlay_model import write


def git_repo(tree: Tree, ignore: str) -> None:
    subprocess.run(["git", "init", "-q", tree.real], check=True)
    write(tree.r(".gitignore"), ignore)
    write(tree.r("kept.log"), "tracked although it matches\n")
    subprocess.run(["git", "-C", tree.real, "add", "-f", ".gitignore", "kept.log"], check=True)


def test_answers_larger_than_a_pipe_while_the_walk_runs(tree: Tree) -> None:
    git_repo(tree, "*.log\ncache/\n")
    names = [f"a-rather-long-name-for-an-ignored-log-file-{i:05}.log" for i in range(3000)]
    for name in names:                      # ~160 KB of answers: more than a pipe holds
        write(tree.u(f"logs/{name}"), "x\n")
    (tree.real / "logs").mkdir()            # a real directory: its files are not collapsed
    write(tree.u("logs/readme.txt"), "kept\n")
    write(tree.u("kept.log"), "changed\n")
    write(tree.u("cache/deep/a.bin"), "x")

    query = IgnoreQuery(tree.real)
    found = read_changes(tree.layers, tree.real, 0, on_found=query.ask)
    streamed = group(found, tree.real, ignores=query)
    after = group(read_changes(tree.layers, tree.real, 0), tree.real)

    assert streamed == after
    assert sorted(streamed.ignored) == ["cache/"] + [f"logs/{n}" for n in names]
    shown = {e.change.real_path for e in streamed.project}
    assert shown == {str(tree.real / "logs" / "readme.txt"), str(tree.real / "kept.log")}


def test_outside_a_git_repository_nothing_is_ignored(tree: Tree) -> None:
    write(tree.u("x.log"), "x\n")
    query = IgnoreQuery(tree.real)
    found = read_changes(tree.layers, tree.real, 0, on_found=query.ask)
    assert group(found, tree.real, ignores=query).ignored == {}


def test_a_broken_repository_ignores_nothing_and_does_not_hang(tree: Tree) -> None:
    (tree.real / ".git").write_text("gitdir: /nonexistent\n")
    write(tree.u("x.log"), "x\n")
    query = IgnoreQuery(tree.real)
    found = read_changes(tree.layers, tree.real, 0, on_found=query.ask)
    assert [e.change.real_path for e in group(found, tree.real, ignores=query).project] == \
        [str(tree.real / "x.log")]

