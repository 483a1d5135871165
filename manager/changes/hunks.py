"""Hunks of a text change, and the file that results from taking some of them.

A hunk is a run of edits (replace ``old[start:end]`` with new lines) shown with
context, as ``git add -p`` shows it. Taking a subset of hunks gives the content
to write to the real file; the rest stays pending in the sandbox. Lines keep
their endings, so what is written is byte-exact.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from dataclasses import field

CONTEXT = 3


@dataclass(frozen=True)
class Edit:
    start: int            # in the old lines
    end: int
    new: tuple[bytes, ...]


@dataclass
class Hunk:
    edits: list[Edit]
    ctx_start: int        # shown context, in the old lines
    ctx_end: int
    new_start: int        # where the hunk's new side starts, for the @@ header
    taken: bool | None = None
    parts: list[Hunk] = field(default_factory=list)   # after a split

    def lines(self, old: list[bytes]) -> list[str]:
        """The hunk as unified-diff lines (header included)."""
        body: list[str] = []
        pos = self.ctx_start
        for edit in self.edits:
            body += [" " + _text(x) for x in old[pos:edit.start]]
            body += ["-" + _text(x) for x in old[edit.start:edit.end]]
            body += ["+" + _text(x) for x in edit.new]
            pos = edit.end
        body += [" " + _text(x) for x in old[pos:self.ctx_end]]
        old_len = self.ctx_end - self.ctx_start
        new_len = old_len + sum(len(e.new) - (e.end - e.start) for e in self.edits)
        head = f"@@ -{self.ctx_start + 1},{old_len} +{self.new_start + 1},{new_len} @@"
        return [head, *body]

    @property
    def splittable(self) -> bool:
        return len(self.edits) > 1


def _text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r\n")


def hunks(old: list[bytes], new: list[bytes], context: int = CONTEXT) -> list[Hunk]:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    result = []
    for group in matcher.get_grouped_opcodes(context):
        edits = [Edit(i1, i2, tuple(new[j1:j2])) for tag, i1, i2, j1, j2 in group if tag != "equal"]
        result.append(Hunk(edits, group[0][1], group[-1][2], group[0][3]))
    return result


def split(hunk: Hunk, old: list[bytes]) -> list[Hunk]:
    """One hunk per edit, each with the context up to its neighbours (as git's ``s``)."""
    parts = []
    shift = hunk.new_start - hunk.ctx_start
    for index, edit in enumerate(hunk.edits):
        before = hunk.edits[index - 1].end if index else hunk.ctx_start
        after = hunk.edits[index + 1].start if index + 1 < len(hunk.edits) else hunk.ctx_end
        start = max(before, edit.start - CONTEXT)
        end = min(after, edit.end + CONTEXT)
        parts.append(Hunk([edit], start, end, start + shift))
        shift += len(edit.new) - (edit.end - edit.start)
    return parts


def edited(hunk: Hunk, old: list[bytes], text: str) -> Hunk | None:
    """The hunk as a person edited it (``e``), or None when its old side no longer matches.

    Lines starting with ``-`` or space must be the hunk's old lines, in order; lines
    with ``+`` or space make its new side; ``#`` lines are comments.
    """
    old_side: list[str] = []
    new_side: list[bytes] = []
    ending = _ending(old[hunk.ctx_start:hunk.ctx_end] or [e for ed in hunk.edits for e in ed.new])
    for line in text.splitlines():
        if line.startswith("#") or line.startswith("@@"):
            continue
        mark, body = (line[:1] or " "), line[1:]
        if mark in " -":
            old_side.append(body)
        if mark in " +":
            new_side.append(body.encode() + ending)
        if mark not in " -+":
            return None
    if old_side != [_text(x) for x in old[hunk.ctx_start:hunk.ctx_end]]:
        return None
    return Hunk([Edit(hunk.ctx_start, hunk.ctx_end, tuple(new_side))], hunk.ctx_start,
                hunk.ctx_end, hunk.new_start)


def _ending(lines: list[bytes]) -> bytes:
    return b"\r\n" if any(x.endswith(b"\r\n") for x in lines) else b"\n"


def leaves(chosen: list[Hunk]) -> list[Hunk]:
    """The hunks that decide: a split hunk's parts instead of itself."""
    out: list[Hunk] = []
    for hunk in chosen:
        out.extend(leaves(hunk.parts) if hunk.parts else [hunk])
    return out


def apply(old: list[bytes], all_hunks: list[Hunk]) -> bytes:
    """The old content with the taken hunks' edits applied."""
    edits = sorted((e for h in leaves(all_hunks) if h.taken for e in h.edits),
                   key=lambda e: e.start)
    out: list[bytes] = []
    pos = 0
    for edit in edits:
        out.extend(old[pos:edit.start])
        out.extend(edit.new)
        pos = edit.end
    out.extend(old[pos:])
    return b"".join(out)
