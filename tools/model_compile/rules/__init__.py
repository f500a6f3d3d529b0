"""The rule catalogue, in id order."""

from __future__ import annotations

from model_compile.rules.base import Rule
from model_compile.rules.config import (
    ConfigNotWired,
    EnabledWithoutIntent,
    InvalidCompileValue,
    SchemaLacksCompile,
    UntypedCompileChoice,
)
from model_compile.rules.path import (
    CompileOutsideKit,
    FallbackKindMismatch,
    TorchCompileWrapper,
    UndocumentedGraphBreak,
)
from model_compile.rules.placement import (
    CheckpointingAfterCompile,
    CompileAfterWrap,
    CompiledObjectNotReturned,
    FreezeAfterCompile,
    PatchAfterCompile,
    TwoCompilePaths,
    UnreachableCompile,
    WholeModelBeforeBlockSharding,
)
from model_compile.rules.structure import FileDoesNotParse, NoCompileSupport

ALL_RULES: list[type[Rule]] = sorted(
    [
        FileDoesNotParse,
        NoCompileSupport,
        CompileOutsideKit,
        UndocumentedGraphBreak,
        TorchCompileWrapper,
        FallbackKindMismatch,
        SchemaLacksCompile,
        InvalidCompileValue,
        EnabledWithoutIntent,
        ConfigNotWired,
        UntypedCompileChoice,
        CompiledObjectNotReturned,
        PatchAfterCompile,
        FreezeAfterCompile,
        CheckpointingAfterCompile,
        CompileAfterWrap,
        UnreachableCompile,
        TwoCompilePaths,
        WholeModelBeforeBlockSharding,
    ],
    key=lambda r: r.id,
)

RULES_BY_ID = {r.id: r for r in ALL_RULES}
