"""Ledger walking: every wrapper kind, control flow, identity tracking."""

from __future__ import annotations

import pytest

from model_compile.analyze import analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.rules.base import Example
from model_compile.rules.scaffold import example_files


def _ledger(body: str):
    report = analyze_tree(MemoryTree(example_files(Example(body=body))))
    return report.recipes[0]


WRAPS = [
    "model = DistributedDataParallel(model, device_ids=[0])",
    "model = DDP(model)",
    "model = FullyShardedDataParallel(model, use_orig_params=True)",
    "model = FSDP(model)",
    "fully_shard(model)",
    "model = parallelize_module(model, mesh, plan)",
    "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)",
    "model, _, _, _ = deepspeed.initialize(model=model, config=cfg)",
    "model = self.accelerator.prepare(model)",
    "model = shard_model(model, mesh)",
    "model = apply_fsdp2(model)",
]


@pytest.mark.parametrize("wrap", WRAPS)
def test_every_wrapper_kind_is_a_wrap(wrap):
    body = (
        "model = self.model_kit.build_model(self.config.model.path)\n"
        f"{wrap}\n"
        "if self.config.model.compile.enabled:\n"
        "    model = self.model_kit.apply_model_compile(model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
        "return model\n"
    )
    recipe = _ledger(body)
    kinds = [e.kind for e in recipe.ledger[0].events]
    assert kinds[:3] == ["build", "wrap", "compile"], kinds
    assert "MC408" in {f.rule for f in recipe.findings}  # a kit call after any wrapper


def test_unshard_and_regex_compile_are_not_steps():
    body = (
        "model = self.model_kit.build_model(self.config.model.path)\n"
        "pattern = re.compile('x')\n"
        "model.unshard()\n"
        "return model\n"
    )
    kinds = [e.kind for e in _ledger(body).ledger[0].events]
    assert kinds == ["build", "return"]


