"""What code a compiled module runs, read statically: calls, `module.f`, methods, closures, registries keyed by
the stage's attn_implementation, and a patch of a module attribute followed to its replacement (fixtures here)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from model_compile.ledger.callgraph import Finder, module_patches, walk
from model_compile.ledger.hazards import inside, scan
from model_compile.parse.model_source import Resolver

FILES = {
    "pkg/__init__.py": "",
    "pkg/attn_utils.py": """
        def unpad(mask):
            return mask.sum()

        def flash_forward(q, mask):
            return unpad(mask) + q
    """,
    "pkg/sdpa.py": """
        def sdpa_forward(q, mask):
            return q
    """,
    "pkg/registry.py": """
        from .attn_utils import flash_forward
        from .sdpa import sdpa_forward

        class Interface:
            _mapping = {"flash": flash_forward, "sdpa": sdpa_forward}

        FUNCTIONS = Interface()
    """,
    "pkg/model.py": """
        from torch import nn

        from .registry import FUNCTIONS

        class Attention(nn.Module):
            def forward(self, q, mask):
                fn = FUNCTIONS[self.impl]
                return self.scale(fn(q, mask))

            def scale(self, x):
                return x * 2
    """,
    "pkg/patch.py": """
        from pkg import attn_utils

        def apply_patch():
            def _count(mask):
                return mask.sum()

            def _unpad(mask):
                n = int(mask.max().item())
                out = _count(mask)
                for i in range(n):
                    out += i
                return out

            attn_utils.unpad = _unpad
    """,
}


def _repo(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    return tmp_path


def _start(finder: Finder, root: Path):
    return finder.method(root / "pkg/model.py", "Attention", "forward")


def test_the_registry_entry_of_the_stage_and_the_patch_it_reaches(tmp_path):
    root = _repo(tmp_path)
    finder = Finder(Resolver(root, None))
    patch = finder.function(root / "pkg/patch.py", "apply_patch")
    assert patch is not None
    fn = next(f for f in [finder.method(root / "pkg/model.py", "Attention", "forward")] if f)
    from model_compile.ledger.callgraph import _top

    patched = module_patches(finder, _top(*patch))
    assert [(p.name, n) for p, n in patched] == [("attn_utils.py", "unpad")]
    flash = walk(finder, [fn], patched, "flash")
    names = {f.name for f in flash.reached}
    assert {"Attention.forward", "Attention.scale", "flash_forward", "_unpad", "_count"} <= names
    assert "sdpa_forward" not in names and "unpad" not in names  # the stage's entry; the patched attribute replaced
    assert list(flash.patches.values()) == ["attn_utils.unpad"]
    sdpa = walk(finder, [fn], patched, "sdpa")
    assert "sdpa_forward" in {f.name for f in sdpa.reached} and not sdpa.patches


def test_hazards_are_read_with_their_lines(tmp_path):
    root = _repo(tmp_path)
    finder = Finder(Resolver(root, None))
    patch = finder.function(root / "pkg/patch.py", "apply_patch")
    from model_compile.ledger.callgraph import _top

    ins = inside(finder, root, {"attn": [_start(finder, root)]}, [("apply_patch", _top(*patch))], "flash")
    assert [p.replaces for p in ins.patched] == ["attn_utils.unpad"]
    shown = [str(h) for h in ins.hazards]
    assert any(h.startswith("pkg/patch.py:9 `.item()`") for h in shown)
    assert any(h.startswith("pkg/patch.py:11 a Python loop over a count read from a tensor") for h in shown)
    assert scan(_start(finder, root), "pkg/model.py") == []  # a clean forward
