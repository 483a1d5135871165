"""A small, conservative reader of bash command lines.

It does not execute or fully parse bash. It splits a command line into simple
commands at the list and pipe operators (``&& || ; | |& &`` and newlines),
removes quotes from their words, and records anything that makes a command
hard to judge: command or process substitution, redirections to files,
heredocs, subshells, groups and compound keywords. Callers treat every such
flag as "when in doubt, sandbox". Standard library only and no ``re``: it runs
on the PreToolUse hot path.

A command line is *plain* when nothing in it needs bash to interpret more than
quotes and the operators between simple commands: no expansion of any kind
(parameters, braces, globs, tildes, arithmetic, history), no comment, no
``$'...'``. Only a plain line may run outside the sandbox, and then as
:func:`requote` writes it from the words read here, so that bash runs what was
judged even where this reader and bash disagree.
"""

from __future__ import annotations

OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "\n")
KEYWORDS = frozenset(("if", "then", "elif", "else", "fi", "for", "while", "until", "do",
                      "done", "case", "esac", "select", "function", "coproc", "time", "!",
                      "{", "}", "[[", "]]"))
REDIRECTIONS = ("&>>", "<<<", "<<-", "&>", ">>", ">|", ">&", "<&", "<>", "<<", "<", ">")
SAFE_TARGETS = frozenset(("/dev/null",))
STANDARD_FDS = frozenset(("", "0", "1", "2"))
# Characters that mean nothing to bash outside quotes (shlex.quote's safe set).
PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")
# What requote writes between two parts for the operator that separated them.
JOINERS = {"&&": " && ", "||": " || ", "|": " | ", "|&": " |& ", "&": " & ", ";": "; ",
           "\n": "; "}
# Reserved words bash would read as syntax in a command's first place.
RESERVED = KEYWORDS | {"in"}


class Part:
    """One simple command: its words (quotes removed) and its source text."""

    __slots__ = ("words", "text", "file_redirect", "redirects", "after")

    def __init__(self) -> None:
        self.words: list[str] = []
        self.text = ""
        self.file_redirect = False    # a redirection to or from a file, or a heredoc
        self.redirects: list[str] = []   # the others (fd duplication, /dev/null), as written back
        self.after = ""               # the operator that ended it ("" at the end of the line)

    @property
    def assignments(self) -> list[str]:
        return self.words[:self._first_word()]

    @property
    def argv(self) -> list[str]:
        return self.words[self._first_word():]

    def _first_word(self) -> int:
        for i, word in enumerate(self.words):
            if not is_assignment(word):
                return i
        return len(self.words)


class Script:
    """The simple commands of a command line, and what makes it hard to judge."""

    __slots__ = ("parts", "substitution", "compound", "unterminated", "nested", "plain")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.substitution = False     # $(...), `...`, <(...), >(...)
        self.compound = False         # ( ), { }, if/for/while/case, functions
        self.unterminated = False     # an open quote, substitution or heredoc at the end
        self.nested: list[str] = []   # the command lines inside substitutions
        self.plain = True             # nothing for bash to interpret but quotes and operators