def test_with_try_while_and_decorated_disable():
    body = (
        "model = self.model_kit.build_model(self.config.model.path)\n"
        "with torch.no_grad():\n"
        "    model = self.model_kit.apply_freeze_policy(model, freeze_vit=True)\n"
        "try:\n"
        "    model.gradient_checkpointing_enable()\n"
        "except AttributeError:\n"
        "    pass\n"
        "@torch.compiler.disable\n"
        "def rope(x):\n"
        "    return x\n"
        "if self.config.model.compile.enabled:\n"
        "    model = self.model_kit.apply_model_compile(model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
        "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    )
    recipe = _ledger(body)
    kinds = [e.kind for e in recipe.ledger[0].events]
    assert kinds == ["build", "freeze", "checkpointing", "graph_break", "compile", "wrap", "return"]
    assert "MC102" in {f.rule for f in recipe.findings}


def test_model_reassigned_from_wrapper_keeps_identity():
    body = (
        "model = self.model_kit.build_model(self.config.model.path)\n"
        "wrapped = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
        "if self.config.model.compile.enabled:\n"
        "    # model-compile: post-wrap - the wrapper must own the module first\n"
        "    wrapped.module.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
        "return wrapped\n"
    )
    recipe = _ledger(body)
    ledger = recipe.ledger[0]
    compile_event = next(e for e in ledger.events if e.kind == "compile")
    assert compile_event.model_identity == ledger.returned_identity
    assert recipe.compile_path == "fallback:post-wrap"
    assert not [f for f in recipe.findings if f.severity == "error"]


def test_getattr_alias_and_comparison_gate():
    body = (
        "model = self.model_kit.build_model(self.config.model.path)\n"
        "compile_cfg = getattr(self.config.model, 'compile')\n"
        "if compile_cfg.enabled is True:\n"
        "    model = self.model_kit.apply_model_compile(model, backend=compile_cfg.backend, mode=compile_cfg.mode)\n"
        "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    )
    recipe = _ledger(body)
    assert "MC204" not in {f.rule for f in recipe.findings}


def test_depth_limit_is_noted():
    body = "model = self.model_kit.build_model(self.config.model.path)\nreturn self.a(model)\n"
    init = ""
    engine_extra = (
        "".join(
            f"    def {a}(self, model):\n        return self.{b}(model)\n\n"
            for a, b in zip("abcde", "bcdef", strict=True)
        )
        + "    def f(self, model):\n        return parallelize_model(model)\n"
    )
    files = example_files(Example(body=body, init=init))
    key = "recipes/example/engine/example_engine.py"
    files[key] = files[key] + "\n" + engine_extra
    ledger = analyze_tree(MemoryTree(files)).recipes[0].ledger[0]
    assert any("depth limit" in n for n in ledger.notes)


def test_multiline_doc_comment_and_readme_kind_priority():
    body = (
        "model = self.model_kit.build_model(self.config.model.path)\n"
        "if self.config.model.compile.enabled:\n"
        "    # model-compile: regional - the repeated blocks are the hot path; compiling\n"
        "    # them one by one avoids the data-dependent code around them, which\n"
        "    # otherwise breaks graphs on every image size.\n"
        "    for layer in model.model.language_model.layers:\n"
        "        layer.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
        "    for block in model.model.visual.blocks:\n"
        "        block.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
        "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    )
    readme = "# r\n\n## Compile\n\nRegional compile: the code between blocks has graph breaks on every image size.\n"
    files = example_files(Example(body=body, readme=readme))
    recipe = analyze_tree(MemoryTree(files)).recipes[0]
    assert recipe.compile_path == "fallback:regional"
    assert not [f for f in recipe.findings if f.severity != "info"]
    # Without the README the comment still covers both loops: its own lines do not
    # count towards the three lines above the code.
    recipe = analyze_tree(MemoryTree(example_files(Example(body=body)))).recipes[0]
    assert recipe.compile_path == "fallback:regional"
    assert "MC101" not in {f.rule for f in recipe.findings}
    # Four code lines away, it no longer does.
    far = body.replace("    for layer in", "    x = 1\n    y = 2\n    z = 3\n    w = 4\n    for layer in")
    recipe = analyze_tree(MemoryTree(example_files(Example(body=far)))).recipes[0]
    assert "MC101" in {f.rule for f in recipe.findings}


def test_requires_grad_target_is_the_receiver():
    body = (
        "model = self.model_kit.build_model(self.config.model.path)\n"
        "model.model.visual.requires_grad_(False)\n"
        "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    )
    freeze = next(e for e in _ledger(body).ledger[0].events if e.kind == "freeze")
    assert freeze.target == "model.model.visual"


@pytest.mark.parametrize(
    "src,per_block",
    [
        ("for block in model.layers:\n    fully_shard(block)\nfully_shard(model)\n", True),
        ("while blocks:\n    torch.distributed.fsdp.fully_shard(blocks.pop())\n", True),
        ("for block in fully_shard(model).layers:\n    pass\n", True),  # the loop's iterable runs in the loop statement
        ("for b in bs:\n    def wrap(m):\n        return fully_shard(m)\n", True),
        ("fully_shard(model)\n", False),  # near miss: once, outside any loop
        ("shards = [fully_shard(b) for b in model.layers]\n", False),  # a comprehension is not a loop statement
        ("for b in bs:\n    fully_shard_all(b)\n", False),  # another name
    ],
)
def test_wrapper_shards_per_block_only_when_fully_shard_runs_in_a_loop(src: str, per_block: bool) -> None:
    from model_compile.ledger.repo import repo_facts

    facts = repo_facts(MemoryTree({"engine/parallelize.py": src, "engine/unrelated.py": "x = 1\n"}))
    assert bool(facts.per_block_wrappers) is per_block


def test_events_pickle_and_validate_as_the_contract_says():
    """Events and branches are slotted dataclasses that pickle as their fields in order (forked workers
    send them): every field survives a round trip, and a Ledger validates them from JSON as models."""
    import dataclasses
    import pickle

    from model_compile.ledger.models import Branch, Event, Ledger

    values = {
        "kind": "compile",
        "file": "recipes/r/engine/e.py",
        "line": 7,
        "call": "model.compile(backend=b)",
        "condition": ["cfg.model.compile.enabled"],
        "target": "each of model.layers",
        "via": ["self.helper(model)"],
        "anchor_line": 6,
        "reachable": False,
        "kit": True,
        "compile_style": "inplace",
        "arguments": {"backend": "cfg.model.compile.backend"},
        "branches": [Branch(node="recipes/r/engine/e.py:5", arm="loop")],
        "model_identity": 3,
        "replaces_model": True,
        "kept_as": "self.teacher_model",
    }
    assert [f.name for f in dataclasses.fields(Event)] == list(values)  # a new field: add it above and to __reduce__
    event = Event(**values)
    for field in dataclasses.fields(Event):  # every value differs from its default, so none can be dropped unseen
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        assert getattr(event, field.name) != default, field.name
    assert pickle.loads(pickle.dumps(event)) == event
    assert pickle.loads(pickle.dumps(event.branches[0])) == event.branches[0]
    ledger = Ledger(engine_class="E", file="e.py", line=1, events=[event])
    again = Ledger.model_validate_json(ledger.model_dump_json())
    assert again == ledger and isinstance(again.events[0], Event) and isinstance(again.events[0].branches[0], Branch)
    with pytest.raises(ValueError):
        Ledger.model_validate({**ledger.model_dump(), "events": [{**values, "kind": "compiled"}]})


PER_BLOCK = (
    "model = self.model_kit.build_model(self.config.model.path)\n"
    "if self.config.model.compile.enabled:\n"
    "    # model-compile: regional - attention and MLP of each block compile inside the gradient checkpoint\n"
    "    for layer in model.model.language_model.layers:\n"
    "        layer.self_attn.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
    "        layer.mlp.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
    "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    "return model\n"
)


def test_hand_written_per_block_submodule_compile_reads_as_those_modules_of_each_block():
    """`for layer in X: layer.self_attn.compile()` compiles `X.*.self_attn` (not `X.self_attn.*`, a false
    target no module matches at run time)."""
    rec = _ledger(PER_BLOCK)
    assert rec.compile_path == "fallback:regional"
    assert rec.compiled_target == [
        "model.model.language_model.layers.*.self_attn",
        "model.model.language_model.layers.*.mlp",
    ]
    assert rec.scope.patterns == ["model.language_model.layers.*.self_attn", "model.language_model.layers.*.mlp"]
    assert not rec.errors


def test_whole_block_loop_keeps_each_of_the_container():
    rec = _ledger(
        PER_BLOCK.replace("layer.self_attn.compile", "layer.compile").replace(
            "        layer.mlp.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n",
            "",
        )
    )
    assert rec.compiled_target == ["each of model.model.language_model.layers"]
    assert rec.scope.patterns == ["model.language_model.layers.*"]
