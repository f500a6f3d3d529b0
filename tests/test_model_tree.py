"""The model's module tree, read statically (parse/model_source.py, parse/model_tree.py): recipe-local classes
through their imports and bases, transformers classes of the repository's environment (the stand-in package of
tests/generate/fixtures/site_packages), conditions on __init__ arguments, and the checkpointing facts."""

from __future__ import annotations

import shutil
from pathlib import Path

from model_compile.parse.model_source import Resolver, find_transformers, model_type_of, recipe_model_class
from model_compile.parse.model_tree import build_tree

SITE = Path(__file__).parent / "generate" / "fixtures" / "site_packages" / "transformers"

SOURCE_MODEL = """\
import torch.nn as nn


class Norm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))


class Block(nn.Module):
    def __init__(self, cfg, idx):
        super().__init__()
        self.attn = Attention(cfg)
        self.norm = Norm(cfg.dim)
        if idx % 2 == 0:
            self.fusion = nn.Linear(cfg.dim, cfg.dim)

    def forward(self, x):
        return checkpoint(self._inner, x)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.q_proj = nn.Linear(cfg.dim, cfg.dim)


class Net(nn.Module):
    def __init__(self, cfg, head=True):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.layers = nn.ModuleList([Block(cfg, i) for i in range(cfg.n)])
        self.head = nn.Linear(cfg.dim, cfg.vocab) if head else None
        tower = Attention(cfg)
        self.tower = tower
        self.extra = build_extra(cfg)
        self.width = int(cfg.dim)
"""
ADAPTER = """\
from . import source_model


class Net(source_model.Net):
    def __init__(self, cfg):
        super().__init__(cfg, head=False)
"""
BUILDER = """\
from .adapter import Net


def build(cfg):
    return Net(cfg)
"""


def _recipe(root: Path) -> list[Path]:
    model = root / "recipes" / "toy" / "model"
    model.mkdir(parents=True)
    for name, text in (("source_model", SOURCE_MODEL), ("adapter", ADAPTER), ("builder", BUILDER)):
        (model / f"{name}.py").write_text(text)
    (model / "__init__.py").write_text("")
    return sorted(model.glob("*.py"))


def test_a_recipe_local_model_through_its_imports_bases_and_arguments(tmp_path):
    found = recipe_model_class(tmp_path, _recipe(tmp_path), {}, [])
    assert found is not None and found.ref.name == "Net" and found.ref.file.name == "adapter.py"
    tree = build_tree(Resolver(tmp_path, found.transformers), found.ref)
    assert [c.path for c in tree.containers()] == ["layers"]
    assert tree.element("layers").cls == "Block"
    assert tree.has("layers.*.attn.q_proj") is True and tree.has("layers.*.mlp") is False
    assert tree.has("head") is False  # the subclass passes head=False: never built
    assert tree.nodes["layers.*.fusion"].optional  # built in some blocks only
    assert not tree.nodes["layers.*.norm"].composite and tree.nodes["layers.*.attn"].composite
    assert tree.checkpoint_callers == {"Block"}  # its forward holds the checkpoint
    assert tree.has("tower.q_proj") is True  # a module built into a local name, then assigned
    assert tree.has("extra") is True and tree.has("extra.proj") is None  # a helper's module: its inside unknown
    assert tree.has("width") is False  # plain data is no module
    assert tree.eager_around(["layers.*.attn"]) == ["embed", "layers.*.norm", "layers.*.fusion", "tower", "extra"]


def test_a_transformers_model_from_a_checkpoint_through_the_kits_auto_class(tmp_path):
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "transformers"
    shutil.copytree(SITE, site)
    package = find_transformers(tmp_path)
    assert package is not None and package.own and package.version == "5.99.0"
    kit = tmp_path / "kit.py"
    kit.write_text(
        "class Kit:\n    def build_model(self, path):\n        from transformers import AutoModelForImageTextToText\n\n"
        "        return AutoModelForImageTextToText.from_pretrained(path)\n"
    )
    stages = {"train.yaml": "model:\n  pretrained_model_name_or_path: Toy/Qwen2-VL-2B-Instruct\n"}
    found = recipe_model_class(tmp_path, [], stages, [kit], "self.model_kit.build_model")
    assert found is not None and found.ref.name == "Qwen2VLForConditionalGeneration"
    assert "checkpoint `Toy/Qwen2-VL-2B-Instruct` in train.yaml, built through AutoModelForImageTextToText" in found.why
    tree = build_tree(Resolver(tmp_path, package), found.ref)
    # `AutoModel.from_config(config.text_config)`: the sub-config's model type, mapped by the auto class
    assert tree.nodes["model.language_model"].cls == "Qwen2VLTextModel"
    assert [c.path for c in tree.containers()] == ["model.visual.blocks", "model.language_model.layers"]
    assert tree.no_split == ("Qwen2VLDecoderLayer", "Qwen2VLVisionBlock")
    assert tree.checkpoint_layers == {"Qwen2VLDecoderLayer", "Qwen2VLVisionBlock"}
    assert tree.checkpoint_in_forward is False  # the stand-in checkpoints around the call
    shutil.copy(site / "modeling_layers_forward.py.txt", site / "modeling_layers.py")  # read again: it changed
    assert build_tree(Resolver(tmp_path, package), found.ref).checkpoint_in_forward is True
    units = build_tree(Resolver(tmp_path, package), found.ref).units_inside("model.language_model")
    assert [u.path for u in units] == ["model.language_model.layers.*"]


def test_a_checkpoint_name_maps_to_the_longest_model_type_it_starts_with():
    known = {"qwen3", "qwen3_vl", "qwen3_vl_moe", "vit"}
    assert model_type_of("Qwen/Qwen3-VL-8B-Instruct", known) == "qwen3_vl"
    assert model_type_of("./pretrained/Qwen3-8B-Base", known) == "qwen3"
    assert model_type_of("google/vit-base-patch16-224", known) == "vit"
    assert model_type_of("acme/unknown-model", known) is None
