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
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(name: str, context: dict, override: Path | None = None) -> str:
    """Render one template by its path under templates/."""
    return environment(override).get_template(name).render(**context)
