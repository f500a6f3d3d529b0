"""The rule catalogue, in id order."""

from __future__ import annotations

from model_compile.rules.base import Rule
from model_compile.rules.config_intent import DeadCompileSwitch, EnabledWithoutIntent
from model_compile.rules.config_schema import (
    ModelConfigForwardedWhole,
    OlderFlatCompileConfig,
    SchemaLacksCompile,
    UntypedCompileChoice,
)
from model_compile.rules.config_values import CudaGraphModeUnsuited, InvalidCompileValue
from model_compile.rules.config_wiring import ConfigNotWired, HardCodedCompileOption
from model_compile.rules.finding import SEVERITY_ORDER, Finding
from model_compile.rules.path import (
    CompileOutsideKit,
    FallbackKindMismatch,
    TorchCompileWrapper,
    UndocumentedGraphBreak,
)
from model_compile.rules.placement import (
    CheckpointingAfterCompile,
    CompiledObjectNotReturned,
    FreezeAfterCompile,
    PatchAfterCompile,
    TwoCompilePaths,
    UnreachableCompile,
)
from model_compile.rules.recipe_tests import TestOverrideRejected
from model_compile.rules.structure import FileDoesNotParse, NoCompileSupport, SuppressionWithoutReason
from model_compile.rules.wrapping import CompileAfterWrap, KitCompileAfterWrap, WholeModelBeforeBlockSharding

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
        DeadCompileSwitch,
        ConfigNotWired,
        UntypedCompileChoice,
        OlderFlatCompileConfig,
        HardCodedCompileOption,
        CudaGraphModeUnsuited,
        ModelConfigForwardedWhole,
        CompiledObjectNotReturned,
        PatchAfterCompile,
        FreezeAfterCompile,
        CheckpointingAfterCompile,
        CompileAfterWrap,
        UnreachableCompile,
        TwoCompilePaths,
        WholeModelBeforeBlockSharding,
        KitCompileAfterWrap,
        SuppressionWithoutReason,
        TestOverrideRejected,
    ],
    key=lambda r: r.id,
)

RULES_BY_ID = {r.id: r for r in ALL_RULES}
SuppressionWithoutReason.known_ids = frozenset(RULES_BY_ID)
_LEADS = frozenset(r.id for r in ALL_RULES if r.leads)


def finding_order(f: Finding) -> tuple[int, int, str, int, str]:
    """The order a recipe's findings are listed in: most severe first; among equals, those that state what a stage
    will do (a rule with `leads`: compile that does nothing on the hot path, a test that cannot pass) first."""
    return (SEVERITY_ORDER[f.severity], 0 if f.rule in _LEADS else 1, f.file, f.line, f.rule)


def matching(pattern: str) -> list[str]:
    """Rule ids a `select`/`ignore` entry names: an id or a prefix (`MC4`, `MC`)."""
    pattern = pattern.strip().upper()
    return [r.id for r in ALL_RULES if r.id.startswith(pattern)] if pattern else []
