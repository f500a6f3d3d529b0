"""Fixture repos for `model-compile generate`: a toy kit repo copied into tmp_path."""

from __future__ import annotations

import ast
import io
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import git

FIXTURES = Path(__file__).parent / "fixtures"
ENGINE_REL = "recipes/toy_vlm/engine/toy_vlm_engine.py"
RECIPE_REL = "recipes/toy_vlm"
REASON = "vision tower has data dependent shapes"


SITE_PACKAGES = ".venv/lib/python3.11/site-packages"


def make_repo(tmp_path: Path, engine: str = "none_assign", *, use_git: bool = True, env: bool = True) -> Path:
    """The toy repository with `engine` as its recipe's engine; `env`: with the stand-in transformers of
    fixtures/site_packages in its `.venv` (generate reads the model's module tree there)."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "toy_repo", root)
    if env:
        shutil.copytree(FIXTURES / "site_packages" / "transformers", root / SITE_PACKAGES / "transformers")
    src = FIXTURES / "engines" / (engine if "." in engine else f"{engine}.py")
    (root / ENGINE_REL).parent.mkdir(parents=True, exist_ok=True)  # git keeps no empty engine/ folder
    (root / ENGINE_REL).write_text(src.read_text())
    if use_git:
        repo = git.Repo.init(root)
        with repo.config_writer() as cw:
            cw.set_value("user", "name", "t")
            cw.set_value("user", "email", "t@example.com")
        repo.git.add(A=True)
        repo.index.commit("fixture")
    return root


def checkpointing_off(root: Path) -> Path:
    """Gradient checkpointing off in every stage of the toy recipe (the blocks are not checkpointed: a whole block
    is the target), committed where the repository is a git one."""
    for stage in (root / RECIPE_REL / "configs").glob("*.yaml"):
        text = stage.read_text()
        if "gradient_checkpointing:" in text:
            text = text.replace("    enabled: true\n    use_reentrant", "    enabled: false\n    use_reentrant")
        else:
            text = text.replace(
                "    freeze_vit: false\n", "    freeze_vit: false\n    gradient_checkpointing: {enabled: false}\n"
            )
        stage.write_text(text)
    if (root / ".git").exists():
        repo = git.Repo(root)
        repo.git.add(A=True)
        repo.index.commit("checkpointing off")
    return root


def run_generate(*argv: str) -> tuple[int, str, str]:
    """Run the generate subcommand as the CLI does (one-line errors, exit 2)."""
    from model_compile import cli
    from model_compile.commands import generate
    from model_compile.errors import InputError

    parser = cli._Parser(prog="model-compile")
    sub = parser.add_subparsers(dest="command", parser_class=cli._Parser)
    generate.add_parser(sub, "generate", "generate")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            args = parser.parse_args(["generate", *argv])
            code = generate.run(args)
        except InputError as exc:
            err.write(f"model-compile: error: {exc}\n")
            code = 2
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def snapshot(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts
    }


def _calls(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            out.append(ast.unparse(n.func))
    return out


def _is_compile(name: str) -> bool:
    return name.endswith("apply_model_compile") or name == "torch.compile" or name.endswith(".compile")


def prepare_model_steps(source: str) -> list[tuple[str, ast.stmt]]:
    """Top-level statements of prepare_model() labelled compile/wrap/freeze/ckpt/build/other."""
    tree = ast.parse(source)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "prepare_model")
    out = []
    for stmt in fn.body:
        names = _calls(stmt)
        if any(_is_compile(n) for n in names):
            label = "compile"
        elif any("parallelize_model" in n for n in names):
            label = "wrap"
        elif any("freeze" in n for n in names):
            label = "freeze"
        elif any("checkpointing" in n for n in names):
            label = "ckpt"
        elif any("build" in n for n in names):
            label = "build"
        else:
            label = "other"
        out.append((label, stmt))
    return out


def assert_one_gated_block(source: str, *, post_wrap: bool = False) -> ast.If:
    steps = prepare_model_steps(source)
    labels = [label for label, _ in steps]
    assert labels.count("compile") == 1, labels
    i = labels.index("compile")
    wrap = labels.index("wrap")
    if post_wrap:
        assert i == wrap + 1, labels
    else:
        assert i == wrap - 1, labels
        for earlier in ("build", "freeze", "ckpt"):
            if earlier in labels:
                assert labels.index(earlier) < i, labels
    block = steps[i][1]
    assert isinstance(block, ast.If) and ast.unparse(block.test) == "self.config.model.compile.enabled"
    text = ast.unparse(block)
    assert "self.config.model.compile.backend" in text and "self.config.model.compile.mode" in text
    assert "torch.compile(" not in text
    # nothing compile-like left anywhere else in the file's prepare_model
    return block
