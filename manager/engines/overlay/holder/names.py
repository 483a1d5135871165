"""The overlay sandbox's layout: its file names, defined once for the engine and the holder.

Standard library only (the holder imports it; see ``holder/__init__.py``). The per-call
entry script (``overlay/enter.sh``) cannot import them: tests/engines/test_entry_scripts.py
holds it to these.
"""

UPPER = "upperdir"          # upperdir/<absolute path>: every write (try's layout)
WORK = "workdir"            # overlayfs's work directories
ROOT = "temproot"           # the sandbox's root, which the holder pivots into
SKELETON = "skeleton"       # lower layers of the directories with mounts below them
STAGING = "skeleton.new"    # a skeleton entry's next version, renamed into place
SCAFFOLD = "scaffold.json"  # directories the holder made in upperdir (not changes)
OVERLAID = "overlaid"       # every point an overlay was mounted at, NUL-ended (commit probes its upper)
MOUNT_LOG = "mount.log"     # what the sandbox could not show as on the host
LAST_USED = "last-used"     # touched by each call: the holder's idle clock
HOLDER_PID = "holder.pid"
HOLDER_LOG = "holder.log"     # the holder's stderr
PREPARE_LOCK = "prepare.lock"   # held while a holder starts
IDMAP = "idmap.json"          # the id maps the holder's namespace was given (overlay/ids.py)
HOLDER_PIDNS = "holder.pidns"
HOLDER_VIEW = "holder.view"   # the calls' current view (holder/views.py): where to open it
HOLDER_VIEWS = "holder.views"  # the views that stay, "PID START" a line: not the calls' processes
HANDED_BACK = "handed-back"   # the holder's entries are the user's on disk (see main.hand_back)
# A call asks to see the latest state: it writes a line (its nonce) to SYNC_REQUEST, the
# holder brings the snapshotted directories up to date and writes the nonces it served
# (and why it failed, if it did) to SYNC_DONE, which the call polls, sleeping on
# SYNC_SLEEP (a fifo nobody writes).
SYNC_REQUEST = "sync.req"
SYNC_SLEEP = "sync.sleep"
SYNC_DONE = "sync.done"
# Present while changes wait to be shown. A call may skip the round trip when the holder
# sleeps in select() (an inotify event wakes it during the writer's own system call, so
# asleep means every change so far has been drained) and this file is absent.
SYNC_DIRTY = "sync.dirty"
RETIRED = "retired"     # SYNC_DONE's reason when the call must start a fresh holder
