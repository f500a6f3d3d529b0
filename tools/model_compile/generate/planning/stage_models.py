"""The model each stage of a recipe builds, statically, and whether the stages agree.

A recipe's code may build one class for every stage (its own model class, or `ViTFor...from_pretrained`), or
load whatever the stage's checkpoint names through an auto class (`AutoModelForCausalLM.from_pretrained(
model_config.pretrained_model_name_or_path, ...)`). Then each stage's model is read from its own checkpoint: the
checkpoint's `config.json` when it is on this machine, else the model type its name says - one transformers
knows, or one the repository's own (vendored, remote-code) configuration classes declare. The class is the one
the load call's auto class maps that type to in transformers' `models/auto/modeling_auto.py` (read as text); an
auto class whose mapping lacks the type cannot build it (`AutoModelForCausalLM` has no vision-language
conditional-generation classes), and with `trust_remote_code=True` the checkpoint's own code decides: the
repository's vendored model code for that type when it has it (its outermost model class), else unknown.

Nothing is imported: the repository's code and transformers are read as text.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.errors import InputError
from model_compile.generate.edits.base_tests import world_size
from model_compile.generate.planning import locate
from model_compile.ledger.callgraph import Finder
from model_compile.ledger.hazards import Inside, inside, patch_functions, target_starts
from model_compile.ledger.models import Ledger
from model_compile.ledger.stage_gates import load_stages, lookup
from model_compile.parse.model_source import (
    ClassRef,
    Resolver,
    Transformers,
    auto_mappings,
    find_transformers,
    is_module_class,
    model_type_of,
    parse_file,
)
from model_compile.parse.model_tree import build_tree
from model_compile.parse.models import StageFacts

_PRETRAINED = re.compile(
    r"^\s*(?:pretrained_model_name_or_path|model_name_or_path|pretrained):\s*[\"']?([^\"'#\s]+)", re.M
)
_LOADERS = ("from_pretrained", "from_config", "_from_config")


@dataclass
class LoadCall:
    """How prepare_model() builds its model: the auto class (or class) the load call names, and its options."""

    callee: str  # `AutoModelForCausalLM`, `ViTForImageClassification`, `build_model`
    remote_code: bool  # trust_remote_code=True
    where: str  # `model/qwen3_vl.py:382`
    source: list[str] | None = None  # the config key the checkpoint comes from (`config.path`), as an attribute chain


@dataclass
class StageModel:
    stage: str
    layout: locate.ModelLayout | None
    why: str  # how the class was read, or why it is not known


@dataclass
class StageModels:
    """The model of each stage acted on, and the one layout they share (None: unknown, or the stages disagree)."""

    stages: list[StageModel] = field(default_factory=list)

    @property
    def classes(self) -> dict[str, list[str]]:
        """{class: [stages that build it]} over the stages whose model is known."""
        out: dict[str, list[str]] = {}
        for s in self.stages:
            if s.layout is not None:
                out.setdefault(s.layout.name, []).append(s.stage)
        return out

    @property
    def disagree(self) -> bool:
        return len(self.classes) > 1

    @property
    def layout(self) -> locate.ModelLayout | None:
        """The layout every stage with a known model shares; None when none is known or they differ."""
        known = [s.layout for s in self.stages if s.layout is not None]
        return known[0] if known and not self.disagree else None

    def known(self) -> list[locate.ModelLayout]:
        """Each distinct layout a stage acted on builds."""
        seen: dict[str, locate.ModelLayout] = {}
        for s in self.stages:
            if s.layout is not None:
                seen.setdefault(s.layout.name, s.layout)
        return list(seen.values())

    def notes(self) -> list[str]:
        """What generate says about the model it read: from which stages, and where they disagree."""
        if not self.stages:
            return []
        unknown = [s for s in self.stages if s.layout is None]
        classes = self.classes
        out = []
        if self.disagree:
            parts = "; ".join(
                f"{', '.join(stages)} build{'s' if len(stages) == 1 else ''} {name}" for name, stages in classes.items()
            )
            out.append(
                f"the stages acted on disagree on the model: {parts}: no module tree is picked for them (targets "
                "are not inferred, the README names no eager modules; --config-name acts on the stages of one model)"
            )
        elif classes:
            ((name, stages),) = classes.items()
            first = next(s for s in self.stages if s.layout is not None)
            out.append(f"model read from {', '.join(stages)}: {first.why}")
        out += [f"{s.stage}: model not known statically: {s.why}" for s in unknown]
        return out


def load_call(root: Path, recipe: Path, ledgers: list[Ledger]) -> LoadCall | None:
    """The load call of the first build event prepare_model() reaches, read from its file."""
    built = [e for lg in ledgers for e in lg.of("build") if e.reachable]
    if not built:
        return None
    event = built[0]
    head = event.call.split("(")[0].split("=")[-1].strip()
    parts = head.split(".")
    callee = parts[-2] if parts[-1] in _LOADERS and len(parts) > 1 else parts[-1]
    file = recipe / event.file if (recipe / event.file).is_file() else root / event.file
    tree = parse_file(file)
    remote, source = False, None
    for node in ast.walk(tree) if tree is not None else []:
        if isinstance(node, ast.Call) and node.lineno == event.line:
            remote = any(
                k.arg == "trust_remote_code" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords
            )
            named = [k.value for k in node.keywords if k.arg == "pretrained_model_name_or_path"]
            arg = node.args[0] if node.args else named[0] if named else None
            text = ast.unparse(arg) if arg is not None else ""
            source = text.split(".") if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", text) else None
            break
    return LoadCall(callee, remote, f"{event.file}:{event.line}", source)


def _checkpoint(call: LoadCall, text: str) -> str | None:
    """The checkpoint a stage gives the load call: the config key its argument reads, else the usual keys."""
    if call.source is not None:
        value = lookup(next(iter(load_stages({"s.yaml": text}).values()), None), call.source)
        if isinstance(value, str):
            return value
    found = _PRETRAINED.findall(text)
    return found[0] if found else None


def _constant(ref: ClassRef, name: str) -> str | None:
    for stmt in ref.node.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            return stmt.value.value
    return None


def _classes(file: Path) -> list[ast.ClassDef]:
    tree = parse_file(file)
    return [n for n in tree.body if isinstance(n, ast.ClassDef)] if tree is not None else []


def vendored_types(files: list[Path]) -> dict[str, list[str]]:
    """{model_type: [config classes]} the repository's own configuration classes declare (vendored model code)."""
    out: dict[str, list[str]] = {}
    for file in files:
        for cls in _classes(file):
            if not any(ast.unparse(b).endswith(("Config", "PretrainedConfig")) for b in cls.bases):
                continue
            model_type = _constant(ClassRef(cls.name, file, cls), "model_type")
            if model_type:
                out.setdefault(model_type, []).append(cls.name)
    return out


