"""The resident per-user session service (``workspace serve``, issue 25).

It answers the per-call hook events (a Bash call's PreToolUse and PostToolUse) with the
same handlers as the hook process, without an interpreter's start per call. The hook's
small bash client (bin/lib.sh) asks it first and runs the full Python hook whenever it
does not answer, answers late, or cannot prove it is the service: no decision depends on
the service being up, only the speed.
"""
