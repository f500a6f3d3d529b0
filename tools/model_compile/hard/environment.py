"""What the runtime layers run on, found in a child process (the CLI never imports torch)."""

from __future__ import annotations

import json
import platform
import subprocess

from model_compile.hard.models import Environment

_PROBE = r"""
import json, platform
try:
    import torch
except Exception as exc:
    print(json.dumps({"python": platform.python_version(), "torch": None, "problem": f"{type(exc).__name__}: {exc}"}))
else:
    dev = {"type": "cpu", "count": 0, "name": None}
    if torch.cuda.is_available():
        dev = {"type": "rocm" if getattr(torch.version, "hip", None) else "cuda",
               "count": torch.cuda.device_count(), "name": torch.cuda.get_device_name(0)}
    elif getattr(torch, "npu", None) is not None and torch.npu.is_available():
        dev = {"type": "npu", "count": torch.npu.device_count(), "name": "npu"}
    elif getattr(torch, "xpu", None) is not None and torch.xpu.is_available():
        dev = {"type": "xpu", "count": torch.xpu.device_count(), "name": torch.xpu.get_device_name(0)}
    print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "device_type": dev["type"],
                      "device_count": dev["count"], "accelerator": dev["name"]}))
"""


def detect(python: str, env: dict[str, str], timeout_s: float = 120.0) -> Environment:
    """Ask `python` (the interpreter the tests will use) which torch and device it sees."""
    data: dict = {}
    problem = None
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=timeout_s, start_new_session=True
        )
        lines = proc.stdout.strip().splitlines()
        data = json.loads(lines[-1]) if lines else {}
        if not lines:
            problem = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    problem = problem or data.get("problem")
    device_type = data.get("device_type", "cpu" if data.get("torch") else "unknown")
    cpu_only = device_type in ("cpu", "unknown")
    accelerator = data.get("accelerator")
    return Environment(
        python=data.get("python") or platform.python_version(),
        executable=python,
        torch=data.get("torch"),
        device_type=device_type,
        device_count=int(data.get("device_count", 0) or 0),
        accelerator=accelerator,
        cpu_only=cpu_only,
        label="cpu-only" if cpu_only else f"accelerator:{accelerator or device_type}",
        problem=problem,
    )
