"""The import closure (parse/imports.py) on trees held in memory: what a file's run imports, read statically."""

from __future__ import annotations

from model_compile.discover.tree import MemoryTree
from model_compile.parse.imports import ImportGraph, chain, module_facts
from model_compile.review.scope import code_changed, recipe_roots

LAZY_INIT = '''"""A package that exports lazily (PEP 562)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .loss import Loss
    from .metrics import Meter

_EXPORTS = {"Loss": ".loss", "Meter": ".metrics", "Tool": ".tools"}


def __getattr__(name):
    from importlib import import_module

    return getattr(import_module(_EXPORTS[name], __name__), name)
'''

FILES = {
    "lib/__init__.py": LAZY_INIT,
    "lib/loss.py": (
        "import torch\n\nfrom .ops.chunk import split\n\n\nclass Loss:\n    def __call__(self, x):\n"
        "        from .lazyfn import helper  # a lazy import: runs when the loss does\n\n"
        "        return helper(split(x))\n"
    ),
    "lib/lazyfn.py": "def helper(x):\n    return x\n",
    "lib/ops/__init__.py": "",
    "lib/ops/chunk.py": "from lib.cycle_a import a\n\n\ndef split(x):\n    return a(x)\n",
    "lib/cycle_a.py": "from lib import cycle_b\n\n\ndef a(x):\n    return cycle_b.b(x)\n",
    "lib/cycle_b.py": "from lib.cycle_a import a\n\n\ndef b(x):\n    return x\n",
    "lib/metrics.py": "class Meter:\n    pass\n",
    "lib/tools.py": "class Tool:\n    pass\n",
    "lib/types_only.py": "class T:\n    pass\n",
    "lib/unused.py": "def nobody():\n    return 0\n",
    "lib/by_name.py": "def f():\n    return 1\n",
    "recipes/__init__.py": "",
    "recipes/r/engine/__init__.py": "",
    "recipes/r/engine/r_engine.py": (
        "from typing import TYPE_CHECKING\n\n"
        "import numpy\n\n"
        "from lib import Loss\n"
        "from ..model import build\n\n"
        "if TYPE_CHECKING:\n    from lib.types_only import T\n\n\n"
        "class REngine:\n    def prepare_model(self):\n"
        "        import importlib\n\n"
        '        importlib.import_module("lib.by_name")\n'
        "        return build()\n"
    ),
    "recipes/r/model/__init__.py": "def build():\n    return None\n",
    "recipes/r/configs/schema.py": "from pydantic import BaseModel\n\n\nclass RConfig(BaseModel):\n    pass\n",
    "recipes/r/tests/test_r.py": "import lib.unused\n",
}


def _closure(files: dict[str, str] = FILES, recipe: str = "r") -> dict[str, str | None]:
    graph = ImportGraph(MemoryTree(files))
    return graph.closure(recipe_roots(graph, recipe))


def test_the_closure_follows_what_the_run_imports_and_nothing_else():
    reached = _closure()
    for path in (
        "lib/__init__.py",  # the package of `from lib import Loss`
        "lib/loss.py",  # Loss, a lazy export named under TYPE_CHECKING and in the export map
        "lib/ops/__init__.py",  # a package __init__ a relative import runs
        "lib/ops/chunk.py",  # relative import
        "lib/lazyfn.py",  # an import inside a function
        "lib/cycle_a.py",  # absolute import; a and b import each other
        "lib/cycle_b.py",  # `from lib import cycle_b`: a submodule named in a from-import
        "lib/by_name.py",  # importlib.import_module("lib.by_name")
        "recipes/__init__.py",  # the package of the engine module
        "recipes/r/model/__init__.py",  # `from ..model import build`
    ):
        assert path in reached, path
    assert "lib/unused.py" not in reached  # no recipe imports it (its tests do: tests are not the run)
    assert "lib/types_only.py" not in reached  # under TYPE_CHECKING in a module without __getattr__: never runs
    assert "lib/metrics.py" not in reached and "lib/tools.py" not in reached  # lazy exports the recipe never asks for
    assert not any(p.startswith(("numpy", "torch", "importlib")) for p in reached)  # outside the tree: not followed
    assert "recipes/r/tests/test_r.py" not in reached


