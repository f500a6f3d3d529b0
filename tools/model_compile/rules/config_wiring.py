"""MC204: is compile gated by `model.compile.enabled` and fed backend/mode from `model.compile`?"""

from __future__ import annotations

import re
from collections.abc import Iterable

from model_compile.ledger.models import Event
from model_compile.ledger.recipe import RecipeContext
from model_compile.ledger.repo import KitFacts, RepoFacts
from model_compile.parse.models import ConfigForm, config_key
from model_compile.parse.python import literal_of
from model_compile.rules.base import Example, Rule, call_subject, compile_events, gate_state, generate_hint, step_ref
from model_compile.rules.finding import Finding
from model_compile.rules.placement import _GATED_KIT, _WITHOUT_COMPILE
from model_compile.rules.scaffold import (
    CANONICAL_BODY,
    FLAT_BODY,
    FLAT_SCHEMA,
    FLAT_STAGE,
    engine_text,
    mark,
    replace_once,
)

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
        "not passed (one finding per compile call, naming each part), and a compile config that nothing reads. "
        "A recipe in the older flat form (MC206) is read in its own terms: gated by `model.compile`, backend and "
        "mode from `model.compile_backend` / `model.compile_mode`."
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
        Example(
            body=FLAT_BODY,
            schema=FLAT_SCHEMA,
            stages={"train": FLAT_STAGE},
            note="the older flat form wired through its own fields: MC206 is its one finding",
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
        Example(
            body=mark(
                replace_once(
                    FLAT_BODY, "backend=self.config.model.compile_backend", "backend=self.config.optim.compile_backend"
                ),
                "apply_model_compile(",
                "MC204",
            ),
            schema=FLAT_SCHEMA,
            stages={"train": FLAT_STAGE},
            note="flat form, backend from another section's field (near miss of the wired flat form)",
        ),
        Example(
            body=mark(FLAT_BODY, "apply_model_compile(", "MC204"),
            note="flat gate and fields against a section schema (the section is always truthy): one finding",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        events = compile_events(ctx)
        # A compile call that is never reached is MC405's one error, not also "never compiles" here.
        written = compile_events(ctx, reachable=False)
        if not written and ctx.ledgers and ctx.config.form is not None:
            ledger = ctx.ledgers[0]
            yield self.finding(
                ctx,
                ledger.file,
                ledger.line,
                f"the config has model.compile but {ledger.engine_class}.prepare_model() never compiles",
                fix=f"add the compile call: {generate_hint(ctx)}",
                subject=f"{ledger.engine_class}.prepare_model",
            )
        form = ctx.config.form
        for _, e, _ in events:
            problems, kinds = _wiring_problems(e, form)
            if problems:
                yield self.finding(
                    ctx,
                    e.file,
                    e.line,
                    f"compile {step_ref(e)} " + "; ".join(problems),
                    fix=_fix(form) if form == "flat" else None,
                    # One finding per call; its scope names what is wrong, so fixing part of it is a new finding.
                    subject=f"{call_subject(e)} wiring | {', '.join(kinds)}",
                )


def _reads(value: str, key: str) -> bool:
    """A compile argument read from the config key (aliases are resolved in the ledger's argument text)."""
    if key.startswith("model.compile."):  # the section: `cfg.backend` of `cfg = self.config.model.compile`
        return key.removeprefix("model.") in value
    return bool(re.search(r"(^|\.)" + re.escape(key) + r"$", value.strip()))


def _wiring_problems(e: Event, form: ConfigForm | None) -> tuple[list[str], list[str]]:
    """What is wrong with one compile call's wiring to the config, in words, and which parts (gate, backend, mode)."""
    problems: list[str] = []
    kinds: list[str] = []
    switch = config_key(form, "enabled")
    state = gate_state(e, switch)
    if state == "inverted":
        problems.append(f"runs when {switch} is false (inverted gate)")
        kinds.append("gate")
    elif state == "ungated":
        problems.append(f"is not gated by {switch}")
        kinds.append("gate")
    for name in ("backend", "mode"):
        key = config_key(form, name)
        value = e.arguments.get(name)
        if value is None:
            problems.append(f"does not pass {name} from {key}")
        elif not _reads(value, key):
            problems.append(f"{name} {_argument_source(value)} instead of `{key}`")
        else:
            continue
        kinds.append(name)
    return problems, kinds


def _fix(form: ConfigForm | None) -> str:
    """The fix in the form the recipe's config has (the older flat form: its own fields, and the migration)."""
    if form == "flat":
        return (
            "gate with `if self.config.model.compile:` and pass backend=self.config.model.compile_backend, "
            "mode=self.config.model.compile_mode (the recipe's flat form), or migrate to a `model.compile` section (MC206)"
        )
    return ConfigNotWired.fix


# What a hard-coded compile option means, for options whose literal differs from torch.compile's default.
_OPTION_EFFECT: dict[tuple[str, object], str] = {
    ("dynamic", False): "every new input shape (a sequence length, an image grid) compiles again until the recompile "
    "limit, then that frame runs eager",
    ("dynamic", True): "every shape is compiled symbolic from the first call, whatever the stage feeds",
    ("fullgraph", True): "any graph break is an error instead of a split graph",
}
_KIT_WITH_OPTION = (
    "class MLLMModelKit:\n"
    "    def apply_model_compile(self, model, backend, mode):\n"
    "        model.compile(backend=backend, mode=mode{extra})\n"
    "        return model\n"
)


def _literal(source: str) -> tuple[bool, object]:
    try:
        return True, literal_of(source)
    except (ValueError, SyntaxError, RecursionError):
        return False, None


class HardCodedCompileOption(Rule):
    id = "MC207"
    severity = "warning"
    title = "compile option hard-coded, not from the config"
    what = (
        "Flags `dynamic=` and `fullgraph=` passed as literals that differ from torch.compile's default, wherever "
        "compile is called: in prepare_model() and in the shared kit's apply_model_compile (there also a literal "
        "`backend=` or `mode=` in place of the parameters the recipe passes). A kit finding applies to every recipe "
        "that calls that kit class."
    )
    why = (
        "A literal option holds for every stage and no `--config-override` reaches it: `dynamic=False` recompiles on "
        "each new shape (packed batches and image grids change per step) until the recompile limit sends the frame "
        "to eager; a kit that ignores the `mode` it is given silently overrides every stage YAML."
    )
    example = "return torch.compile(model, backend=backend, mode=mode, dynamic=False)"
    use_instead = "leave dynamic/fullgraph at their defaults, or add them to the `model.compile` section and pass them"
    fix = "drop the literal (torch.compile's default), or read it from the config like backend and mode"
    VALID = [
        Example(),
        Example(
            files={"example_engine/kit/mllm/model.py": _KIT_WITH_OPTION.format(extra=", dynamic=None")},
            note="the kit passes dynamic=None, torch.compile's default",
        ),
        Example(
            files={
                "example_engine/kit/mllm/model.py": _KIT_WITH_OPTION.replace(
                    "backend, mode):", "backend, mode, dynamic=None):"
                ).format(extra=", dynamic=dynamic")
            },
            note="the kit passes dynamic from its own parameter",
        ),
    ]
    INVALID = [
        Example(
            files={
                "example_engine/kit/mllm/model.py": _KIT_WITH_OPTION.format(extra=", dynamic=False").replace(
                    "mode, dynamic=False)\n", "mode, dynamic=False)  # <- MC207\n"
                )
            },
            note="the kit hard-codes dynamic=False for every recipe",
        ),
        Example(
            files={
                "example_engine/kit/mllm/model.py": _KIT_WITH_OPTION.format(extra="").replace(
                    "mode=mode)\n", 'mode="reduce-overhead")  # <- MC207\n'
                )
            },
            note="the kit ignores the mode it is given",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "        mode=self.config.model.compile.mode,\n    )\n",
                    "        mode=self.config.model.compile.mode,\n        fullgraph=True,\n    )\n",
                ),
                "apply_model_compile(",
                "MC207",
            ),
            note="fullgraph=True in the recipe's call",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for _, e, _ in compile_events(ctx):
            for name in ("dynamic", "fullgraph"):
                source = e.arguments.get(name)
                known, value = _literal(source) if source is not None else (False, None)
                if known and (name, value) in _OPTION_EFFECT:
                    yield self.finding(
                        ctx,
                        e.file,
                        e.line,
                        f"compile {step_ref(e)} hard-codes {name}={value!r}: {_OPTION_EFFECT[(name, value)]}; "
                        "no stage or override can change it",
                        subject=f"{call_subject(e)} option {name}",
                    )

    def check_kit(self, kit: KitFacts, repo: RepoFacts) -> Iterable[Finding]:
        if kit.call_line is None:
            return
        for name, source in kit.options.items():
            known, value = _literal(source)
            if not known:
                continue
            if name in ("backend", "mode"):
                passed = f" and ignores the `{name}` the recipe passes" if name in kit.params else ""
                effect = f"every recipe that calls it compiles with {name} {value!r}{passed}"
            elif (name, value) in _OPTION_EFFECT:
                effect = f"in every recipe that calls it, {_OPTION_EFFECT[(name, value)]}"
            else:
                continue
            yield self.kit_finding(
                kit,
                kit.call_line,
                f"{kit.class_name}.apply_model_compile hard-codes {name}={value!r} (`{kit.call[:80]}`): {effect}; "
                "no stage or override can change it",
                f"pass the kit's `{name}` parameter" if name in kit.params else self.fix,
                what=f"option {name}",
            )
