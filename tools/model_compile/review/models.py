"""The JSON contract of `model-compile diff` (pydantic, stable field names)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from model_compile.rules.finding import Finding

FileKind = Literal["engine", "schema", "config", "model", "docs", "tests", "other", "kit", "skill", "shared"]
FileChange = Literal["added", "modified", "deleted", "renamed"]
FileEntry = Literal["file", "symlink", "submodule"]
RecipeStatus = Literal["added", "deleted", "renamed", "modified", "kit", "imports"]


class Revision(BaseModel):
    rev: str = Field(description="the revision as given or chosen ('working tree' for uncommitted files)")
    commit: str | None = Field(default=None, description="full commit id; null for the working tree")
    tree: str | None = Field(
        default=None, description="the tree reviewed when it is no commit: the merge result of the branch (head)"
    )


class MergeView(BaseModel):
    """A branch reviewed as its merge into a target (the default branch, or --base) that moved on."""

    target: str = Field(description="the branch or revision the head is merged into, as named")
    target_commit: str
    merge_base: str
    ahead: int = Field(description="commits of the target since the merge base")
    clean: bool = Field(description="the merge has no conflict")
    conflicts: list[str] = Field(
        default_factory=list,
        description="conflicted paths (read as the branch has them: the review holds for a "
        "resolution that keeps the branch's side)",
    )
    both_sides: list[str] = Field(default_factory=list, description="recipes the target and the branch both changed")
    kinds: dict[str, str] = Field(
        default_factory=dict,
        description="each conflicted path's kind, as git names it (content, modify/delete, rename/delete, ...)",
    )
    target_changed: list[str] = Field(
        default_factory=list, description="the paths the target changed since the merge base (what the branch lacks)"
    )


class ChangedFile(BaseModel):
    path: str = Field(description="head-side path (base-side path for a deleted file)")
    old_path: str | None = Field(default=None, description="base-side path of a renamed file")
    change: FileChange
    kind: FileKind
    recipe: str | None = None
    old_recipe: str | None = Field(default=None, exclude=True)
    binary: bool = False
    entry: FileEntry = Field(
        default="file", description="what the path is on the head side (the base side when deleted)"
    )
    note: str | None = Field(
        default=None,
        description="why the content was not compared line by line (a submodule, an object missing from the clone)",
    )
    lines: list[int] = Field(default_factory=list, exclude=True, description="head-side changed lines")
    code_changed: bool | None = Field(
        default=None,
        description="Python files: false when only comments, blank lines or docstrings changed (the ASTs of both "
        "sides, docstrings removed, are equal); null for other files",
    )


class ImportedChange(BaseModel):
    """A changed Python file outside a recipe's folder that the recipe's run imports: why the recipe is in scope."""

    path: str = Field(description="head-side path (base-side for a deleted file)")
    old_path: str | None = Field(default=None, description="base-side path of a renamed file")
    change: FileChange
    via: list[str] = Field(
        description="the import path, repository-relative: the recipe's own file its run starts from (engine, "
        "model code, config module) first, this file last"
    )
    side: Literal["head", "base"] = Field(
        description="the side whose imports `via` is read on: base for a file the head no longer has"
    )
    code_changed: bool = Field(description="false: only comments, blank lines or docstrings changed")
    conditions: list[str] = Field(
        default_factory=list,
        description="the `if`s along `via` an import sits under (`importer: if <test> (line N)`): the file is "
        "imported only when they hold",
    )
    reason: str = Field(description="`<file> is imported by recipes/<name> through <via>`, in words")


class EventView(BaseModel):
    """One ledger event, as compared."""

    kind: str
    line: int
    call: str
    target: str | None = None
    condition: list[str] = Field(default_factory=list)
    file: str | None = None


class LedgerView(BaseModel):
    engine_class: str
    file: str
    events: list[EventView] = Field(default_factory=list)


class ValueChange(BaseModel):
    """One config value: where (schema default or a stage file), which field, before -> after."""

    where: str = Field(description="'schema' or the stage YAML path")
    field: str
    before: Any = None
    after: Any = None
    effect: str | None = Field(
        default=None,
        description="set when the change does nothing at run time, e.g. a schema default every stage YAML overrides",
    )


class Side(BaseModel):
    compile_path: str = "none"
    compiled_target: list[str] = Field(default_factory=list)
    scope: str = Field(default="", description="what compile covers, in module terms")
    placement: str = ""
    ledger: list[LedgerView] = Field(default_factory=list)


class RecipeDiff(BaseModel):
    name: str = Field(description="head-side name (base-side for a deleted recipe)")
    old_name: str | None = Field(default=None, description="base-side name of a renamed recipe")
    status: RecipeStatus = Field(
        description="'kit': untouched itself, affected by a change of the shared kit's compile; 'imports': untouched "
        "itself, its run imports a changed Python file (`imports` says which and through what)"
    )
    files: list[ChangedFile] = Field(default_factory=list)
    touches: list[str] = Field(default_factory=list, description="kinds of files changed, e.g. engine, config")
    before: Side | None = None
    after: Side | None = None
    ledger_changes: list[str] = Field(default_factory=list, description="compile added/removed/moved/... in words")
    both_sides: bool = Field(default=False, description="merge view: the target changed this recipe too")
    conflicts: list[str] = Field(default_factory=list, description="merge view: its files that conflict")
    config_changes: list[ValueChange] = Field(default_factory=list)
    imports: list[ImportedChange] = Field(
        default_factory=list, description="changed Python files outside its folder that its run imports"
    )
    changed_lines: dict[str, list[int]] = Field(
        default_factory=dict,
        description="every changed Python file its run imports (its own included) whose code changed: "
        "repository-relative path -> head-side changed line numbers, sorted (the rehearsal's `changed_lines` input; "
        "comment/docstring-only and deleted files are left out)",
    )
    code_changed: bool = Field(
        default=True,
        description="false when every file of the change that reaches it is a Python file whose change is comments, "
        "blank lines or docstrings only",
    )
    new: int = 0
    fixed: int = 0
    superseded: int = 0
    unchanged: int = 0


class DiffFinding(Finding):
    """A finding with where it sits relative to the change."""

    side: Literal["head", "base"] = Field(description="file and line are of this side (head, except for fixed)")
    on_changed_line: bool = Field(default=False, description="its head-side line was added or changed")
    near_change: bool = Field(
        default=False, description=f"within {3} lines of a changed line (e.g. a moved neighbour made it wrong)"
    )
    superseded_by: str | None = Field(
        default=None,
        description="base finding that stopped applying because a stronger new finding (this rule id) replaced it",
    )


class DiffReport(BaseModel):
    tool: str = "model-compile"
    version: str
    command: str = "diff"
    repo: str
    base: Revision
    head: Revision
    kit_changed: bool = Field(default=False, description="some kit class's apply_model_compile changed")
    kit_files: list[str] = Field(default_factory=list, description="changed files that define apply_model_compile")
    kit_classes: list[str] = Field(
        default_factory=list, description="kit classes whose apply_model_compile changed (their recipes are in scope)"
    )
    kit_changes: list[str] = Field(
        default_factory=list, description="what changed in apply_model_compile (in place, disabled regions, where)"
    )
    shared_files: list[ChangedFile] = Field(
        default_factory=list, description="changed files outside any recipe (kit included)"
    )
    recipes: list[RecipeDiff] = Field(default_factory=list)
    merge: MergeView | None = Field(
        default=None, description="set when the head is reviewed as its merge into the base"
    )
    merged_files: list[str] = Field(default_factory=list, exclude=True, description="merge view: the result's files")
    new: list[DiffFinding] = Field(default_factory=list)
    fixed: list[DiffFinding] = Field(default_factory=list)
    superseded: list[DiffFinding] = Field(
        default_factory=list,
        description="base findings replaced by a stronger new finding on the same subject (not fixed)",
    )
    unchanged: list[DiffFinding] = Field(default_factory=list)
    unchanged_count: int = 0
    notes: list[str] = Field(default_factory=list)
    exit_code: int = Field(default=0, description="1 when the change introduces an error finding")
