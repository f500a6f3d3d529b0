"""Preflight: one short child process in the chosen interpreter, before any layer runs.

It answers, without running a test and without importing the recipe: is
pytest there, which torch and which devices, and are the third-party modules
the recipe's engine, schema and tests import (and, transitively, the
repository modules they import) installed there. The import graph is read
statically here; the child only looks the top-level names up
(`importlib.util.find_spec`, which runs no module code) - importing the
engine would cost what the structure test costs again. torch is imported
only when the machine has an accelerator device node (/dev/nvidia*,
/dev/kfd, /dev/davinci*, /dev/dri/renderD*, /dev/accel*): without one no
torch build can see an accelerator, so the machine is CPU-only. A missing
third-party module is an environment problem, reported with its fix; it is
never a recipe failure.
"""

from __future__ import annotations

import ast
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.hard.env.interpreter import Interpreter
from model_compile.hard.models import Environment

TEST_FILES = ("conftest.py", "test_structure.py", "test_smoke.py")

# Runs in the target interpreter (any Python >= 3.8, nothing but the stdlib imported up front).
_SCRIPT = r"""
import glob, importlib.util, json, os, platform, sys
spec = json.loads(sys.argv[1])
for p in reversed(spec["sys_path"]):
    if p not in sys.path:
        sys.path.insert(0, p)
out = {"python": platform.python_version(), "executable": sys.executable, "prefix": sys.prefix,
       "pytest": None, "torch": None, "device": None, "imports": [], "model_compile": None}
def version(dist):
    try:
        from importlib import metadata
        return metadata.version(dist)
    except Exception:
        return None
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False
if found("pytest"):
    out["pytest"] = version("pytest") or "unknown version"
else:
    out["pytest_error"] = "ModuleNotFoundError: No module named 'pytest'"
nodes = [p for pat in ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/davinci[0-9]*", "/dev/dri/renderD*", "/dev/accel*")
         for p in glob.glob(pat)]
if not found("torch"):
    out["torch_error"] = "ModuleNotFoundError: No module named 'torch'"
elif not nodes:
    out["torch"] = version("torch") or "unknown version"
    try:  # torch/version.py holds the full version (with its build tag, e.g. +cu130): read, not imported
        import re
        origin = importlib.util.find_spec("torch").origin
        with open(os.path.join(os.path.dirname(origin), "version.py"), encoding="utf-8") as fh:
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", fh.read(), re.M)
        if m:
            out["torch"] = m.group(1)
    except Exception:
        pass
    out["device"] = {"type": "cpu", "count": 0, "name": None,
                     "how": "no accelerator device node (/dev/nvidia*, /dev/kfd, /dev/davinci*, /dev/dri, /dev/accel)"}
else:
    try:
        import torch
        out["torch"] = torch.__version__
        dev = {"type": "cpu", "count": 0, "name": None, "how": "torch"}
        if torch.cuda.is_available():
            dev = {"type": "rocm" if getattr(torch.version, "hip", None) else "cuda",
                   "count": torch.cuda.device_count(), "name": torch.cuda.get_device_name(0), "how": "torch"}
        elif getattr(torch, "npu", None) is not None and torch.npu.is_available():
            dev = {"type": "npu", "count": torch.npu.device_count(), "name": "npu", "how": "torch"}
        elif getattr(torch, "xpu", None) is not None and torch.xpu.is_available():
            dev = {"type": "xpu", "count": torch.xpu.device_count(), "name": torch.xpu.get_device_name(0), "how": "torch"}
        out["device"] = dev
    except Exception as exc:
        out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
try:
    mc = importlib.util.find_spec("model_compile")
    if mc is not None and mc.origin:
        runtime = os.path.join(os.path.dirname(mc.origin), "runtime", "__init__.py")
        if os.path.isfile(runtime):
            out["model_compile"] = runtime
except Exception:
    pass
for name in spec["modules"]:
    item = {"module": name, "ok": found(name)}
    if not item["ok"]:
        item.update(kind="import", missing=name, error="ModuleNotFoundError: No module named %r" % name)
    out["imports"].append(item)
print("MODEL_COMPILE_PREFLIGHT " + json.dumps(out))
"""
_MARK = "MODEL_COMPILE_PREFLIGHT "


@dataclass
class Problem:
    """Something the environment lacks, and how to get it."""

    missing: str
    fix: str
    package: str | None = None  # what `pip install` would take (a module name; a distribution may differ)


