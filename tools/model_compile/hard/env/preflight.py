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

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.hard.env import lock
from model_compile.hard.env.imports import _is_repo_module, walk
from model_compile.hard.env.interpreter import Interpreter
from model_compile.hard.models import Environment

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
out["later"] = [name for name in spec.get("later", []) if not found(name)]
# what the distributions the run imports declare and this interpreter lacks (as `pip check` would say)
out["unmet"] = []
try:
    import re
    from importlib import metadata
    owners = metadata.packages_distributions()
    try:
        from packaging.requirements import Requirement
    except Exception:
        Requirement = None
    seen = set()
    for name in spec["modules"]:
        for dist_name in owners.get(name, []):
            if dist_name in seen:
                continue
            seen.add(dist_name)
            try:
                dist = metadata.distribution(dist_name)
            except Exception:
                continue
            for text in dist.requires or []:
                if Requirement is not None:
                    try:
                        req = Requirement(text)
                        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                            continue
                        wanted = req.name
                    except Exception:
                        continue
                elif ";" in text:
                    continue
                else:
                    wanted = re.split(r"[ <>=!~\[(]", text.strip(), 1)[0]
                try:
                    metadata.version(wanted)
                except metadata.PackageNotFoundError:
                    out["unmet"].append({"package": wanted, "by": "%s %s" % (dist_name, dist.version)})
except Exception:
    pass
print("MODEL_COMPILE_PREFLIGHT " + json.dumps(out))
"""
_MARK = "MODEL_COMPILE_PREFLIGHT "


@dataclass
class Problem:
    """Something the environment lacks, and how to get it."""

    missing: str
    fix: str
    package: str | None = None  # what `pip install` would take (a module name; a distribution may differ)
    locked: str | None = None  # the repository's pin of it (`uv.lock: 1.2.3`), None when it declares none


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
    later: list[Problem] = field(default_factory=list)  # imported inside functions or by vendored model code
    sync: str = ""  # the repository's own sync command, for what its lock pins

    @property
    def ok(self) -> bool:
        """True when the layers can run."""
        return not self.problems

    def reason(self, interp: Interpreter) -> str:
        """`environment: <every module missing, each with the lock's word> in <interpreter>`, in one line."""
        return f"environment: {self.missing_line()} in {interp.path}"

    def missing_line(self, with_later: bool = True) -> str:
        """Every module the run needs that the interpreter lacks, each with what the repository's pins say."""
        items = [*self.problems, *(self.later if with_later else [])]
        return "; ".join(dict.fromkeys(f"{p.missing} [{p.locked or 'not declared by the repository'}]" for p in items))

    def lines(self) -> list[str]:
        """For the report: each missing piece, the fix, and import problems that are the recipe's own."""
        out = [f"missing: {p.missing} [{p.locked or 'not declared by the repository'}]" for p in self.problems]
        out += [f"missing where the run reaches it: {p.missing} [{p.locked or 'not declared'}]" for p in self.later]
        if self.problems or self.later:
            out.append(f"fix: {self.fixes()}")
        return out + [f"note: {n}" for n in self.notes]

    def fixes(self, with_later: bool = True) -> str:
        """The fixes, one line: the repository's sync for what its lock pins, one `pip install` for the rest (the
        repository does not declare them), or another interpreter."""
        items = [*self.problems, *(self.later if with_later else [])]
        pinned = [str(p.package) for p in items if p.package and p.locked]
        undeclared = [str(p.package) for p in items if p.package and not p.locked]
        parts: list[str] = []
        if pinned and self.sync:
            parts.append(f"{self.sync} (the lock pins {', '.join(dict.fromkeys(pinned))})")
        else:
            undeclared = pinned + undeclared
        if undeclared and self.pip:
            parts.append(f"{self.pip} {' '.join(dict.fromkeys(undeclared))}")
        parts += [p.fix for p in items if not p.package]
        parts += [a for a in self.alternatives if not (self.sync and a.startswith(self.sync))]
        return "; or ".join(dict.fromkeys(parts))


def run(
    interp: Interpreter,
    recipe_root: Path,
    repo_root: Path,
    env: dict[str, str],
    timeout_s: float = 180.0,
) -> Preflight:
    """Ask `interp` what it has; one subprocess, run from the repository root."""
    from model_compile.runtime.rehearsal.models.names import vendored_configs

    vendored = [p for c in vendored_configs(recipe_root, repo_root) for p in sorted(Path(c).parent.glob("*.py"))]
    modules, later, paths = walk(recipe_root, repo_root, list(dict.fromkeys(vendored)))
    spec = json.dumps({"modules": list(modules), "later": list(later), "sys_path": paths})
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
    return _interpret(data, failure, interp, repo_root, paths, {**later, **modules})


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
    pins = lock.pins(repo_root)
    if (repo_root / "uv.lock").is_file():
        result.sync = f"cd {repo_root} && uv sync"

    def locked(package: str) -> str | None:
        pin = pins.get(lock.normalise(package))
        return f"{pin[1]} pins {pin[0]}" if pin else None

    if not data.get("pytest"):
        result.problems.append(Problem("pytest", result.pip + " pytest", "pytest", locked("pytest")))
    if not data.get("torch"):
        why = data.get("torch_error", "")
        result.problems.append(
            Problem("torch" + (f" ({why})" if "No module" not in why else ""), result.pip, "torch", locked("torch"))
        )
    for item in result.imports:
        if item.get("ok"):
            continue
        missing = item.get("missing")
        if item.get("kind") == "import" and missing and not _is_repo_module(missing, repo_root, paths):
            top = missing.split(".")[0]
            if any(p.package == top for p in result.problems):
                continue
            result.problems.append(
                Problem(f"{top} (imported by {origins.get(item['module'], item['module'])})", "", top, locked(top))
            )
        else:
            result.notes.append(f"import {item['module']}: {item.get('error')}")
    for unmet in data.get("unmet") or []:  # declared by a distribution the run imports: needed, as pip check says
        name = str(unmet.get("package"))
        if not any(lock.normalise(str(p.package)) == lock.normalise(name) for p in result.problems):
            result.problems.append(Problem(f"{name} (required by {unmet.get('by')})", "", name, locked(name)))
    for top in data.get("later") or []:  # where the run reaches it: inside a function, in vendored model code
        if not _is_repo_module(top, repo_root, paths) and not any(p.package == top for p in result.problems):
            result.later.append(Problem(f"{top} (imported by {origins.get(top, top)})", "", top, locked(top)))
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
