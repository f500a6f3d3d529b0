"""Comments are read as the tokenizer reads them, without tokenizing every file."""

from __future__ import annotations

import ast

import pytest

from model_compile.parse.python import _comments, _tokenized_comments

CASES = [
    'x = ("a #no"\n     "b")  # model-compile: joined strings\n',
    'x = "a\\\n# not a comment"  # model-compile: backslash-newline in a string\n',
    "s = '''\n# inside a string\n'''  # model-compile: after a triple-quoted string\n",
    "f(a,\n  b)  # model-compile: open bracket\n# model-compile: own line\n#   continued\n",
    'x = 1 # model-compile: "quoted" reason\n',
    "y = f'{a!r}#' # model-compile: hash in an f-string\n",
    'def f():\n    """Doc # not one."""\n    return 1  # model-compile: after a one-line docstring\n',
]


@pytest.mark.parametrize("text", CASES)
def test_same_comments_as_the_tokenizer(text):
    module = ast.parse(text)
    got = _comments(text, module, text.splitlines())
    assert got == _tokenized_comments(text)
    assert got  # every case has a model-compile comment


def test_files_without_the_note_are_not_scanned():
    text = "x = 1  # an ordinary comment\n"
    assert _comments(text, ast.parse(text), text.splitlines()) == {}


def test_a_note_in_any_case_is_read_in_python_and_yaml():
    """The note's pattern ignores case (`# Model-Compile: regional - ...`), so the shortcut that skips
    files without a note must too."""
    from model_compile.parse.documentation import comment_docs, yaml_comments

    text = "x = 1  # Model-Compile: regional - each decoder layer is compiled on its own\n"
    comments = _comments(text, ast.parse(text), text.splitlines())
    assert [d.kind for d in comment_docs(comments, "e.py")] == ["regional"]
    yaml_text = "model:\n  compile:\n    enabled: true  # MODEL-COMPILE: enabled - on for the long stage\n"
    assert [d.kind for d in comment_docs(yaml_comments(yaml_text), "s.yaml")] == ["enabled"]
    assert yaml_comments("model:\n  compile:  # an ordinary comment\n    enabled: true\n") == {}