def is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    if not eq or not name:
        return False
    name = name.removesuffix("+")
    return (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name)


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.script = Script()
        self.part = Part()
        self.part_start = 0
        self.word: list[str] | None = None
        self.word_start = 0                  # where the current word began in the text
        self.heredocs: list[tuple[str, bool]] = []

    # -- words and parts ----------------------------------------------------

    def add(self, chars: str) -> None:
        if self.word is None:
            self.word = []
            self.word_start = self.i
        self.word.append(chars)

    def end_word(self) -> None:
        if self.word is not None:
            self.part.words.append("".join(self.word))
            self.word = None

    def end_part(self, at: int) -> bool:
        """Close the current simple command; False when it was empty (not kept)."""
        self.end_word()
        self.part.text = self.text[self.part_start:at].strip()
        self._note_keywords(self.part)
        kept = bool(self.part.words or self.part.file_redirect)
        if kept:
            self.script.parts.append(self.part)
        self.part = Part()
        return kept

    def _note_keywords(self, part: Part) -> None:
        # Compound syntax is flagged; its keywords are dropped so that the commands
        # inside (``if true; then rm x; fi``) are still judged one by one.
        while part.words and part.words[0] in KEYWORDS:
            self.script.compound = True
            self.script.plain = False
            keyword = part.words.pop(0)
            if part.text.startswith(keyword):
                part.text = part.text[len(keyword):].lstrip()
        if len(part.words) > 1 and part.words[1] == "()":
            self.script.compound = True

    # -- scanning -----------------------------------------------------------

    def run(self) -> Script:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t":
                self.end_word()
                self.i += 1
            elif c == "\\":
                self._backslash()
            elif c == "'":
                self._single_quoted()
            elif c == '"':
                self._double_quoted()
            elif c == "$":
                self._dollar()
            elif c == "`":
                self._backquoted()
            elif c == "#" and self.word is None:
                self._comment()
            elif c in "<>" or (c == "&" and text[self.i + 1:self.i + 2] == ">"):
                self._redirection()
            elif c in "()":
                self.script.compound = True
                self.script.plain = False
                self.end_word()
                self.i += 1
            elif c in ";|&\n":
                self._operator()
            else:
                self.add_plain(c)
                self.i += 1
        if self.heredocs:
            self.script.unterminated = True
        if not self.end_part(len(text)) and self.script.parts \
                and self.script.parts[-1].after in ("&&", "||", "|", "|&"):
            self.script.plain = False        # bash waits for the rest: not a command
        return self.script

    def add_plain(self, c: str) -> None:
        """An unquoted character of a word; one bash would interpret makes the line not plain."""
        if c not in PLAIN:
            self.script.plain = False
        self.add(c)

    def _operator(self) -> None:
        start = self.i
        op = next(o for o in OPERATORS if self.text.startswith(o, self.i))
        self.i += len(op)
        if self.end_part(start):
            self.script.parts[-1].after = op
        elif op != "\n":
            self.script.plain = False        # `; x`, `a;;`, `a && ; b`: bash's syntax error
        if op == ";;":
            self.script.plain = False
        if self.text[start] == "\n" and self.heredocs:
            self._heredoc_bodies()
        self.part_start = self.i

    def _backslash(self) -> None:
        nxt = self.text[self.i + 1:self.i + 2]
        if nxt == "\n":      # a line continuation
            self.i += 2
            return
        if not nxt:
            self.script.plain = False        # a lone backslash at the end
        self.add(nxt)
        self.i += 2

    def _single_quoted(self) -> None:
        end = self.text.find("'", self.i + 1)
        if end < 0:
            self.script.unterminated = True
            end = len(self.text)
        self.add(self.text[self.i + 1:end])
        self.i = end + 1

    def _double_quoted(self) -> None:
        self.add("")
        self.i += 1
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\" and text[self.i + 1:self.i + 2] in ('"', "\\", "$", "`", "\n"):
                if text[self.i + 1] != "\n":   # a line continuation, also in double quotes
                    self.add(text[self.i + 1])
                self.i += 2
            elif c == "`":
                self._backquoted()
            elif c == "$" and text[self.i + 1:self.i + 2] == "(":
                self._dollar()
            else:
                if c in "$!":                      # expansions, history
                    self.script.plain = False
                self.add(c)
                self.i += 1
        self.script.unterminated = True

    def _dollar(self) -> None:
        self.script.plain = False              # every unquoted $ expands or translates
        text = self.text
        nxt = text[self.i + 1:self.i + 2]
        if nxt == "'":                   # $'...' ANSI-C quoting
            self.i += 1
            end = self.i + 1
            while end < len(text) and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            self.add(text[self.i + 1:end])
            self.i = end + 1
            if end >= len(text):
                self.script.unterminated = True
        elif nxt == "(":
            self.script.substitution = True
            self._skip_balanced(self.i + 1)
        else:
            self.add("$")
            self.i += 1

    def _backquoted(self) -> None:
        self.script.substitution = True
        self.script.plain = False
        end = self.i + 1
        while end < len(self.text) and self.text[end] != "`":
            end += 2 if self.text[end] == "\\" else 1
        if end >= len(self.text):
            self.script.unterminated = True
        self.script.nested.append(self.text[self.i + 1:end].replace("\\`", "`"))
        self.add(self.text[self.i:end + 1])
        self.i = end + 1

    def _skip_balanced(self, open_at: int) -> None:
        """Skip ``( ... )`` from ``open_at``, quotes respected; add it to the word as is."""
        depth = 0
        j = open_at
        text = self.text
        quote = ""
        while j < len(text):
            c = text[j]
            if quote:
                if c == "\\" and quote == '"':
                    j += 1
                elif c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c == "\\":
                j += 1
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j >= len(text):
            self.script.unterminated = True
        self.script.nested.append(text[open_at + 1:j])
        start = open_at - 1 if open_at > 0 else open_at
        self.add(text[start:j + 1])
        self.i = j + 1

    def _comment(self) -> None:
        self.script.plain = False
        end = self.text.find("\n", self.i)
        self.i = len(self.text) if end < 0 else end

    def _redirection(self) -> None:
        text = self.text
        # A word made only of digits right before the operator is its fd number
        # (not of &> and &>>, which take none: `2&>x` has the argument 2).
        fd = "".join(self.word) if self.word is not None and text[self.i] != "&" else ""
        if _number(fd):
            if text[self.word_start:self.i] != fd:
                self.script.plain = False          # quoted digits: a word to bash
            self.word = None
        else:
            fd = ""
            self.end_word()
        if text[self.i] in "<>" and text[self.i + 1:self.i + 2] == "(":
            self.script.substitution = True          # process substitution
            self._skip_balanced(self.i + 1)
            return
        op = next(o for o in REDIRECTIONS if text.startswith(o, self.i))
        self.i += len(op)
        while self.i < len(text) and text[self.i] in " \t":
            self.i += 1
        target = self._read_word()
        if op in ("<<", "<<-"):
            self.heredocs.append((target.strip("'\""), op == "<<-"))
            self.part.file_redirect = True
        elif op in (">&", "<&") and (_number(target) or target == "-"):
            self.part.redirects.append(fd + op + target)   # fd duplication: no file
        elif target not in SAFE_TARGETS or op == "<<<":
            self.part.file_redirect = True
        else:
            self.part.redirects.append(fd + op + target)
        if fd not in STANDARD_FDS or (_number(target) and target not in STANDARD_FDS):
            self.script.plain = False      # would hand on whatever else the client has open

    def _read_word(self) -> str:
        """The next word, quotes removed (through the normal word machinery)."""
        saved_word, saved_parts = self.word, self.part.words
        self.word, self.part.words = None, []
        text = self.text
        while self.i < len(text) and text[self.i] not in " \t\n;|&<>()":
            c = text[self.i]
            if c == "'":
                self._single_quoted()
            elif c == '"':
                self._double_quoted()
            elif c == "\\":
                self._backslash()
            elif c == "$":
                self._dollar()
            elif c == "`":
                self._backquoted()
            else:
                self.add_plain(c)
                self.i += 1
        word = "".join(self.word or [])
        self.word, self.part.words = saved_word, saved_parts
        return word

    def _heredoc_bodies(self) -> None:
        text = self.text
        for delimiter, strip_tabs in self.heredocs:
            while self.i < len(text):
                end = text.find("\n", self.i)
                line = text[self.i:] if end < 0 else text[self.i:end]
                self.i = len(text) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
            else:
                self.script.unterminated = True
        self.heredocs = []


