"""The stage ledger as a Mermaid flowchart.

Stages appear in program order (build -> patches -> freeze -> upcast ->
checkpointing -> compile -> wrap in a well-placed recipe). The compile node
is highlighted; a stage a placement finding points at is drawn in red. One
subgraph per engine class when a recipe has several.
"""

from __future__ import annotations

from model_compile.report.models import Stage

LABELS = {
    "build": "build",
    "patch": "patches",
    "freeze": "freeze",
    "upcast": "upcast",
    "checkpointing": "checkpointing",
    "graph_break": "graph-break region",
    "compile": "compile",
    "wrap": "wrap",
    "return": "return",
}
CLASSES = (
    "classDef compile fill:#fff3bf,stroke:#f08c00,stroke-width:3px,color:#000",
    "classDef misplaced fill:#ffc9c9,stroke:#e03131,stroke-width:3px,color:#000",
)
MAX_CALL = 40


def _escape(text: str) -> str:
    """Text safe inside a quoted Mermaid label."""
    return (
        text.replace("&", "#amp;")
        .replace('"', "#quot;")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("|", "#124;")
        .replace("`", "'")
    )


def _short(call: str) -> str:
    call = " ".join(call.split())
    head = call.split("(", 1)[0]
    if len(call) <= MAX_CALL:
        return call
    return (head if len(head) <= MAX_CALL else head[: MAX_CALL - 1] + "…") + "(…)"


def label(stage: Stage) -> str:
    """'compile<br/>apply_model_compile(…)<br/>L210 if model.compile.enabled'."""
    where = f"L{stage.line}"
    if stage.condition:
        cond = " and ".join(stage.condition)
        where += " if " + (cond if len(cond) <= MAX_CALL else cond[: MAX_CALL - 1] + "…")
    text = f"{LABELS.get(stage.kind, stage.kind)}<br/>{_escape(_short(stage.call))}<br/>{_escape(where)}"
    if stage.misplaced:
        text = "misplaced: " + text
    return text


def flowchart(stages: list[Stage]) -> str:
    """A left-to-right `flowchart LR` of the stages; empty when there is nothing to draw."""
    drawn = [s for s in stages if s.kind != "return"]
    if not drawn:
        return ""
    out = ["flowchart LR"]
    engines: list[str] = []
    for s in drawn:
        if s.engine not in engines:
            engines.append(s.engine)
    index = 0
    for engine in engines:
        group = [s for s in drawn if s.engine == engine]
        indent = "  "
        if len(engines) > 1:
            out.append(f'  subgraph e{engines.index(engine)}["{_escape(engine)}.prepare_model()"]')
            indent = "    "
        ids = []
        for stage in group:
            node = f"s{index}"
            index += 1
            ids.append(node)
            out.append(f'{indent}{node}["{label(stage)}"]')
            if stage.misplaced:
                out.append(f"{indent}class {node} misplaced")
            elif stage.kind == "compile":
                out.append(f"{indent}class {node} compile")
        for a, b in zip(ids, ids[1:], strict=False):
            out.append(f"{indent}{a} --> {b}")
        if len(engines) > 1:
            out.append("  end")
    out.extend("  " + c for c in CLASSES)
    return "\n".join(out)
