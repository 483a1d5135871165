"""Real workflows, all run in one clone ``proj`` of a bare remote kept inside it.

BASE builds the starting point natively: a remote with two commits on master, a clone of
it (so ``origin/HEAD`` is a symbolic ref), two more remotes whose symbolic HEADs the
session deletes and moves, then the remote moves on (a third commit and a branch
``topic``) so that fetch and pull have something to bring. The remotes (and a submodule's
source) live inside the project, excluded from git, so that every engine's sandbox can
read them. Git's clock and identity are fixed (PRELUDE) so that both runs make the same
objects.

One script (``script()``) runs the whole corpus: first the HISTORY steps in order at the
project's root (each builds on the last, as a day of git work does), then each TREE case in
its own directory ``t/<case>`` (a subshell each, so that one case an engine cannot do does
not stop the rest; it prints ``FAILED <case>``). A sandbox session runs that one script and
is committed once; each TREE case is compared on its own directory.
"""

from __future__ import annotations

PRELUDE = """set -e
export GIT_AUTHOR_NAME=Ada GIT_AUTHOR_EMAIL=ada@example.com
export GIT_COMMITTER_NAME=Ada GIT_COMMITTER_EMAIL=ada@example.com
export GIT_AUTHOR_DATE='@{when} +0000' GIT_COMMITTER_DATE='@{when} +0000'
export GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 LC_ALL=C TZ=UTC
export PYTHONDONTWRITEBYTECODE=1   # a .pyc records its source's mtime
export CORPUS_ROOT={root}   # decided outside: inside a container everyone is root
git() {{ command git -c init.defaultBranch=master -c advice.detachedHead=false \\
  -c protocol.file.allow=always "$@"; }}
"""

# The TREE cases' directories start with tracked copies of the root's files.
TREE_SEED = "a.txt c.txt src"

BASE = """git init -q --bare remote.git
git clone -q remote.git seed 2>/dev/null
cd seed
echo one > a.txt; printf 'l1\\nl2\\nl3\\n' > c.txt; mkdir -p src/lib; echo 'x = 1' > src/lib/m.py
for c in {cases}; do mkdir -p t/$c; cp -r {seed} t/$c/; done
git add -A; git commit -qm one
echo two >> a.txt; git commit -qam two
git push -q origin master
cd ..; git clone -q remote.git proj
mv remote.git proj/remote.git; R=$PWD/proj/remote.git
git -C seed remote set-url origin "$R"; git -C proj remote set-url origin "$R"
printf '/remote.git\\n/sub.git\\n' >> proj/.git/info/exclude
for r in old up; do
  git -C proj remote add $r "$R"; git -C proj fetch -q $r; git -C proj remote set-head $r master
done
cd seed
echo three >> a.txt; git commit -qam three
git checkout -qb topic; echo t > t.txt; git add t.txt; git commit -qm topic
git push -q origin master topic
cd ..; rm -rf seed
git init -q --bare proj/sub.git; git clone -q proj/sub.git subseed 2>/dev/null
echo s > subseed/s.txt; git -C subseed add s.txt; git -C subseed commit -qm sub
git -C subseed push -q origin master; rm -rf subseed
"""

# name -> script, in order, at the project's root.
HISTORY = {
    "pull_ff": """
git pull -q --ff-only
""",
    "clone_branch_tag": """
git checkout -q -b feature
echo f >> a.txt; git commit -qam feature
git tag v1; git tag -a -m 'release one' v1a
git checkout -q master
git branch other HEAD~1
""",
    "merge": """
git checkout -qb side; echo s > s.txt; git add s.txt; git commit -qm side
git checkout -q master; echo m >> c.txt; git commit -qam main
git merge -q --no-edit side
""",
    "rebase": """
git checkout -qb r; echo r > r.txt; git add r.txt; git commit -qm r1
echo r2 >> r.txt; git commit -qam r2
git checkout -q master; echo m >> c.txt; git commit -qam m
git checkout -q r; git rebase -q master; git checkout -q master
""",
    "cherry_pick": """
git checkout -qb cp; echo c >> c.txt; git commit -qam c
git checkout -q master; git cherry-pick cp >/dev/null
""",
    "gc_repack": """
git commit -q --allow-empty -m empty; git tag light
git gc -q; git repack -adq
""",
    "worktree": """
git worktree add -q wt1 -b wtb
(cd wt1 && echo w > w.txt && git add w.txt && git commit -qm wt)
""",
    "submodule": """
# file://, not a path: a local clone hard-links objects, which overlayfs copies up
git submodule add -q "file://$PWD/sub.git" mods/sub; git commit -qm sub
""",
    "remotes": """
git fetch -q origin; git fetch -q up
git remote set-head -d old; git remote set-head up topic
git remote add mirror "$PWD/remote.git"; git fetch -q mirror; git remote set-head mirror topic
""",
    "detached": """
echo d >> a.txt; git commit -qam d
git checkout -q --detach HEAD~1
""",
    "stash": """
echo s >> a.txt; git stash -q; echo t >> c.txt; git stash -q
echo u > u.txt; git stash pop -q
""",
}

