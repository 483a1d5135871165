"""Real workflows, each a bash script run in the clone ``proj`` of a bare ``remote.git``.

BASE builds the starting point natively: a remote with two commits on master, a clone of
it (so ``origin/HEAD`` is a symbolic ref), then the remote moves on (a third commit and a
branch ``topic``) so that fetch and pull have something to bring. Git's clock and identity
are fixed (PRELUDE) so that both runs of a script make the same objects.
"""

from __future__ import annotations

PRELUDE = """set -e
export GIT_AUTHOR_NAME=Ada GIT_AUTHOR_EMAIL=ada@example.com
export GIT_COMMITTER_NAME=Ada GIT_COMMITTER_EMAIL=ada@example.com
export GIT_AUTHOR_DATE='@{when} +0000' GIT_COMMITTER_DATE='@{when} +0000'
export GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 LC_ALL=C TZ=UTC
git() {{ command git -c init.defaultBranch=master -c advice.detachedHead=false "$@"; }}
"""

BASE = """git init -q --bare remote.git
git clone -q remote.git seed 2>/dev/null
cd seed
echo one > a.txt; printf 'l1\\nl2\\nl3\\n' > c.txt; mkdir -p src/lib; echo 'x = 1' > src/lib/m.py
git add -A; git commit -qm one
echo two >> a.txt; git commit -qam two
git push -q origin master
cd ..; git clone -q remote.git proj
cd seed
echo three >> a.txt; git commit -qam three
git checkout -qb topic; echo t > t.txt; git add t.txt; git commit -qm topic
git push -q origin master topic
cd ..; rm -rf seed
"""

# name -> script, run in proj. The first two are the other engines' subset.
CASES = {
    "clone_branch_tag": """
git checkout -q -b feature
echo f >> a.txt; git commit -qam feature
git tag v1; git tag -a -m 'release one' v1a
git checkout -q master
git branch other HEAD~1
""",
    "read_only": """
echo two >> c.txt; chmod 444 c.txt; git commit -qam 'c read-only'
echo more >> a.txt; chmod 444 a.txt
d=cache/_cacache/content-v2/sha512/ab
mkdir -p $d; echo data > $d/cd; chmod 444 $d/cd; chmod 555 $d cache/_cacache/content-v2
echo new > src/lib/n.py; chmod 555 src/lib
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
git checkout -q r; git rebase -q master
""",
    "cherry_pick": """
git checkout -qb cp; echo c >> c.txt; git commit -qam c
git checkout -q master; git cherry-pick cp >/dev/null
""",
    "stash": """
echo s >> a.txt; git stash -q; echo t >> c.txt; git stash -q
echo u > u.txt; git stash pop -q
""",
    "fetch": """
git fetch -q origin
git remote set-head origin topic
""",
    "symref_deleted": """
git remote set-head -d origin
""",
    "detached": """
echo d >> a.txt; git commit -qam d
git checkout -q --detach HEAD~1
""",
    "pull_ff": """
git pull -q --ff-only
""",
    "gc_repack": """
git commit -q --allow-empty -m empty; git tag light
git gc -q; git repack -adq
""",
    "symlinks": """
ln -s a.txt l_file; ln -s src l_dir; ln -s nowhere l_none
git add l_file l_none; git commit -qm links
""",
    "hardlinks": """
ln a.txt hard.txt; mkdir h; ln c.txt h/c2
""",
    "rename_dir": """
mv src lib2; git add -A; git commit -qm moved
mkdir d1; echo x > d1/f; mv d1 d2
""",
    "file_dir_swap": """
rm c.txt; mkdir c.txt; echo inner > c.txt/y
rm -r src; echo now-a-file > src
git add -A; git commit -qm swap
""",
    "empty": """
touch empty.txt; mkdir -p e1/e2 e3; git add empty.txt; git commit -qm empty
""",
    "fifo": """
mkfifo pipe
""",
    "staged": """
echo s >> a.txt; echo n > n.txt; git add a.txt n.txt
""",
    "many_files": """
mkdir many; for i in $(seq 1000); do echo $i > many/f$i; done
git add many; git commit -qm many
""",
}
