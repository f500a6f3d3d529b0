"""Rendering of every generated snippet (all code comes from templates/)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path, PurePosixPath
from typing import Any

from model_compile import templating
from model_compile.generate.planning.options import BACKENDS, CONFIG_EXPR, MODES


class Renderer:
    def __init__(self, override: Path | None, form: str | None = None):
        self.override = override
        self.env = templating.environment(override)
        self.rendered: dict[str, str] = {}
        self.form = form  # the recipe schema's form of the compile config: "section" (default) or "flat"

    def render(self, name: str, **context: Any) -> str:
        text = self.env.get_template(name).render(**context)
        self.rendered[name] = text
        return text

    def block(
        self,
        path_kind: str,
        *,
        model_var: str,
        kit_attr: str | None,
        target: str,
        reason: str | None,
        reason_lines: list[str] | None = None,
        indent: int = 0,
        line_length: int | None = None,
        targets: list[str] | None = None,
    ) -> str:
        """The compile block; `reason_lines` is the reason wrapped to the repo's line length, and a
        compile call that would pass `line_length` once inserted at `indent` is split one argument a line.
        `targets` (regional, submodule): every target, `X.*.name` for a submodule of each block of `X`."""
        loops, modules = loops_of(path_kind, targets or [target])
        # the recipe's own form of the config: the section (`.enabled`, `.backend`, `.mode`) or the older flat keys
        flat = self.form == "flat"
        model_config = CONFIG_EXPR.rsplit(".", 1)[0]
        text = self.render(
            f"compile/{path_kind}.py.j2",
            config_expr=CONFIG_EXPR,
            switch_expr=CONFIG_EXPR if flat else f"{CONFIG_EXPR}.enabled",
            backend_expr=f"{model_config}.compile_backend" if flat else f"{CONFIG_EXPR}.backend",
            mode_expr=f"{model_config}.compile_mode" if flat else f"{CONFIG_EXPR}.mode",
            model_var=model_var,
            kit_attr=kit_attr or "self.model_kit",
            target=target,
            reason=reason or "",
            reason_lines=reason_lines or [reason or ""],
            kind=path_kind,
            loops=loops,
            modules=modules,
        )
        return fit_calls(text, indent, line_length) if line_length else text

    def kit_attr(self, kit_attr: str, kit_class: str) -> str:
        return self.render("compile/kit_attr.py.j2", kit_attr=kit_attr, kit_class=kit_class)

    def kit_init(self, kit_attr: str, kit_class: str, config_annotation: str | None) -> str:
        return self.render(
            "compile/kit_init.py.j2", kit_attr=kit_attr, kit_class=kit_class, config_annotation=config_annotation
        )

    def compile_class(
        self,
        class_name: str,
        base: str,
        config_dict: str | None,
        backend: str,
        mode: str,
        *,
        docstring: str,
        line_length: int,
        quote: str,
    ) -> str:
        """The compile config class (Literal-typed backend/mode), with its docstring, in the repo's style."""
        return self.render(
            "config/compile_config.py.j2",
            class_name=class_name,
            base_class=base,
            config_dict=config_dict,
            backends=list(BACKENDS),
            modes=list(MODES),
            backend=backend,
            mode=mode,
            docstring=docstring,
            line_length=line_length,
            quote=quote,
        )

    def compile_field(self, class_name: str) -> str:
        return self.render("config/compile_field.py.j2", class_name=class_name)

    def stage_block(self, indent: str, step: str, backend: str, mode: str) -> str:
        return self.render("config/stage_compile.yaml.j2", indent=indent, step=step, backend=backend, mode=mode)

    def readme_section(
        self,
        hashes: str,
        kind: str,
        target: str,
        reason: str,
        *,
        scope: str = "",
        eager: list[str] | None = None,
        commands: dict[str, str] | None = None,
        enabled_default: str = "False",
        line_length: int = 120,
        targets: list[str] | None = None,
        inside: list[str] | None = None,
    ) -> str:
        """The README's Compile section: kind, target, scope, reason and the commands in the repo's syntax
        (`enabled_default`: the schema's default of `model.compile.enabled`, as its source text), every line
        within the repository's line length."""
        cmds = commands or {}
        stage_file = cmds.get("stage_file", "configs/<stage>.yaml")
        stage = PurePosixPath(stage_file)
        enable = (
            f"model-compile generate {stage.parent.parent} --enable {stage.stem} "
            '--reason "<why compile is on in this stage>" --write'
        )
        text = self.render(
            "readme/compile_section.md.j2",
            targets=list(targets or [target]),
            enable_command=enable,
            enabled_default=enabled_default,
            hashes=hashes,
            kind=kind,
            target=target,
            reason=reason,
            scope=scope or f"`{target}`",
            eager=list(eager or []),
            inside=list(inside or []),
            launch_command=cmds.get("launch", ""),
            test_command=cmds.get("tests", ""),
            tests_note=cmds.get("tests_note", ""),
            stage_file=stage_file,
        )
        return wrap_markdown(text, line_length)


