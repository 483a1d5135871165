"""The Claude Code plugin's hooks: protocol I/O, the Bash rewriter, permissions, events.

Kept apart from the top-level ``hooks/`` directory, which is the plugin's data
(``hooks/hooks.json``) and runs ``python -m manager.claude EVENT`` per event.
"""
