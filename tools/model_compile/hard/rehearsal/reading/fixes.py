"""Guards made readable, and the fixes the rehearsal recognises in what it saw, each with the command that proves it."""

from __future__ import annotations

import re

from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.planning.plan import Plan

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


def fixes(facts: RehearsalFacts, plan: Plan) -> list[str]:
    """The fixes the rehearsal recognises in what it saw, each with the command that proves it."""
    out: list[str] = []
    guards = [r for s in facts.steps for r in s.recompiles] + [h for s in facts.steps for h in s.limit_hits]
    rerun = f"model-compile rehearse {plan.spec['recipe_root']} --config-name {plan.stage}"
    if any(_CACHE_GUARD.search(g) and "layers[" in g for g in guards):
        where = f" in {plan.forward_step}" if plan.forward_step else ""
        out.append(
            "a per-layer KV-cache guard (each decoder layer adds a variant): pass use_cache=False to the model call "
            f"of the training forward{where}; then `{rerun}` shows whether the frame settles"
        )
    sized = [g for g in guards if _SIZE_GUARD.search(g)]
    dynamic = str(plan.compile_kwargs.get("dynamic", "")).strip()
    if sized and dynamic == "False":
        out.append(
            f"the compile call hard-codes dynamic=False ({plan.compile_call}): every new length is a new variant; "
            f"drop it (or take it from the stage config) and rerun `{rerun}`"
        )
    limited = [h for s in facts.steps for h in s.limit_hits if _SIZE_GUARD.search(h)]
    limited += [n for n in facts.near_limit if "new input size" in n]
    if limited and dynamic != "False":
        out.append(
            "a frame recompiles per sequence length until the limit: mark the length dynamic before the forward "
            "(torch._dynamo.mark_dynamic(batch['input_ids'], 1)) or compile per block "
            f"(`model-compile generate {plan.spec['recipe_root']} --path regional --switch --target <blocks> --reason ...`); "
            f"then `{rerun}`"
        )
    if facts.data_failure:
        out.append(
            f"the recipe's data path failed on the rehearsal's rows ({facts.data_failure}), so every figure comes from "
            "synthetic batches, not from its packer and collator: fix the data code (in this environment the real run may "
            f"fail there too), then `{rerun}` rehearses on the batches it makes"
        )
    return out