def loops_of(kind: str, targets: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The targets as the compile templates write them: loops over block containers (`X.*.m` -> member `m` of
    each block of `X`; a regional `X` -> each block itself, member ""), and single modules."""
    loops: dict[str, list[str]] = {}
    modules: list[str] = []
    for target in targets:
        container, star, member = target.partition(".*")
        if star:
            loops.setdefault(container, []).append(member.lstrip("."))
        elif kind == "regional":
            loops.setdefault(target, []).append("")
        else:
            modules.append(target)
    return [{"container": c, "members": m} for c, m in loops.items()], modules


_CALL = re.compile(r"^(?P<ws>[ \t]*)(?P<head>[^#\n]*\()(?P<args>[^()\n]*)\)(?P<tail>[ \t]*)$")


def fit_calls(block: str, indent: int, line_length: int) -> str:
    """Split each call line of `block` that would be longer than `line_length` once indented by `indent`
    into one argument a line with a trailing comma, as ruff format and black write it."""
    out: list[str] = []
    for line in block.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        m = _CALL.match(body)
        if m is None or indent + len(body) <= line_length or "," not in m["args"]:
            out.append(line)
            continue
        ws, end = m["ws"], line[len(body) :]
        args = [a.strip() for a in m["args"].split(",") if a.strip()]
        out.append(f"{ws}{m['head']}{end}")
        out.extend(f"{ws}    {a},{end}" for a in args)
        out.append(f"{ws}){end}")
    return "".join(out)


def wrap_markdown(text: str, width: int) -> str:
    """Markdown with every line within `width`: prose and list items wrapped at spaces (a list item's
    continuation indented under its text), a long shell command in a ```bash block split with `\\`
    continuations at its arguments; headings and other code blocks as they are."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            out.append(line)
            continue
        if len(line) <= width or line.startswith("#"):
            out.append(line)
        elif fence in ("bash", "sh", "shell"):
            out.extend(_split_command(line, width))
        elif fence is None:
            lead = "  " if line.startswith("- ") else ""
            # a code span is never split: its spaces are held while wrapping
            held = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), line)
            wrapped = textwrap.wrap(held, width, subsequent_indent=lead, break_long_words=False, break_on_hyphens=False)
            out.extend(w.replace("\0", " ") for w in wrapped or [held])
        else:
            out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _split_command(line: str, width: int) -> list[str]:
    """`cmd --a x --b y` as lines ending in ` \\`, continuations indented by two spaces (as READMEs write them), at option boundaries."""
    tokens = line.split(" ")
    words: list[str] = []
    for token in tokens:  # an option and its value stay on one line
        if words and words[-1].startswith("-") and " " not in words[-1] and not token.startswith("-"):
            words[-1] += " " + token
        else:
            words.append(token)
    lines: list[str] = []
    current = words[0]
    for word in words[1:]:
        if len(current) + 1 + len(word) + 2 > width and current.strip():
            lines.append(current + " \\")
            current = "  " + word
        else:
            current += " " + word
    lines.append(current)
    return lines
