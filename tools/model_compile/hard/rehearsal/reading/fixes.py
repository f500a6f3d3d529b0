"""Guards made readable, and the fixes read off the root causes the rehearsal found (tried by hard/rehearsal/trials.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from model_compile.hard.models import Fix, RehearsalFacts
from model_compile.hard.rehearsal.planning.plan import Plan
from model_compile.hard.rehearsal.reading.attribution import library_fault

_CACHE_GUARD = re.compile(r"cache|past_key_values|is_initialized", re.I)
_SIZE_GUARD = re.compile(r"size mismatch at index \d+")


_READABLE = re.compile(r"tensor '(.*?)' size mismatch at index (\d+)\. expected (\d+), actual (\d+)")


def shorten(text: str, width: int) -> str:
    """`text` as it is, or cut at a word before `width` and ending in ' …' (mid-word only for one very long word)."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    head = text[: width - 2]
    space = head.rfind(" ")
    return (head[:space] if space > width // 2 else head).rstrip(" ,;:(") + " …"


_STACK = re.compile(r"\s*User stack trace:.*$", re.S)
_SOURCED = re.compile(r"^(?P<expr>.+?)\s+#\s+(?P<src>.+?)\s+#\s+(?P<where>\S+:\d+(?: in \w+)?)\s*$", re.S)


def readable_guard(text: str, width: int | None = None) -> str:
    """A failed guard in a few words: the expression first, then the source line and where it is; the stack dropped.

    `tensor 'kwargs['input_ids']' size mismatch at index 1. expected 52, actual 69` -> `input_ids dim 1 changed 52 -> 69`;
    `0/0: not ___dict_contains('x', kwargs) # y = kwargs.pop("x") # pkg/m.py:9 in f User stack trace: ...` ->
    `not ___dict_contains('x', kwargs) (pkg/m.py:9 in f: y = kwargs.pop("x"))`.
    """

    def repl(m: re.Match[str]) -> str:
        names = re.findall(r"\['([A-Za-z_]\w*)'\]", m.group(1)) or re.findall(r"^([A-Za-z_]\w*)$", m.group(1))
        what = names[-1] if names else "an input tensor"
        return f"{what} dim {m.group(2)} changed {m.group(3)} -> {m.group(4)}"

    text = _STACK.sub("", re.sub(r"(^|last reason: |last failed guard: )\d+/\d+: ", r"\1", text.strip()))
    sourced = _SOURCED.match(text)
    if sourced:
        text = f"{sourced['expr'].strip()} ({sourced['where']}: {sourced['src'].strip()})"
    text = _READABLE.sub(repl, text)
    return shorten(text, width) if width else " ".join(text.split())


_SOURCE = re.compile(r"^L\['(?P<key>\w+)'\]\.size\(\)\[(?P<dim>\d+)\]$")
_GUARD_INPUT = re.compile(r"tensor '(?:\w+\[')?(?P<key>\w+)(?:'\])?' size mismatch at index (?P<dim>\d+)")
_DATA_BRANCH = re.compile(r"data-dependent branching|data dependent|generic_jump|jump with", re.I)
_SCALAR = re.compile(r"_local_scalar_dense|\.item\(\)|tolist", re.I)  # a tensor read out as Python numbers


_BRANCH_LINE = re.compile(r"^(if|elif|while|assert)\b")


def _source_line(site: str, plan: Plan) -> str:
    """The text of a repository site's line (read as text, never imported), or "" when it cannot be read."""
    path, _, number = site.rpartition(":")
    if not number.isdigit() or site.startswith("library "):
        return ""
    try:
        lines = (Path(str(plan.spec["repo_root"])) / path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    index = int(number) - 1
    return lines[index].strip() if 0 <= index < len(lines) else ""


def _shared(site: str, plan: Plan) -> bool:
    """The site lies outside the recipe's own folder (shared code, or a library)."""
    recipe = Path(str(plan.spec["recipe_root"])).resolve()
    repo = Path(str(plan.spec["repo_root"])).resolve()
    try:
        rel = recipe.relative_to(repo).as_posix()
    except ValueError:
        rel = recipe.name
    return not site.startswith(rel + "/")


def _where(site: str, plan: Plan) -> str:
    if site.startswith("library "):
        return f"{site} (a library: change it through the code that calls it, or upstream)"
    if _shared(site, plan):
        return f"{site} (shared code outside the recipe: the repository's rules may ask its owners first)"
    return site


def fixes(facts: RehearsalFacts, plan: Plan) -> list[Fix]:
    """The fixes read off the root causes the rehearsal found. A fix that can be applied at run time carries its
    `override` and what it aims at; the trials (hard/rehearsal/trials.py) rerun the compiled twin with it and
    mark it proven or disproven. The others are `not tried`, with the reason."""
    out: list[Fix] = []
    recipe = str(plan.spec["recipe_root"])
    rerun = f"model-compile rehearse {recipe} --config-name {plan.stage}"
    guards = [r for s in facts.steps for r in s.recompiles] + [h for s in facts.steps for h in s.limit_hits]
    if any(_CACHE_GUARD.search(g) and "layers[" in g for g in guards):
        where = f" in {plan.forward_step}" if plan.forward_step else ""
        out.append(
            Fix(
                fix=f"pass use_cache=False to the model call of the training forward{where}",
                cause="a per-layer KV-cache guard: each decoder layer adds a compiled variant until the limit",
                tried="not tried",
                override={"call_kwargs": {"use_cache": False}},
                aims=["limit_hits", "recompiles"],
            )
        )
    sized = [g for g in guards if _SIZE_GUARD.search(g)] + [n for n in facts.near_limit if "new input size" in n]
    dynamic = str(plan.compile_kwargs.get("dynamic", "")).strip()
    if sized and dynamic == "False":
        out.append(
            Fix(
                fix=f"drop dynamic=False from the compile call ({plan.compile_call}), or take it from the stage config",
                cause="the compile call hard-codes dynamic=False: every new length is a new variant",
                tried="not tried",
                override={"drop_compile_kwargs": ["dynamic"]},
                aims=["recompiles", "limit_hits"],
            )
        )
    if sized:
        # the lines that fixed a size, where the trace names one: the repository's own code first
        ordered = sorted(facts.specialized_at, key=lambda spec: spec["site"].startswith("library "))
        for spec in ordered[:2]:
            out.append(
                Fix(
                    fix=f"change {_where(spec['site'], plan)} so that it does not turn {spec['source'] or 'a size'} "
                    f"into a Python number (`{spec['loc']}`): a loop or a `.tolist()` over a tensor's size fixes the "
                    "size, and each new length compiles again; keep it a tensor operation",
                    cause=f"{spec['site']} fixes {spec['source'] or 'a size'} to a constant ({spec['expr']})",
                    tried="not tried",
                    reason="a change to the code itself: the rehearsal cannot try it for you",
                    shared_code=_shared(spec["site"], plan),
                )
            )
        found = {(m["key"], int(m["dim"])) for spec in facts.specialized_at if (m := _SOURCE.match(spec["source"]))}
        found |= {(m["key"], int(m["dim"])) for g in sized if (m := _GUARD_INPUT.search(g))}
        # only what the batch itself holds can be marked before the forward
        inputs = sorted((key, dim) for key, dim in found if key in facts.batch_keys)
        if inputs:
            marks = ", ".join(f"torch._dynamo.mark_dynamic(batch[{k!r}], {d})" for k, d in inputs)
            out.append(
                Fix(
                    fix=f"mark the length dynamic before the forward ({marks})",
                    cause="a frame recompiles per input length",
                    tried="not tried",
                    override={"mark_dynamic": [[k, d] for k, d in inputs]},
                    aims=["recompiles", "limit_hits"],
                )
            )
    for group, parts in facts.block_parts.items():
        # blocks that run eager because checkpointing runs them with compile off: compile inside the checkpoint
        checkpointed = any(
            c.kind == "checkpoint" and c.share >= 0.5
            for e in facts.coverage
            if e.module == group and e.role in ("target", "holds targets")  # blocks the recipe means to compile
            for c in e.eager_causes
        )
        if parts and checkpointed and not any(f.override.get("compile_targets") for f in out):
            targets = list(parts)
            cmd = ["model-compile", "generate", recipe, "--path", "regional", "--switch"]
            for t in targets:
                cmd += ["--target", f"{plan.model_var}.{t}"]
            cmd += [
                "--reason",
                "checkpointed blocks run eager under a whole-model compile; their attention and MLP "
                "compile inside the checkpoint",
                "--write",
            ]
            flags = shlex.join(cmd)
            out.append(
                Fix(
                    fix=f"compile each block's {', '.join(p.rsplit('.', 1)[-1] for p in parts)} inside its "
                    "checkpoint instead of the whole model",
                    command=flags,
                    cause=f"{group} runs eager under the whole-model compile"
                    + (" (activation checkpointing runs it with compile off)" if checkpointed else ""),
                    tried="not tried",
                    override={"compile_targets": targets},
                    aims=["coverage", "limit_hits", "recompiles"],
                )
            )
    branches = {  # one fix a site: a site's breaks may come with reasons worded apart
        g.site: g
        for g in facts.graph_break_sites
        if (_DATA_BRANCH.search(g.reason) or _SCALAR.search(g.reason)) and not g.site.startswith("library ")
    }
    for brk in list(branches.values())[:2]:
        line = _source_line(brk.site, plan)
        quoted = f" (`{line}`)" if line else ""
        # a value read out only to branch on is a branch: capture_scalar_outputs does not make an `if` traceable
        scalar = bool(_SCALAR.search(brk.reason)) and not (line and _BRANCH_LINE.match(line))
        what = (
            "a `.item()` or `.tolist()` reads a tensor out as Python numbers and breaks the graph: keep it a tensor "
            "operation, or set torch._dynamo.config.capture_scalar_outputs = True where the number only feeds "
            "tensor code"
            if scalar
            else "a Python `if` on a tensor's value breaks the graph (and in a loop makes dynamo skip the whole "
            "frame): compute both sides and select with torch.where or a mask, or express it with torch.cond"
        )
        out.append(
            Fix(
                fix=f"at {_where(brk.site, plan)}{quoted}: {what}",
                cause=f"{'a tensor read out as Python numbers' if scalar else 'data-dependent branching'} at {brk.site}",
                tried="not tried",
                reason="a change to the code itself: the rehearsal cannot try it for you",
                shared_code=_shared(brk.site, plan),
            )
        )
    library = library_fault(facts.data_failure_raised, _repo(plan), "") if facts.data_failure else None
    if library is not None:
        out.append(
            Fix(
                fix=f"{library.supply}; then `{rerun}` rehearses on the batches the recipe's data path makes",
                cause=f"the recipe's data path failed inside a sibling library ({facts.data_failure}): "
                + "; ".join(library.evidence),
                tried="not tried",
                reason="the environment's, not the recipe's: the library's installed revision does not fit the engine",
            )
        )
    elif facts.data_failure:
        out.append(
            Fix(
                fix=f"give the recipe's data path the stage's own data (it failed on the rehearsal's synthetic rows: "
                f"{facts.data_failure}); then `{rerun}` rehearses on the batches it makes",
                cause="the recipe's data path failed on the rehearsal's rows: every figure comes from synthetic batches",
                tried="not tried",
                reason="the rows were the rehearsal's stand-in: if the real rows fail there too, the data path is the "
                "recipe's to fix",
            )
        )
    return out


def _repo(plan: Plan) -> Path:
    return Path(str((plan.spec or {}).get("repo_root") or "."))
