"""Text insertion of a `compile:` block under `model:` in a stage YAML.

Every other byte stays as it was: the block is inserted after the last line
of the `model:` mapping at that mapping's indentation, then the result is
re-parsed to prove only `model.compile` changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from model_compile.errors import InputError


@dataclass
class YamlResult:
    text: str
    changed: bool
    note: str


def _last_line(node: yaml.Node) -> int:
    """0-based last line holding content of a node."""
    if isinstance(node, yaml.MappingNode):
        if not node.value:
            return node.start_mark.line
        return max(_last_line(node.value[-1][1]), node.value[-1][0].end_mark.line)
    if isinstance(node, yaml.SequenceNode):
        if not node.value or node.flow_style:
            return node.end_mark.line
        return _last_line(node.value[-1])
    end = node.end_mark
    line = end.line
    if end.column == 0 and line > node.start_mark.line:  # block scalar ends at the next line start
        line -= 1
    return line


def edit_stage(text: str, block_lines: Callable[[str, str], str], *, filename: str) -> YamlResult:
    """block_lines(indent: str, step: str) -> the compile block text (lines ending in newline)."""
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{filename}: cannot parse YAML ({str(exc).splitlines()[0]})") from exc
    if root is None or not isinstance(root, yaml.MappingNode):
        raise InputError(f"{filename}: top level is not a mapping")
    lines = text.splitlines(keepends=True)
    model_key: yaml.ScalarNode | None = None
    model_val: yaml.Node | None = None
    for k, v in root.value:
        if isinstance(k, yaml.ScalarNode) and k.value == "model":
            model_key, model_val = k, v
    if model_key is not None and isinstance(model_val, yaml.MappingNode):
        if any(isinstance(k, yaml.ScalarNode) and k.value == "compile" for k, _ in model_val.value):
            return YamlResult(text=text, changed=False, note=f"{filename}: model.compile already present")
        if model_val.flow_style:
            raise InputError(f"{filename}: `model:` is a flow mapping; add the compile block by hand")
        if not model_val.value:
            raise InputError(f"{filename}: `model:` is an empty mapping; add the compile block by hand")
        child_col = model_val.value[0][0].start_mark.column
        parent_col = model_key.start_mark.column
        indent = " " * child_col
        step = " " * max(child_col - parent_col, 2)
        insert_at = _last_line(model_val) + 1
        note = f"{filename}: added model.compile after line {insert_at}"
    elif model_key is not None and isinstance(model_val, yaml.ScalarNode) and model_val.value in ("", "null", "~"):
        if model_val.value:
            raise InputError(f"{filename}: `model:` is null; add the compile block by hand")
        parent_col = model_key.start_mark.column
        step = "  "
        indent = " " * parent_col + step
        insert_at = model_key.start_mark.line + 1
        note = f"{filename}: added model.compile under the empty model section"
    elif model_val is None:
        col = root.value[0][0].start_mark.column if root.value else 0
        step = "  "
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.append(" " * col + "model:\n")
        indent = " " * col + step
        insert_at = len(lines)
        note = f"{filename}: added a model section with compile"
    else:
        raise InputError(f"{filename}: `model:` is not a mapping")
    if insert_at > 0 and insert_at <= len(lines) and not lines[insert_at - 1].endswith("\n"):
        lines[insert_at - 1] += "\n"
    block = block_lines(indent, step)
    new_lines = lines[:insert_at] + [block] + lines[insert_at:]
    new_text = "".join(new_lines)
    _verify(data, new_text, filename)
    return YamlResult(text=new_text, changed=True, note=note)


def _verify(before: Any, new_text: str, filename: str) -> None:
    try:
        after = yaml.safe_load(new_text)
    except yaml.YAMLError as exc:
        raise InputError(f"{filename}: inserting the compile block broke the YAML; add it by hand") from exc
    model = after.get("model") if isinstance(after, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("compile"), dict):
        raise InputError(f"{filename}: could not place model.compile unambiguously")
    rest = dict(after)
    rest["model"] = {k: v for k, v in model.items() if k != "compile"}
    expected = dict(before or {})
    expected.setdefault("model", {})
    if expected["model"] is None:
        expected["model"] = {}
    if rest != expected:
        raise InputError(f"{filename}: inserting the compile block changed other keys; add it by hand")
