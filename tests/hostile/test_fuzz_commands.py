"""Property-based fuzzing of the static commands (hypothesis).

Random `prepare_model` bodies (real steps, compile variants, nesting, syntax
errors, deep expressions) in random file kinds (CRLF, BOM, Latin-1, binary,
empty, FIFO, links to /dev/zero or outside, folders, over the size cap,
read-only), plus a random sibling module and stage YAML, go through
`inspect`, `validate`, `diff`, `generate` (dry run) and `generate --write`
on a copy of a committed repository. For every run:

- the exit code is 0, 1 or 2; 2 is one line on stderr; never a traceback or
  an internal error; 0/1 print valid JSON;
- the dry run and every refused write leave the tree byte-identical (modes
  included), with no temp or backup file;
- a write that went through is idempotent: the rerun changes nothing.

CI runs the derandomized `ci` profile (a few seconds);
`MODEL_COMPILE_FUZZ_PROFILE=thorough` runs many more cases.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from functools import lru_cache
from pathlib import Path

from hostile_helpers import ENGINE, RECIPE, cli, commit_all, leftovers, time_limit, tree_state, write_files
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from model_compile.rules.base import Example
from model_compile.rules.scaffold import SCHEMA, STAGE, engine_text, example_files

settings.register_profile(
    "ci",
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile(os.environ.get("MODEL_COMPILE_FUZZ_PROFILE", "ci"))
MAX_FILE_BYTES = 60_000  # the fuzzed repo's cap: "huge" files exceed it without costing time

STEPS = [
    "model = self.model_kit.build_model(self.config.model.path).to(self.device)",
    "model = self.model_kit.apply_model_patches(model, [patch_attention])",
    "model = self.model_kit.apply_freeze_policy(model, freeze_vit=self.config.model.freeze_vit)",
    "if self.config.model.gradient_checkpointing.enabled:\n    model = self.model_kit.apply_gradient_checkpointing(model)",
    "if self.config.model.compile.enabled:\n    model = self.model_kit.apply_model_compile(\n"
    "        model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode\n    )",
    "model = torch.compile(model)",
    "model.compile()",
    "model.visual = torch.compile(model.visual)",
    "model.language_model.compile(backend='inductor', mode='max-autotune')",
    "for block in model.layers:\n    block.compile()",
    "model.visual = torch.compiler.disable(model.visual)",
    "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)",
    "return model",
    "return parallelize_model(model, parallel_mesh=self.parallel_mesh)",
    "wrapped = model\nmodel = wrapped",
    "if not self.config.model.compile.enabled:\n    model.compile()",
    "try:\n    model = model.half()\nexcept Exception:\n    pass",
    "with torch.no_grad():\n    model.eval()",
    "squash = lambda m: m.compile()",
    "def helper(m):\n    return m.compile()\nmodel = helper(model)",
    "model = self._compile(model)",
    "model = None",
    "yield model",
    "modèle = model  # non-ASCII identifier",
    "note = '''\n# model-compile: graph-break because\n'''",
    "# model-compile: regional - blocks are the hot path",
]
BROKEN = ["global model", "model = (", "if :", "return return", "\tmodel = 1", "await model", "x = 1 +"]
FILE_KINDS = [
    "text",
    "crlf",
    "bom",
    "latin1",
    "binary",
    "empty",
    "fifo",
    "devzero",
    "outside",
    "dangling",
    "folder",
    "huge",
    "readonly",
]
SIDE_KINDS = ["none", "fifo", "devzero", "binary", "bad_syntax", "huge", "crlf"]
NO_COMPILE_SCHEMA = SCHEMA.replace(
    "    compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)\n", ""
)
NO_COMPILE_STAGE = STAGE.split("  compile:")[0]


def deep_expression(kind: str, n: int) -> str:
    return {
        "parens": "x = " + "(" * n + "1" + ")" * n,
        "sum": "x = " + " + ".join(f"v{i}" for i in range(n)),
        "attr": "x = model" + ".a" * n,
        "elif": "if model is None:\n    y = 0\n" + "".join(f"elif model == {i}:\n    y = {i}\n" for i in range(n)),
    }[kind]


statements = st.one_of(  # mostly real steps: a body with one broken line is refused as a whole
    *[st.sampled_from(STEPS)] * 6,
    st.sampled_from(BROKEN),
    st.builds(deep_expression, st.sampled_from(["parens", "sum", "attr", "elif"]), st.integers(1, 250)),
)


@st.composite
def bodies(draw: st.DrawFn) -> str:
    lines = draw(st.lists(statements, min_size=0, max_size=8))
    body = "\n".join(lines) or "pass"
    if draw(st.booleans()) and lines:
        body = "if self.config.model.path:\n" + textwrap.indent(body, "    ") + "\nreturn model"
    return body


@lru_cache(maxsize=2)
def committed_template(with_compile: bool) -> Path:
    """A committed scaffold repository (the diff base), built once per session and copied per case."""
    root = Path(tempfile.mkdtemp(prefix="mc-fuzz-template-"))
    files = example_files(Example())
    if not with_compile:
        files[f"{RECIPE}/configs/schema.py"] = NO_COMPILE_SCHEMA
        files[f"{RECIPE}/configs/train.yaml"] = NO_COMPILE_STAGE
    files["pyproject.toml"] = f"[tool.model-compile]\nmax-file-bytes = {MAX_FILE_BYTES}\n"
    write_files(root, files)
    commit_all(root)
    return root


def place(path: Path, kind: str, text: str) -> None:
    """Put `text` at `path` as the given kind of file (replacing what is there)."""
    if path.is_symlink() or path.exists():
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode()
    if kind == "none":
        return
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    elif kind == "outside":
        path.symlink_to("/etc/hostname")
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere.py")
    elif kind == "folder":
        path.mkdir()
    else:
        data = {
            "crlf": data.replace(b"\n", b"\r\n"),
            "bom": b"\xef\xbb\xbf" + data,
            "latin1": b"# caf\xe9\n" + data,
            "binary": b"\x00\x01binary\x00" + data,
            "empty": b"",
            "huge": data + b"# padding\n" * (MAX_FILE_BYTES // 10 + 1),
            "bad_syntax": b"def broken(:\n",
        }.get(kind, data)
        path.write_bytes(data)
        if kind == "readonly":
            os.chmod(path, 0o444)


def check_contract(code: int, out: str, err: str, what: str) -> None:
    """0/1/2 only; 2 is one line; 0/1 print JSON; never a traceback or an internal error."""
    assert code in (0, 1, 2), f"{what}: exit {code}\n{err[-2000:]}"
    assert "Traceback" not in err and "internal error" not in err, f"{what}:\n{err[-2000:]}"
    if code == 2:
        assert err.startswith("model-compile: error:") and err.count("\n") == 1, f"{what}: {err[-2000:]}"
    else:
        json.loads(out)


STAGE_KINDS = ["text", "crlf", "fifo", "devzero", "binary", "huge", "bad_yaml"]


@st.composite
def kinds(draw: st.DrawFn) -> tuple[str, str, str]:
    """(engine, sibling, stage) file kinds: half the cases ordinary files, half hostile ones."""
    if draw(st.booleans()):
        return draw(st.sampled_from(["text", "crlf", "bom"])), "none", draw(st.sampled_from(["text", "crlf"]))
    return draw(st.sampled_from(FILE_KINDS)), draw(st.sampled_from(SIDE_KINDS)), draw(st.sampled_from(STAGE_KINDS))


@settings(PROFILE)
@given(body=bodies(), with_compile=st.booleans(), file_kinds=kinds())
def test_static_commands_hold_the_contract(body: str, with_compile: bool, file_kinds: tuple[str, str, str]) -> None:
    engine_kind, sibling_kind, stage_kind = file_kinds
    with tempfile.TemporaryDirectory(prefix="mc-fuzz-") as tmp, time_limit(120):
        root = Path(tmp) / "repo"
        shutil.copytree(committed_template(with_compile), root, symlinks=True)
        place(root / ENGINE, engine_kind, engine_text(body))
        place(root / RECIPE / "engine" / "sibling.py", sibling_kind, "def helper(m):\n    return m\n")
        stage = root / RECIPE / "configs" / "train.yaml"
        stage_text = "model: [unclosed\n" if stage_kind == "bad_yaml" else stage.read_text()
        place(stage, {"bad_yaml": "text"}.get(stage_kind, stage_kind), stage_text)
        recipe = str(root / RECIPE)

        for argv in (("inspect", str(root)), ("validate", str(root)), ("diff", str(root))):
            before = tree_state(root)
            check_contract(*cli(*argv, "--format", "json"), what=argv[0])
            assert tree_state(root) == before, f"{argv[0]} changed the tree"

        before = tree_state(root)
        code, out, err = cli("generate", recipe, "--format", "json")
        check_contract(code, out, err, "generate (dry run)")
        assert code in (0, 2) and tree_state(root) == before, "a dry run changed the tree"

        code, out, err = cli("generate", recipe, "--write", "--force", "--format", "json")
        check_contract(code, out, err, "generate --write")
        assert not leftovers(root), leftovers(root)
        event(
            f"generate --write: exit {code}"
            + (f" ({'changed' if json.loads(out)['changed'] else 'no-op'})" if code != 2 else "")
        )
        if code == 2:
            why = next(
                (w for w in ("cannot parse", "cannot be read", "nested", "not UTF-8", "binary") if w in err), "other"
            )
            event(f"generate --write refused: {why}")
            assert tree_state(root) == before, f"a refused write changed the tree: {err}"
            return
        written = tree_state(root)
        code, out, err = cli("generate", recipe, "--write", "--force", "--format", "json")
        check_contract(code, out, err, "generate --write (rerun)")
        assert code in (0, 1) and json.loads(out)["changed"] is False, "the rerun is not a no-op"
        assert tree_state(root) == written