def _config_of(resolver: Resolver, ref: ClassRef, depth: int = 0) -> ClassRef | None:
    """The config class a model class declares (`config_class = ...`), on itself or a base it reads."""
    for stmt in ref.node.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "config_class" for t in stmt.targets
        ):
            return resolver.in_file(ref.file, ast.unparse(stmt.value))
    for base in ref.node.bases if depth < 6 else []:
        found = resolver.in_file(ref.file, ast.unparse(base))
        if found is not None and found != ref and (config := _config_of(resolver, found, depth + 1)) is not None:
            return config
    return None


def vendored_model(resolver: Resolver, files: list[Path], model_type: str) -> tuple[ClassRef | None, str]:
    """The outermost model class of the repository's own code for `model_type` (a module class whose config class
    declares that type, that no other such class builds or derives from), and why; None when not exactly one."""
    candidates: list[ClassRef] = []
    for file in files:
        for cls in _classes(file):
            ref = ClassRef(cls.name, file, cls)
            config = _config_of(resolver, ref)
            if config is not None and _constant(config, "model_type") == model_type and is_module_class(resolver, ref):
                candidates.append(ref)
    names = {c.name for c in candidates}
    used = set()
    for c in candidates:
        used |= {ast.unparse(b).rsplit(".", 1)[-1] for b in c.node.bases} & names
        used |= {n.id for n in ast.walk(c.node) if isinstance(n, ast.Name) and n.id in names and n.id != c.name}
    outer = [c for c in candidates if c.name not in used]
    if len(outer) == 1:
        rel = outer[0].file.name
        return outer[0], f"the repository's own code for model type `{model_type}` ({rel}: its outermost model class)"
    if not outer:
        return None, f"the repository has no model class for model type `{model_type}`"
    return (
        None,
        f"the repository's code for `{model_type}` has {len(outer)} outermost model classes ({', '.join(c.name for c in outer)})",
    )


def _local_type(root: Path, checkpoint: str) -> str | None:
    import json

    path = Path(checkpoint) if checkpoint.startswith("/") else root / checkpoint
    try:
        data = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("model_type") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _checkpoint_class(
    resolver: Resolver, package: Transformers | None, call: LoadCall, checkpoint: str, files: list[Path], root: Path
) -> tuple[ClassRef | None, str]:
    """The class the load call builds from this checkpoint, and how that was read (or why it is not known)."""
    names, autos = auto_mappings(package.path) if package is not None else ({}, {})
    vendored = vendored_types(files) if call.remote_code else {}
    known = {t for mapping in names.values() for t in mapping} | set(vendored)
    local = _local_type(root, checkpoint)
    model_type = local or model_type_of(checkpoint, known)
    said = "its config.json" if local else "its name"
    if model_type is None:
        return (
            None,
            f"checkpoint `{checkpoint}` is not here and its name says no model type transformers or the repository knows",
        )
    mapping = names.get(autos.get(call.callee, ""), {})
    cls = mapping.get(model_type)
    if cls is not None and (ref := resolver.transformers_class(cls)) is not None:
        return (
            ref,
            f"{cls}: checkpoint `{checkpoint}` ({said}: `{model_type}`), built by {call.callee} ({call.where}; read from {package.where if package else 'transformers'})",
        )
    cannot = (
        f"{call.callee} ({call.where}) cannot build a `{model_type}` model (checkpoint `{checkpoint}`, {said}): "
        f"its mapping in {package.where if package else 'transformers'} has no `{model_type}`"
    )
    if not call.remote_code:
        return None, cannot
    ref, why = vendored_model(resolver, files, model_type)
    if ref is not None:
        return (
            ref,
            f"{ref.name}: checkpoint `{checkpoint}` ({said}: `{model_type}`), loaded by {call.callee}(trust_remote_code=True) ({call.where}) as {why}; the checkpoint's own auto_map, not on this machine, decides at run time",
        )
    return None, f"{cannot}; with trust_remote_code=True the checkpoint's own code decides (not on this machine): {why}"


