"""Text edits of a stage YAML's compile keys: a `compile:` block inserted under `model:`, and the older flat keys.

Every other byte stays as it was: the block is inserted after the last line
of the `model:` mapping at that mapping's indentation, then the result is
re-parsed to prove only `model.compile` changed.

The older flat keys (`model.compile: <bool>`, `model.compile_backend`, `model.compile_mode`; MC206 names the form)
are set in place (`set_flat`, quotes kept): a key the stage lacks is inserted after the last of the flat keys it has
(else after the `model:` mapping's last line) at that mapping's indentation, and `compile: true` carries the intent
note `# model-compile: enabled - <reason>` (removed when it turns false). The result is re-parsed to prove that
only those keys changed; otherwise nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from model_compile.errors import InputError
from model_compile.parse.models import FLAT_FIELDS
from model_compile.parse.stages import mapping_child


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


INTENT = "model-compile: enabled"


def _scalar(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def set_flat(text: str, values: dict[str, Any], reason: str | None, *, filename: str) -> str:
    """`text` with each flat compile key set (`values` by field: enabled, backend, mode)."""
    try:
        before = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{filename}: cannot parse YAML ({str(exc).splitlines()[0]})") from exc
    for name, value in values.items():
        text = _set_one(text, FLAT_FIELDS[name], value, filename)
    if "enabled" in values:
        text = _note(text, values["enabled"] is True, reason, filename)
    expected = yaml.safe_load(yaml.safe_dump(before)) or {}
    expected.setdefault("model", {}).update({FLAT_FIELDS[k]: v for k, v in values.items()})
    try:
        after = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{filename}: the edit broke the YAML; edit it by hand") from exc
    if after != expected:
        raise InputError(f"{filename}: the edit changed more than the flat compile keys; edit it by hand")
    return text


def _model(text: str, filename: str) -> tuple[list[str], yaml.MappingNode]:
    root = yaml.compose(text)
    model = mapping_child(root, "model") if root is not None else None
    if model is None or not isinstance(model[1], yaml.MappingNode) or model[1].flow_style or not model[1].value:
        raise InputError(f"{filename}: no block `model:` mapping to add the compile keys to; edit it by hand")
    return text.splitlines(keepends=True), model[1]


def _set_one(text: str, key: str, value: Any, filename: str) -> str:
    lines, model = _model(text, filename)
    found = mapping_child(model, key)
    new = _scalar(value)
    if found is None:
        flat = [mapping_child(model, k) for k in FLAT_FIELDS.values()]
        present = [f for f in flat if f is not None]
        after = max(_last_line(v) for _, v in present) if present else _last_line(model)
        indent = " " * model.value[0][0].start_mark.column
        eol = "\r\n" if lines[after].endswith("\r\n") else "\n"
        if not lines[after].endswith(("\n", "\r")):
            lines[after] += eol
        lines.insert(after + 1, f"{indent}{key}: {new}{eol}")
        return "".join(lines)
    v = found[1]
    if not isinstance(v, yaml.ScalarNode) or v.start_mark.line != v.end_mark.line:
        raise InputError(f"{filename}: model.{key} is not a one-line value; edit it by hand")
    row, line = v.start_mark.line, lines[v.start_mark.line]
    old = line[v.start_mark.column : v.end_mark.column]
    shown = f"{old[0]}{new}{old[0]}" if old[:1] in ("'", '"') and not isinstance(value, bool) else new
    lines[row] = line[: v.start_mark.column] + shown + line[v.end_mark.column :]
    return "".join(lines)


def _note(text: str, on: bool, reason: str | None, filename: str) -> str:
    lines, model = _model(text, filename)
    found = mapping_child(model, FLAT_FIELDS["enabled"])
    assert found is not None  # set just before
    row = found[1].start_mark.line
    line = lines[row]
    body, eol = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :] or "\n"
    body = re.sub(r"\s+#\s*model-compile:\s*enabled\b.*$", "", body, flags=re.IGNORECASE)
    above = row > 0 and bool(_NOTE_LINE.match(lines[row - 1]))
    if on and reason and "#" in body[found[1].end_mark.column :]:  # a comment of its own: the note goes above
        lines[row] = body + eol
        note = " " * found[0].start_mark.column + f"# {INTENT} - {reason}{eol}"
        if above:
            lines[row - 1] = note
        else:
            lines.insert(row, note)
        return "".join(lines)
    lines[row] = (f"{body}  # {INTENT} - {reason}" if on and reason else body) + eol
    if above:  # the note is on the line itself now, or gone
        del lines[row - 1]
    return "".join(lines)


_NOTE_LINE = re.compile(r"^\s*#\s*model-compile:\s*enabled\b", re.IGNORECASE)
