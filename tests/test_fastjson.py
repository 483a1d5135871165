"""manager.fastjson reads and writes exactly what json does with default options."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from manager import fastjson

from .test_layering import REPO

VALUES = [
    {"session_id": "abc", "tool_input": {"command": "echo 'é' \"x\" \\ \u2028 \x00\x1f"}},
    [1, -2, 2.5, -3e20, 1e-7, -0.0, None, True, False, "", [], {}],
    {"nested": [[[{"a": [{}]}]]], "big": 10**30, "unicode": "日本語 🙂"},
    "a string", 0, 1.0,
]


@pytest.mark.parametrize("value", VALUES)
def test_same_text_as_json_dumps(value: object):
    assert fastjson.dumps(value) == json.dumps(value)


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("padding", ["", " \n\t\r"])
def test_same_value_as_json_loads(value: object, padding: str):
    text = padding + json.dumps(value) + padding
    assert fastjson.loads(text) == json.loads(text)
    assert fastjson.loads(text.encode()) == json.loads(text)


def test_non_finite_numbers_as_json_reads_and_writes_them():
    assert math.isnan(fastjson.loads("NaN"))
    assert fastjson.loads("[Infinity, -Infinity]") == [math.inf, -math.inf]
    assert fastjson.dumps([math.inf, -math.inf]) == json.dumps([math.inf, -math.inf])


def test_keys_are_converted_as_json_converts_them():
    value = {1: "a", 2.5: "b", None: "c", False: "d"}
    assert fastjson.dumps(value) == json.dumps(value)


@pytest.mark.parametrize("bad", ["", "   ", "{", "[1,]", "1 2", '{"a": 1} x', "nul", '"\x01"',
                                 '{"a" 1}', "'single'"])
def test_invalid_text_raises_jsons_own_error(bad: str):
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(bad)
    with pytest.raises(json.JSONDecodeError) as ours:
        fastjson.loads(bad)
    assert (str(ours.value), ours.value.pos) == (str(theirs.value), theirs.value.pos)


@pytest.mark.parametrize("value", [object(), {1j: 1}, {"set": {1}}])
def test_what_json_cannot_write_is_a_type_error(value: object):
    with pytest.raises(TypeError):
        fastjson.dumps(value)


def test_circular_values_are_refused():
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        fastjson.dumps(loop)


def test_imports_neither_json_nor_re():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from manager import fastjson; "
            "fastjson.loads(fastjson.dumps({'a': [1.5]})); "
            "print(' '.join(m for m in ('json', 're', 'typing') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO)],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