def stage_models(
    files: locate.RecipeFiles,
    stages: list[str],
    kit_files: list[Path],
    ledgers: list[Ledger],
) -> StageModels:
    """The model of each of `stages`: one class for all when the recipe's code builds its own, else each stage's
    checkpoint through the load call's auto class."""
    builder = locate.builder_of(ledgers)
    call = load_call(files.root, files.recipe, ledgers)
    by_stem = {p.stem: p for p in files.stages}
    out = StageModels()
    if call is None or not call.callee.startswith("Auto"):  # the recipe's code, or its kit's builder
        for stage in stages:
            layout = locate.model_layout(files, kit_files, builder, [stage])
            why = layout.why if layout is not None else "the model's class and code were not found"
            out.stages.append(StageModel(stage, layout, why))
        return out
    package = find_transformers(files.root)
    resolver = Resolver(files.root, package)
    code = locate.model_files(files)
    for stage in stages:
        text = locate.read_text(by_stem[stage]) if stage in by_stem else ""
        checkpoint = _checkpoint(call, text)
        if checkpoint is None:
            key = ".".join(call.source[1:]) if call.source else "pretrained_model_name_or_path"
            out.stages.append(StageModel(stage, None, f"{stage}.yaml sets no checkpoint (`{key}`)"))
            continue
        ref, why = _checkpoint_class(resolver, package, call, checkpoint, code, files.root)
        layout = None
        if ref is not None:
            source = (
                package.where
                if package is not None and ref.file.is_relative_to(package.path)
                else "the recipe's model code"
            )
            layout = locate.ModelLayout(ref.name, f"{why} [{stage}.yaml]", build_tree(resolver, ref), source)
        out.stages.append(StageModel(stage, layout, why if ref is None else f"{why} [{stage}.yaml]"))
    return out


def acted_stages(files: locate.RecipeFiles, asked: list[str] | None) -> list[str]:
    """The stages generate acts on: those named with --config-name (each must have a YAML), else every stage."""
    stems = [p.stem for p in files.stages]
    if not asked:
        return stems
    unknown = [s for s in asked if s not in stems]
    if unknown:
        raise InputError(
            f"--config-name {', '.join(unknown)}: no such stage in {files.rel(files.recipe)}/configs (stages: "
            f"{', '.join(stems) or 'none'})"
        )
    return list(dict.fromkeys(asked))


def stage_ranks(facts: StageFacts | None) -> tuple[int, int] | None:
    """(the least world size the stage's mesh runs on, the product of its fixed dimensions); None without a mesh."""
    if facts is None or not facts.mesh:
        return None
    fixed = 1
    for value in facts.mesh.values():
        fixed *= value if value > 0 else 1
    return world_size(facts).size, fixed


def models_of(models: StageModels | None) -> str:
    """`the model of stage2`, `the model of stage1, stage2`: the stages the layout was read for."""
    stages = [s.stage for s in models.stages if s.layout is not None] if models is not None else []
    return f"the model of {', '.join(stages)}" if stages else "the recipe's model"


def runs_inside(
    files: locate.RecipeFiles,
    layout: locate.ModelLayout,
    targets: list[str],
    model_var: str,
    ledgers: list[Ledger],
    stages: list[str],
    exclude: list[str] | None = None,
) -> tuple[Inside, str | None]:
    """What of the repository's code runs inside the targets (relative to the model: `X.*.self_attn`), read with
    the acted stages' `attn_implementation` where they agree on one, and that value. `exclude`: regions kept eager
    (what the kit disables), relative to the model."""
    values = set()
    for stage in stages:
        path = next((p for p in files.stages if p.stem == stage), None)
        data = next(iter(load_stages({"s.yaml": locate.read_text(path)}).values()), None) if path else None
        value = lookup(data, ["x", "attn_implementation"]) if data is not None else None
        values.add(value if isinstance(value, str) else None)
    attn = values.pop() if len(values) == 1 else None
    finder = Finder(Resolver(files.root, find_transformers(files.root)))
    rel = [t[len(model_var) + 1 :] if t.startswith(model_var + ".") else "" for t in targets]
    starts = target_starts(finder, layout.tree, locate.model_files(files), rel, exclude or [])
    return inside(finder, files.root, starts, patch_functions(finder, files.recipe, ledgers), attn), attn