# name -> script, each in its own directory t/<name>, in this order (staged last: the
# others' `commit -a` would commit what it stages).
TREE = {
    "read_only": """
echo two >> c.txt; chmod 444 c.txt; git commit -qam 'c read-only'
echo more >> a.txt; chmod 444 a.txt
d=cache/_cacache/content-v2/sha512/ab
mkdir -p $d; echo data > $d/cd; chmod 444 $d/cd; chmod 555 $d cache/_cacache/content-v2
echo new > src/lib/n.py; chmod 555 src/lib
""",
    "symlinks": """
ln -s a.txt l_file; ln -s src l_dir; ln -s nowhere l_none
git add l_file l_none; git commit -qm links
""",
    "hardlinks": """
ln a.txt hard.txt; mkdir h; ln c.txt h/c2
""",
    "rename_dir": """
mv src lib2; git add -A .; git commit -qm moved
mkdir d1; echo x > d1/f; mv d1 d2
""",
    "file_dir_swap": """
rm c.txt; mkdir c.txt; echo inner > c.txt/y
rm -r src; echo now-a-file > src
git add -A .; git commit -qm swap
mkdir back; echo f > back/x; rm -r back; echo file-again > back
""",
    "empty": """
touch empty.txt; mkdir -p e1/e2 e3; git add empty.txt; git commit -qm empty
""",
    "fifo": """
mkfifo pipe
""",
    "xattrs": """
echo x > x.txt; setfattr -n user.colour -v blue x.txt
mkdir xd; setfattr -n user.kind -v dir xd
setfattr -n user.old -v 1 a.txt
""",
    "chmod": """
chmod 600 a.txt; chmod 700 src; echo run > run.sh; chmod 755 run.sh
""",
    "chown": """
if [ "$CORPUS_ROOT" = 1 ]; then chown 1234:1234 c.txt; echo n > n.txt; chown 1235:1235 n.txt
else chown "$(id -u):$(id -g)" c.txt; fi   # an ordinary user may give only to themselves
""",
    "big_file": """
head -c 100000000 /dev/zero | tr '\\0' 'b' > big.bin
""",
    "many_files": """
mkdir many; cd many; for i in $(seq 10000); do echo $i > f$i; done
""",
    "pip_editable": """
printf '[build-system]\\nrequires=["setuptools"]\\nbuild-backend="setuptools.build_meta"\\n' > pyproject.toml
printf '[project]\\nname="pk"\\nversion="0.1"\\n[tool.setuptools]\\npackages=["pk"]\\n' >> pyproject.toml
mkdir pk; echo 'X = 1' > pk/__init__.py
/usr/bin/python3 -m venv --without-pip --system-site-packages venv
venv/bin/python -m pip install -q --no-index --no-build-isolation --no-compile -e . 2>&1
venv/bin/python -c 'import pk; assert pk.X == 1'
""",
    "npm_offline": """
mkdir dep; echo '{"name":"dep","version":"1.0.0","main":"index.js"}' > dep/package.json
echo 'module.exports = 1' > dep/index.js
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --transform 's,^dep,package,' \\
  -cf - dep | gzip -n > dep-1.0.0.tgz
echo '{"name":"app","version":"1.0.0","dependencies":{"dep":"file:dep-1.0.0.tgz"}}' > package.json
npm_config_cache=$PWD/.npm npm install --offline --no-audit --no-fund --no-update-notifier \\
  --logs-max=0 -q >/dev/null
""",
    "make_build": """
mkdir in; echo hello > in/a.in; echo world > in/b.in
printf 'out/%%.txt: in/%%.in\\n\\tmkdir -p out && tr a-z A-Z < $< > $@\\n' > Makefile
printf 'all: out/a.txt out/b.txt\\n' >> Makefile
make -s all; echo again > in/a.in; touch -d '+1 minute' in/a.in; make -s all
""",
    "staged": """
echo s >> a.txt; echo n > n.txt; git add a.txt n.txt
""",
}

# What the corpus changes that commit holds for review (it can make git run a program or
# look elsewhere: docs/security.md), committed by naming it, as a reviewer would.
FLAGGED = (".gitmodules", ".git/config", ".git/modules", ".git/worktrees")

# Volatile content: compared by type and mode only (path fragment -> why).
VOLATILE = {"/_cacache/index-v5/": "npm stamps each cache entry with the time it was written"}


def base() -> str:
    return BASE.format(cases=" ".join(TREE), seed=TREE_SEED)


def script() -> str:
    """The whole corpus as one script, run in the project's root."""
    steps = [f"# {name}\n{body}" for name, body in HISTORY.items()]
    for name, body in TREE.items():
        # set -e holds in the subshell only outside a condition (not `( ... ) || ...`).
        steps.append(f"# {name}\nset +e\n(set -e; cd t/{name}\n{body})\n"
                     f"[ $? = 0 ] || echo FAILED {name}\nset -e\n")
    return "\n".join(steps)
