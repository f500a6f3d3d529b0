"""Read `model.compile` from each stage YAML with line numbers (safe loader)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from model_compile.parse.models import FLAT_FIELDS, StageFacts

_SCALARS = {"enabled", "backend", "mode"}
_NULL = "tag:yaml.org,2002:null"  # `compile:` with nothing after it: an empty section, not the flat switch
# libyaml's composer when available: same safe node graph, several times faster.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_SCALARS_LOADER = yaml.SafeLoader(
    ""
)  # one constructor for every scalar (a new loader per value costs more than the value)


def _construct(node: yaml.ScalarNode) -> object:
    try:
        return _SCALARS_LOADER.construct_object(node, deep=True)
    finally:  # keep no state between values
        _SCALARS_LOADER.constructed_objects = {}
        _SCALARS_LOADER.recursive_objects = {}


# OmegaConf resolvers whose second argument is a default: `${oc.env:NAME,inductor}`, `${oc.select:key,eager}`.
_WITH_DEFAULT = re.compile(r"^\$\{\s*oc\.(?:env|select)\s*:\s*[^,{}]+?\s*,\s*(?P<default>[^{}]*?)\s*\}$")


def interpolation_default(text: str) -> tuple[bool, Any]:
    """(has a default, the default) of an OmegaConf interpolation such as `${oc.env:NAME,inductor}`.

    Only a whole value that is one resolver call with a literal default has
    one; `${model.other}`, `${oc.env:NAME}` and `prefix-${x}` are resolved at
    run time with nothing to check before.
    """
    m = _WITH_DEFAULT.match(text.strip())
    if m is None:
        return False, None
    raw = m.group("default")
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return True, raw[1:-1]
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        return True, raw
    return True, value if isinstance(value, (str, bool, int, float)) or value is None else raw


def mapping_child(mapping: yaml.Node | None, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    """(key node, value node) of `key` in a composed YAML mapping, else None."""
    if not isinstance(mapping, yaml.MappingNode):
        return None
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None


def _read_mesh(root: yaml.Node, facts: StageFacts) -> None:
    """`parallel.mesh.<dim>` integer sizes, statically."""
    parallel = mapping_child(root, "parallel")
    mesh = mapping_child(parallel[1], "mesh") if parallel else None
    if mesh is None or not isinstance(mesh[1], yaml.MappingNode):
        return
    facts.mesh_line = mesh[0].start_mark.line + 1
    for key, value in mesh[1].value:
        if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.ScalarNode):
            try:
                number = _construct(value)
            except yaml.YAMLError:
                continue
            if isinstance(number, int) and not isinstance(number, bool):
                facts.mesh[key.value] = number
                if key.value == "shard":
                    facts.mesh_line = key.start_mark.line + 1


def stage_facts(text: str, path: str, name: str) -> StageFacts:
    """Facts about one stage YAML; a YAML that does not parse is a problem, not a crash."""
    facts = StageFacts(file=path, name=name)
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        facts.problems.append(f"does not parse as YAML{where}: {getattr(exc, 'problem', exc)}")
        return facts
    except RecursionError:
        facts.problems.append("does not parse as YAML: nested too deeply")
        return facts
    if root is not None:
        _read_mesh(root, facts)
        data = mapping_child(root, "data")
        strategy = mapping_child(data[1], "packing_selection_strategy") if data else None
        if strategy is not None and isinstance(strategy[1], yaml.ScalarNode):
            facts.packing = str(strategy[1].value)
    model = mapping_child(root, "model") if root is not None else None
    if model is None:
        return facts
    comp = mapping_child(model[1], "compile")
    if comp is not None and not (isinstance(comp[1], yaml.ScalarNode) and comp[1].tag != _NULL):
        facts.has_compile, facts.form = True, "section"
        facts.lines["compile"] = comp[0].start_mark.line + 1
        for key, value in comp[1].value if isinstance(comp[1], yaml.MappingNode) else []:
            if isinstance(key, yaml.ScalarNode) and key.value in _SCALARS:
                _read_value(facts, key.value, key, value)
        return facts
    # The older flat form: `model.compile: <bool>` beside `model.compile_backend` / `model.compile_mode`.
    flat = {name: mapping_child(model[1], key) for name, key in FLAT_FIELDS.items()}
    if any(found is not None for found in flat.values()):
        facts.has_compile, facts.form = True, "flat"
        first = min(found[0].start_mark.line for found in flat.values() if found is not None)
        facts.lines["compile"] = first + 1
        for name, found in flat.items():
            if found is not None:
                _read_value(facts, name, found[0], found[1])
    return facts


def _read_value(facts: StageFacts, name: str, key: yaml.Node, value: yaml.Node) -> None:
    """One compile field's value and line (an interpolation is dynamic: resolved when the config loads)."""
    facts.lines[name] = key.start_mark.line + 1
    if not isinstance(value, yaml.ScalarNode):
        facts.values[name] = {"<non-scalar>": True}
        return
    try:
        facts.values[name] = _construct(value)
    except yaml.YAMLError:
        facts.values[name] = value.value
    literal = facts.values[name]
    if isinstance(literal, str) and "${" in literal:  # OmegaConf resolves it when the config loads
        facts.dynamic[name] = literal
        has_default, default = interpolation_default(literal)
        if has_default:
            facts.defaults[name] = default