def test_each_file_has_its_import_path_from_the_recipe():
    reached = _closure()
    assert chain(reached, "lib/loss.py") == ["recipes/r/engine/r_engine.py", "lib/__init__.py", "lib/loss.py"]
    assert chain(reached, "lib/cycle_b.py") == [
        "recipes/r/engine/r_engine.py",
        "lib/__init__.py",
        "lib/loss.py",
        "lib/ops/chunk.py",
        "lib/cycle_a.py",
        "lib/cycle_b.py",
    ]
    assert chain(reached, "recipes/r/configs/schema.py") == ["recipes/r/configs/schema.py"]  # a root


def test_a_module_imported_whole_follows_the_lazy_exports_it_reads():
    files = dict(FILES)
    files["recipes/r/engine/r_engine.py"] = "import lib as L\n\n\ndef make():\n    return L.Meter()\n"
    reached = _closure(files)
    assert "lib/metrics.py" in reached and "lib/loss.py" not in reached
    files["recipes/r/engine/r_engine.py"] = "import lib\n\n\ndef make(name):\n    return getattr(lib, name)\n"
    reached = _closure(files)  # used other than by attribute: any export may be read
    assert {"lib/metrics.py", "lib/loss.py", "lib/tools.py"} <= set(reached)


def test_a_src_layout_and_a_file_that_does_not_parse():
    files = {
        "src/pkg/__init__.py": "",
        "src/pkg/core.py": "def f(:\n",  # broken
        "recipes/r/engine/e.py": "from pkg.core import f\n",
    }
    graph = ImportGraph(MemoryTree(files))
    reached = graph.closure(recipe_roots(graph, "r"))
    assert {"src/pkg/__init__.py", "src/pkg/core.py"} <= set(reached)
    assert "does not parse" in graph.problems["src/pkg/core.py"]


def test_literal_import_module_relative_to_the_module():
    facts = module_facts("pkg/__init__.py", b'import importlib\nimportlib.import_module(".sub", __name__)\n')
    assert [(s.module, s.level) for s in facts.imports][-1] == ("sub", 1)
    facts = module_facts("pkg/mod.py", b'from importlib import import_module\nimport_module(".sub", __name__)\n')
    assert [(s.module, s.level) for s in facts.imports][-1] == ("mod.sub", 1)  # relative to the module itself
    facts = module_facts("pkg/mod.py", b"from importlib import import_module\nimport_module(name)\n")
    assert [s.module for s in facts.imports] == ["importlib"]  # a name known only at run time: not followed


def test_comments_blank_lines_and_docstrings_are_no_code_change():
    old = b'"""Module."""\n\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n'
    assert not code_changed(old, b'"""Module, reworded."""\n\n\ndef f(x):\n    """Other doc."""\n\n    return x + 1\n')
    assert not code_changed(old, old.replace(b"# one", b"# two"))
    assert code_changed(old, old.replace(b"x + 1", b"x + 2"))
    assert code_changed(old, old.replace(b"return x + 1", b'"no docstring here"\n    return x + 1'))
    assert code_changed(old, b"def f(:\n")  # does not parse: not known to be neutral
    assert code_changed(None, old)


def test_an_import_under_an_if_is_said_as_one_innermost_test_first() -> None:
    from model_compile.parse.imports import conditions

    tree = MemoryTree(
        {
            "pkg/__init__.py": "",
            "pkg/parallelize.py": (
                "def parallelize(model, role, sharded):\n"
                "    if sharded:\n"
                "        if role.active:\n"
                "            from pkg.cp import wrap\n\n"
                "            return wrap(model)\n"
                "    return model\n"
            ),
            "pkg/cp.py": "def wrap(model):\n    return model\n",
            "pkg/lazy.py": "def __getattr__(name):\n    if name == 'Thing':\n        from pkg.thing import Thing\n\n"
            "        return Thing\n    raise AttributeError(name)\n",
            "pkg/thing.py": "class Thing:\n    pass\n",
            "recipes/r/engine/r_engine.py": "from pkg.parallelize import parallelize\nfrom pkg.lazy import Thing\n",
        }
    )
    graph = ImportGraph(tree)
    closure = graph.closure(["recipes/r/engine/r_engine.py"])
    via = chain(closure, "pkg/cp.py")
    assert via == ["recipes/r/engine/r_engine.py", "pkg/parallelize.py", "pkg/cp.py"]
    assert conditions(graph, via) == ["pkg/parallelize.py: if role.active (line 3), inside if sharded (line 2)"]
    # a module's __getattr__ tests the name asked for: an import of that name runs it, no condition
    assert "pkg/thing.py" in closure and conditions(graph, chain(closure, "pkg/thing.py")) == []
