"""JSON for the hook path without ``import json``.

``json`` imports ``re`` (and with it ``enum``, ``functools``, ``collections``) for
its pure-Python fallbacks, which costs more than the rest of a hook's start-up
together. The C accelerator ``_json`` that ``json`` itself uses needs none of
that, so the hook parses and writes through it directly: the same parser and
encoder, the same output as ``json.loads`` / ``json.dumps`` with default options.
Errors are ``json``'s own (``JSONDecodeError`` is a ``ValueError``).
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing imports re
if TYPE_CHECKING:
    from typing import Any

_WHITESPACE = " \t\n\r"


class _Context:
    """What ``_json.make_scanner`` reads from a ``json.JSONDecoder``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name.replace("Infinity", "inf"))  # NaN, Infinity, -Infinity


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``."""
    if isinstance(text, (bytes, bytearray)):
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        # typeshed wants a scanner as the context; the C code reads these attributes.
        value, end = _json.make_scanner(_Context())(text, start)  # type: ignore[arg-type]
    except StopIteration as stop:
        raise _error("Expecting value", text, stop.value) from None
    except SystemError:
        # The scanner raises ``json.decoder.JSONDecodeError``, which it looks up in
        # sys.modules only (CPython 3.11): before ``json`` is imported it fails without it.
        import json

        return json.loads(text)   # raises the same error, now with its class
    if text[end:].strip(_WHITESPACE):
        raise _error("Extra data", text, end + len(text[end:]) - len(text[end:].lstrip(_WHITESPACE)))
    return value


def dumps(value: Any) -> str:
    """``json.dumps(value)``: default separators, ASCII only, no NaN check."""
    encode = _json.make_encoder({}, _unserializable, _json.encode_basestring_ascii, None,
                                ": ", ", ", False, False, True)
    return "".join(encode(value, 0))


def _unserializable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _error(message: str, text: str, position: int) -> ValueError:
    from json import JSONDecodeError

    return JSONDecodeError(message, text, position)