@dataclass
class Preflight:
    """What the interpreter has, and what stops the runtime layers."""

    environment: Environment
    problems: list[Problem] = field(default_factory=list)
    imports: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # import errors that are the recipe's own business
    model_compile_file: str | None = None  # where `model_compile.runtime` imports from there, if anywhere
    pip: str = ""  # `<interpreter> -m pip install`
    alternatives: list[str] = field(default_factory=list)  # uv sync, the repo's own env, --python

    @property
    def ok(self) -> bool:
        """True when the layers can run."""
        return not self.problems

    def reason(self, interp: Interpreter) -> str:
        """`environment: <what is missing> in <interpreter>`."""
        return f"environment: {'; '.join(p.missing for p in self.problems)} in {interp.path}"

    def lines(self) -> list[str]:
        """For the report: each missing piece, the fix, and import problems that are the recipe's own."""
        out = [f"missing: {p.missing}" for p in self.problems]
        if self.problems:
            out.append(f"fix: {self.fixes()}")
        return out + [f"note: {n}" for n in self.notes]

    def fixes(self) -> str:
        """The fixes, one line: one `pip install` for every missing package, or the repo's own way."""
        packages = [p.package for p in self.problems if p.package]
        other = [p.fix for p in self.problems if not p.package]
        if packages and self.pip:
            other.insert(0, f"{self.pip} {' '.join(dict.fromkeys(packages))}")
        return "; or ".join(dict.fromkeys(other + self.alternatives))


def import_name(path: Path) -> tuple[str, Path]:
    """(dotted module name, sys.path entry) for a file, as pytest's default `prepend` import mode finds them."""
    parts = [path.stem] if path.name != "__init__.py" else []
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts), folder