def _number(text: str) -> bool:
    """ASCII digits only: what bash takes for a file descriptor (str.isdigit takes more)."""
    return text.isascii() and text.isdigit()


def parse(command: str) -> Script:
    """Split ``command`` into simple commands, flagging what makes it hard to judge."""
    script = _Lexer(command).run()
    if "\0" in command or script.substitution or script.compound or script.unterminated \
            or any(p.file_redirect for p in script.parts):
        script.plain = False             # requote writes back none of these
    return script


def quote(word: str) -> str:
    """``word`` for bash, as shlex.quote writes it (without importing re: the hook's hot path)."""
    if word and all(c in PLAIN for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def requote(script: Script) -> str:
    """The command line bash reads as exactly ``script``'s parts: every word quoted from
    what was judged, the kept redirections and the operators between parts written anew.
    Only for a plain script (no compound syntax, substitution or expansion)."""
    out = []
    for part in script.parts:
        words = [quote(w) for w in part.words]
        if words and (words[0] in RESERVED or is_assignment(words[0])):
            words[0] = "'" + words[0] + "'"    # a program of that name, never syntax
        out.append(" ".join(words + part.redirects))
        out.append(JOINERS.get(part.after, "") if part is not script.parts[-1]
                   else " &" if part.after == "&" else "")
    return "".join(out)
