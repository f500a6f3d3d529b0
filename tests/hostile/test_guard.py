"""Input that would crash or exhaust the CST editor is refused before it is parsed;
the CLI's error handler never raises."""

from __future__ import annotations

import ast

import pytest
from hostile_helpers import ENGINE, RECIPE, assert_one_line_error, cli, cli_subprocess, scaffold_repo, tree_state

from model_compile.generate.planning.guard import MAX_DEPTH, max_depth
from model_compile.rules.base import Example
from model_compile.rules.scaffold import engine_text

PLAIN_BODY = """\
model = self.model_kit.build_model(self.config.model.path).to(self.device)
{extra}
return parallelize_model(model, parallel_mesh=self.parallel_mesh)
"""

HOSTILE = {
    "2000 nested parentheses": "x = " + "(" * 2000 + "1" + ")" * 2000,
    "1500-branch elif chain": "if model is None:\n    y = 0\n"
    + "".join(f"elif model == {i}:\n    y = {i}\n" for i in range(1, 1500)),
    "3000-long attribute chain": "z = model" + ".a" * 3000,
    "1000-term sum": "s = " + " + ".join(f"v{i}" for i in range(1000)),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_deep_input_is_refused_in_one_line(tmp_path, name):
    root = scaffold_repo(tmp_path / "repo", Example(body=PLAIN_BODY.format(extra=HOSTILE[name])))
    before = tree_state(root)
    proc = cli_subprocess("generate", str(root / RECIPE), "--write", timeout=120)  # a crash must not take pytest down
    assert_one_line_error(proc.returncode, proc.stderr, ENGINE)
    assert tree_state(root) == before
    # the static review of the same file reports it (or analyses it), never crashes
    proc = cli_subprocess("validate", str(root), "--format", "json", timeout=120)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-500:]


def test_nesting_at_the_limit_is_still_edited(tmp_path):
    """The limit is not over-cautious: the deepest accepted engine is edited and reviewed."""
    extra = ""
    for n in range(1, 200):
        text = engine_text(PLAIN_BODY.format(extra="x = " + "[" * n + "1" + "]" * n))
        if max_depth(ast.parse(text)).level > MAX_DEPTH:
            break
        extra = "x = " + "[" * n + "1" + "]" * n
    root = scaffold_repo(tmp_path / "repo", Example(body=PLAIN_BODY.format(extra=extra)))
    assert max_depth(ast.parse((root / ENGINE).read_text())).level == MAX_DEPTH
    code, out, err = cli("generate", str(root / RECIPE), "--write")
    assert code == 0, err
    assert "apply_model_compile" in (root / ENGINE).read_text()


def test_engine_over_the_size_cap_is_refused(tmp_path):
    root = scaffold_repo(tmp_path / "repo", Example(body=PLAIN_BODY.format(extra="pass")), use_git=False)
    (root / "pyproject.toml").write_text("[tool.model-compile]\nmax-file-bytes = 500\n")
    before = tree_state(root)
    code, out, err = cli("generate", str(root / RECIPE), "--write")
    assert_one_line_error(code, err, "file too large, skipped")
    assert tree_state(root) == before


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RecursionError("maximum recursion depth exceeded while calling a Python object")


def test_internal_error_handler_never_raises(monkeypatch):
    from model_compile import analyze

    def boom(*args, **kwargs):
        raise _Unprintable()

    monkeypatch.setattr(analyze, "analyze_path", boom)
    code, out, err = cli("validate", ".")
    assert code == 2 and err.count("\n") == 1
    assert "internal error: _Unprintable (its message could not be formatted)" in err

    def deep(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(analyze, "analyze_path", deep)
    code, out, err = cli("validate", ".")
    assert_one_line_error(code, err, "nested too deeply")
