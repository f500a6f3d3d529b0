"""Jinja2 environment shared by every generator.

Templates are looked up first in a team's override directory (`--templates
DIR`, or `[tool.model-compile] templates = "..."` in the target repo's
pyproject.toml), then in the built-in `templates/` folder. StrictUndefined
makes a missing variable an error instead of silently empty code.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from model_compile.settings import load_settings


def builtin_templates_dir() -> Path:
    """The package's own templates (repo `templates/`, shipped as model_compile._templates)."""
    try:
        import model_compile._templates as pkg  # mapped to templates/ by pyproject

        paths = list(getattr(pkg, "__path__", []))
        if paths:
            return Path(paths[0])
    except ImportError:
        pass
    return Path(__file__).resolve().parents[2] / "templates"


def override_dir_from_pyproject(repo_root: Path) -> Path | None:
    """`[tool.model-compile] templates` from the target repo's pyproject.toml."""
    value = load_settings(repo_root).templates
    if value is None:
        return None
    path = (repo_root / value).resolve()
    return path if path.is_dir() else None


def environment(override: Path | None = None) -> jinja2.Environment:
    """A code-generating Jinja environment (no autoescape, strict undefined)."""
    search = [str(override)] if override else []
    search.append(str(builtin_templates_dir()))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["py"] = py_literal
    return env


def _py_str(text: str, quote: str) -> str:
    q, other = ('"', "'") if quote != "single" else ("'", '"')
    if q in text and other not in text:  # as black and ruff do: the quote that needs no escapes
        q = other
    shown = repr(text)  # escapes backslashes and control characters; picks its own quote
    body = shown[1:-1].replace("\\'", "'") if shown[0] == "'" else shown[1:-1]
    return q + body.replace(q, "\\" + q) + q


@jinja2.pass_context
def py_literal(ctx: jinja2.runtime.Context, value: object, prefix: str = "", suffix: str = "", indent: int = 0) -> str:
    """A str/number/list as Python source in the repo's style (`quote`, `line_length` in the context).

    A list whose line (`indent` spaces, `prefix`, the list, `suffix`) would pass
    the line length is written one item a line with a trailing comma, as the
    formatters keep it.
    """
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined: a missing variable is an error, as everywhere else
    quote = str(ctx.get("quote", "double"))
    width = int(ctx.get("line_length", 88))
    if isinstance(value, str):
        return _py_str(value, quote)
    if isinstance(value, (list, tuple)):
        items = [py_literal(ctx, v) for v in value]
        inline = "[" + ", ".join(items) + "]"
        if indent + len(prefix) + len(inline) + len(suffix) <= width or not items:
            return inline
        pad = " " * (indent + 4)
        return "[\n" + "".join(f"{pad}{item},\n" for item in items) + " " * indent + "]"
    return repr(value)


def render(name: str, context: dict, override: Path | None = None) -> str:
    """Render one template by its path under templates/."""
    return environment(override).get_template(name).render(**context)
