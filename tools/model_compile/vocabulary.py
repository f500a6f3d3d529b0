"""The words every stage shares, spelled out once.

* the `model.compile` contract: the allowed values of `backend` and `mode`
  (rules check them, generate types the schema with them, the recipe tests
  assert them);
* the compile paths a recipe can take (`kit`, `fallback:<kind>`, `direct`,
  `none`) and the documented kinds (`# model-compile: <kind> - <reason>`).

The tuples are derived from the `Literal` types, so a new kind is added in
one place and both the type checker and the runtime see it.
"""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

# How serious a finding is.
Severity = Literal["error", "warning", "info"]

BACKENDS = ("inductor", "aot_eager", "eager")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Modes that turn on CUDA graphs (torch._inductor.list_mode_options: triton.cudagraphs).
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")

# A recipe-local compile documented as one of these is a fallback path.
FallbackKind = Literal["submodule", "graph-break", "post-wrap", "regional"]
FALLBACK_KINDS: tuple[str, ...] = get_args(FallbackKind)

# What a `# model-compile: <kind>` note can document: a fallback, or an
# intentional `enabled: true` default.
DocKind = Literal["submodule", "graph-break", "post-wrap", "regional", "enabled"]
DOC_KINDS: tuple[str, ...] = get_args(DocKind)


def is_doc_kind(word: str) -> TypeGuard[DocKind]:
    """Is `word` one of DOC_KINDS?"""
    return word in DOC_KINDS


# How a recipe compiles, as reports name it.
CompilePath = Literal[
    "kit",
    "fallback:submodule",
    "fallback:graph-break",
    "fallback:post-wrap",
    "fallback:regional",
    "direct",
    "none",
]
COMPILE_PATHS: tuple[str, ...] = get_args(CompilePath)

# What `generate --path` accepts: the kit, or one fallback kind.
GeneratePath = Literal["kit", "submodule", "graph-break", "post-wrap", "regional"]
GENERATE_PATHS: tuple[str, ...] = get_args(GeneratePath)


def fallback_path(kind: str) -> str:
    """The compile path of a documented fallback kind: `regional` -> `fallback:regional`."""
    if kind not in FALLBACK_KINDS:
        raise ValueError(f"not a fallback kind: {kind!r}")
    return f"fallback:{kind}"


def path_kind(compile_path: str) -> str:
    """The kind of a compile path: `fallback:regional` -> `regional`, `kit` -> `kit`."""
    return compile_path.split(":", 1)[1] if compile_path.startswith("fallback:") else compile_path
