"""MC204: is compile gated by `model.compile.enabled` and fed backend/mode from `model.compile`?"""

from __future__ import annotations

import re
from collections.abc import Iterable

from model_compile.ledger.recipe import RecipeContext
from model_compile.parse.python import literal_of
from model_compile.rules.base import Example, Rule, call_subject, compile_events, gate_state, step_ref
from model_compile.rules.finding import Finding
from model_compile.rules.placement import _GATED_KIT, _WITHOUT_COMPILE
from model_compile.rules.scaffold import CANONICAL_BODY, engine_text, mark, replace_once

_CONFIG_ROOT = re.compile(r"^(?:self\.)?(?:config|cfg|conf|args|hparams)\.(?P<field>[A-Za-z_][\w.]*)$")


def _argument_source(value: str) -> str:
    """Where a compile argument comes from, for MC204: a literal, another config field, or some expression."""
    try:
        literal = literal_of(value)
    except (ValueError, SyntaxError, RecursionError):
        literal = None
    else:
        return f"is hard-coded as {literal!r}"
    m = _CONFIG_ROOT.match(value.strip())
    if m:
        return f"is read from `{m.group('field')}`"
    return f"is passed as `{value}`"


class ConfigNotWired(Rule):
    id = "MC204"
    severity = "error"
    title = "compile not wired to the config"
    what = (
        "Flags compile not gated by `model.compile.enabled` (or gated inverted), backend/mode hard-coded or "
        "not passed, and a compile config section that nothing reads."
    )
    why = "The config is the contract: `--config-override model.compile.enabled=true` must turn compile on, and stage YAMLs must choose backend and mode."
    example = 'model = self.model_kit.apply_model_compile(model, backend="inductor", mode="default")'
    use_instead = (
        "if self.config.model.compile.enabled:\n    model = self.model_kit.apply_model_compile(\n"
        "        model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)"
    )
    fix = "gate with `if self.config.model.compile.enabled:` and pass backend/mode from self.config.model.compile"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n"
                "    model = self.model_kit.apply_model_compile(\n"
                "        model,\n"
                "        backend=self.config.model.compile.backend,\n"
                "        mode=self.config.model.compile.mode,\n",
                "cfg = self.config.model.compile\n"
                "if cfg.enabled:\n"
                "    model = self.model_kit.apply_model_compile(\n"
                "        model,\n"
                "        backend=cfg.backend,\n"
                "        mode=cfg.mode,\n",
            ),
            note="local alias",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "if self.config.model.compile.enabled and not self.config.debug:\n",
            ),
            note="extra conjunct",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:",
                'if getattr(self.config.model.compile, "enabled", False):',
            ),
            note="getattr gate",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:",
                "use_compile = bool(self.config.model.compile.enabled)\nif use_compile:",
            ),
            note="a gate flag built through bool()",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:",
                'use_compile = bool(getattr(self.config.model.compile, "enabled", False))\n'
                "if self.config.model.gradient_checkpointing.enabled and not use_compile:\n"
                "    self.logger.info('eager run with checkpointing')\n"
                "if use_compile:",
            ),
            note="bool() of a getattr, read twice",
        ),
        Example(
            body=_WITHOUT_COMPILE + _GATED_KIT,
            note="compile after the return is MC405's one error, not also 'never compiles'",
        ),
    ]
    INVALID = [
        # Findings on a multi-line call land on its first line.
        Example(
            body=mark(
                replace_once(CANONICAL_BODY, "if self.config.model.compile.enabled:\n", "if True:\n"),
                "apply_model_compile(",
                "MC204",
            ),
            note="ungated",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "if self.config.model.compile.enabled:\n",
                    "if not self.config.model.compile.enabled:\n",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="inverted",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "if self.config.model.compile.enabled:",
                    "use_compile = bool(self.config.model.gradient_checkpointing.enabled)\nif use_compile:",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="a flag through bool() of another field (near miss)",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "if self.config.model.compile.enabled:",
                    "use_compile = bool(self.config.model.compile.enabled)\nuse_compile = self.config.debug\nif use_compile:",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="the flag rebound to another field before the gate",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "if self.config.model.compile.enabled:",
                    "use_compile = not bool(self.config.model.compile.enabled)\nif use_compile:",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="a flag through bool(), negated: inverted gate",
        ),
        Example(
            body=mark(
                replace_once(CANONICAL_BODY, "backend=self.config.model.compile.backend", 'backend="inductor"'),
                "apply_model_compile(",
                "MC204",
            ),
            note="hard-coded backend",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "backend=self.config.model.compile.backend",
                    "backend=self.config.optim.compile_backend",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="backend read from another config field",
        ),
        Example(
            engine=mark(
                engine_text(
                    "model = self.model_kit.build_model(self.config.model.path)\n"
                    "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
                ),
                "def prepare_model(self):",
                "MC204",
            ),
            note="config section exists, nothing compiles",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        events = compile_events(ctx)
        schema = ctx.config.schema_
        # A compile call that is never reached is MC405's one error, not also "never compiles" here.
        written = compile_events(ctx, reachable=False)
        if not written and ctx.ledgers and (schema.compile_class or any(s.has_compile for s in ctx.config.stages)):
            ledger = ctx.ledgers[0]
            yield self.finding(
                ctx,
                ledger.file,
                ledger.line,
                f"the config has model.compile but {ledger.engine_class}.prepare_model() never compiles",
                fix=f"add the kit call: model-compile generate {ctx.loc.display_path} --path kit",
                subject=f"{ledger.engine_class}.prepare_model",
            )
        for _, e, _ in events:
            state = gate_state(e)
            if state == "inverted":
                yield self.finding(
                    ctx,
                    e.file,
                    e.line,
                    f"compile {step_ref(e)} runs when model.compile.enabled is false (inverted gate)",
                    subject=f"{call_subject(e)} gate",
                )
            elif state == "ungated":
                yield self.finding(
                    ctx,
                    e.file,
                    e.line,
                    f"compile {step_ref(e)} is not gated by model.compile.enabled",
                    subject=f"{call_subject(e)} gate",
                )
            for name in ("backend", "mode"):
                value = e.arguments.get(name)
                if value is None:
                    yield self.finding(
                        ctx,
                        e.file,
                        e.line,
                        f"compile {step_ref(e)} does not pass {name} from model.compile.{name}",
                        subject=f"{call_subject(e)} {name}",
                    )
                elif f"compile.{name}" not in value:
                    yield self.finding(
                        ctx,
                        e.file,
                        e.line,
                        f"compile {step_ref(e)}: {name} {_argument_source(value)} instead of `model.compile.{name}`",
                        subject=f"{call_subject(e)} {name}",
                    )