def _imports_of(tree: ast.Module) -> list[tuple[int, str]]:
    """(level, module) of every import that runs at import time: module level, in top-level `if`/`try`
    blocks, but not under `if TYPE_CHECKING:` nor in a `try` that handles ImportError (optional imports)."""
    out: list[tuple[int, str]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.extend((0, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                base = node.module or ""
                out.append((node.level, base))
                if node.level and not base:  # `from . import x`: x may be a module
                    out.extend((node.level, a.name) for a in node.names)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                handled = " ".join(ast.unparse(h.type) for h in node.handlers if h.type is not None)
                if "ImportError" not in handled and "ModuleNotFoundError" not in handled and "Exception" not in handled:
                    visit(node.body)

    visit(tree.body)
    return out


def _repo_file(module: str, paths: list[str]) -> Path | None:
    rel = Path(*module.split("."))
    for p in paths:
        for candidate in (Path(p) / rel.with_suffix(".py"), Path(p) / rel / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


MAX_SCANNED = 400  # repository modules read while following imports


def modules_to_check(recipe_root: Path, repo_root: Path) -> tuple[dict[str, str], list[str]]:
    """({third-party top-level module: repository file that imports it}, sys.path entries).

    Starts from the recipe's engine and schema modules and what its tests import, and follows the
    imports that resolve to repository files (statically, bounded); every other top-level name is one
    the interpreter must have."""
    modules: dict[str, str] = {}
    paths: list[str] = [str(repo_root)]
    files = [recipe_root / "configs" / "schema.py", *sorted((recipe_root / "engine").glob("*_engine.py"))]
    if len(files) == 1:
        files += [p for p in sorted((recipe_root / "engine").glob("*.py")) if p.name != "__init__.py"]
    files = [f for f in files if f.is_file()]
    for file in files:
        _, base = import_name(file)
        if str(base) not in paths:
            paths.append(str(base))
    files += [recipe_root / "tests" / t for t in TEST_FILES if (recipe_root / "tests" / t).is_file()]
    seen: set[Path] = set()
    queue = list(files)
    while queue and len(seen) < MAX_SCANNED:
        path = queue.pop(0).resolve()
        if path in seen:
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        package = import_name(path)[0].split(".")
        if path.name != "__init__.py":
            package = package[:-1]
        for level, name in _imports_of(tree):
            if level:
                anchor = package[: len(package) - (level - 1)] if level > 1 else package
                name = ".".join([*anchor, name] if name else anchor)
            if not name:
                continue
            target = _repo_file(name, paths)
            if target is not None:
                queue.append(target)
                parent = _repo_file(name.rsplit(".", 1)[0], paths) if "." in name else None
                if parent is not None:
                    queue.append(parent)
                continue
            top = name.split(".")[0]
            if level == 0 and not _is_repo_module(top, repo_root, paths):
                rel = path.relative_to(repo_root.resolve()) if path.is_relative_to(repo_root.resolve()) else path
                modules.setdefault(top, str(rel))
    return modules, paths


def _is_repo_module(name: str | None, repo_root: Path, paths: list[str]) -> bool:
    if not name:
        return False
    top = name.split(".")[0]
    return any((Path(p) / top).is_dir() or (Path(p) / f"{top}.py").is_file() for p in [str(repo_root), *paths])


def run(
    interp: Interpreter,
    recipe_root: Path,
    repo_root: Path,
    env: dict[str, str],
    timeout_s: float = 180.0,
) -> Preflight:
    """Ask `interp` what it has; one subprocess, run from the repository root."""
    modules, paths = modules_to_check(recipe_root, repo_root)
    spec = json.dumps({"modules": list(modules), "sys_path": paths})
    data: dict = {}
    failure = None
    try:
        proc = subprocess.run(
            [interp.path, "-c", _SCRIPT, spec],
            cwd=repo_root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)), None)
        if line is None:
            failure = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}, no output"])[-1]
        else:
            data = json.loads(line[len(_MARK) :])
    except subprocess.TimeoutExpired:
        failure = f"the interpreter did not answer within {timeout_s:g} s"
    except (OSError, ValueError) as exc:
        failure = f"{type(exc).__name__}: {exc}"
    return _interpret(data, failure, interp, repo_root, paths, modules)


def _interpret(
    data: dict, failure: str | None, interp: Interpreter, repo_root: Path, paths: list[str], origins: dict[str, str]
) -> Preflight:
    dev = data.get("device") or {}
    device_type = dev.get("type") or ("cpu" if data.get("torch") else "unknown")
    cpu_only = device_type in ("cpu", "unknown")
    environment = Environment(
        python=data.get("python") or "unknown",
        executable=interp.path,
        interpreter_reason=interp.reason,
        pytest=data.get("pytest"),
        torch=data.get("torch"),
        device_type=device_type,
        device_count=int(dev.get("count") or 0),
        accelerator=dev.get("name"),
        cpu_only=cpu_only,
        label="cpu-only" if cpu_only else f"accelerator:{dev.get('name') or device_type}",
        problem=failure or data.get("torch_error"),
        device_check=str(dev.get("how") or ""),
    )
    result = Preflight(environment, imports=list(data.get("imports", [])), model_compile_file=data.get("model_compile"))
    if failure:
        result.problems.append(Problem(f"a working Python ({failure})", "--python PATH to an interpreter that runs"))
        return result
    result.pip = f"{interp.path} -m pip install"
    result.alternatives = _alternatives(repo_root, interp)
    if not data.get("pytest"):
        result.problems.append(Problem("pytest", result.pip + " pytest", "pytest"))
    if not data.get("torch"):
        why = data.get("torch_error", "")
        result.problems.append(Problem("torch" + (f" ({why})" if "No module" not in why else ""), result.pip, "torch"))
    for item in result.imports:
        if item.get("ok"):
            continue
        missing = item.get("missing")
        if item.get("kind") == "import" and missing and not _is_repo_module(missing, repo_root, paths):
            top = missing.split(".")[0]
            if any(p.package == top for p in result.problems):
                continue
            result.problems.append(
                Problem(f"{top} (imported by {origins.get(item['module'], item['module'])})", "", top)
            )
        else:
            result.notes.append(f"import {item['module']}: {item.get('error')}")
    return result


def _alternatives(repo_root: Path, interp: Interpreter) -> list[str]:
    """Other ways out than pip: the repository's own lock file, its own environment, another interpreter."""
    out: list[str] = []
    if (repo_root / "uv.lock").is_file():
        out.append(f"cd {repo_root} && uv sync (installs the locked dependencies into {repo_root}/.venv)")
    own = next(
        (repo_root / d / "bin" / "python" for d in (".venv", "venv") if (repo_root / d / "bin" / "python").is_file()),
        None,
    )
    if own is not None and interp.source != "repo":
        out.append(f"drop --python to use the repository's own {own}")
    out.append("--python PATH to an environment that has them")
    return out
