"""Which findings a repository wants: `[tool.model-compile]` select/ignore/severity
(as ruff users know them) and inline `# model-compile: ignore[MCxxx] - <reason>`
comments (as Fixit users know them).

Selected-out rules do not run. Suppressed findings stay in the report with
`suppressed` set (JSON, SARIF `suppressions`), and no text count, exit code or
diff counts them.
"""

from __future__ import annotations

from model_compile.errors import InputError
from model_compile.parse.models import Suppression
from model_compile.rules import ALL_RULES, RULES_BY_ID, matching
from model_compile.rules.base import Rule
from model_compile.rules.finding import Finding, Suppressed
from model_compile.settings import Settings


def _expand(entries: list[str], key: str) -> set[str]:
    out: set[str] = set()
    for entry in entries:
        ids = matching(entry)
        if not ids:
            raise InputError(f"[tool.model-compile] {key}: {entry!r} names no rule (known: {', '.join(RULES_BY_ID)})")
        out.update(ids)
    return out


def selected_rules(settings: Settings) -> list[type[Rule]]:
    """The rules to run: `select` (default all) minus `ignore`; unknown ids are an input error."""
    chosen = _expand(settings.select, "select") if settings.select else set(RULES_BY_ID)
    chosen -= _expand(settings.ignore, "ignore")
    for rule_id in settings.severity:
        if rule_id.upper() not in RULES_BY_ID:
            raise InputError(
                f"[tool.model-compile] severity: {rule_id!r} is not a rule id (known: {', '.join(RULES_BY_ID)})"
            )
    return [r for r in ALL_RULES if r.id in chosen]


def apply_severity(findings: list[Finding], settings: Settings) -> list[Finding]:
    """Findings with the repository's per-rule severity."""
    override = {k.upper(): v for k, v in settings.severity.items()}
    return [f.model_copy(update={"severity": override[f.rule]}) if f.rule in override else f for f in findings]


def apply_suppressions(findings: list[Finding], suppressions: list[Suppression]) -> list[Finding]:
    """Mark findings silenced by an ignore comment on their line or the line above.

    A comment without a reason silences nothing (MC001 reports it).
    """
    valid = [s for s in suppressions if s.reason and s.rules]
    if not valid:
        return findings
    out = []
    for f in findings:
        hit = next(
            (
                s
                for s in valid
                if s.file == f.file and f.line in (s.line, s.line + 1) and f.rule in s.rules and f.rule != "MC001"
            ),
            None,
        )
        if hit is not None:
            f = f.model_copy(update={"suppressed": Suppressed(justification=hit.reason, file=hit.file, line=hit.line)})
        out.append(f)
    return out
