"""Whose work an eager operator is, and why it ran outside a compiled graph: read off the Python stack.

An operator that runs outside every compiled graph is attributed to the innermost module whose call is on the
stack (the `self` of `nn.Module._call_impl` / `_wrapped_call_impl`, a frame every module call passes through,
however its `forward` is decorated or replaced), and to the innermost frame of the user's code (the recipe, the
repository's kit, or a library such as transformers; never torch or this tool). What that user frame is to
dynamo says why the operator ran eager:

- `gap`: the frame's code is one dynamo wrote (`output_codes`): the frame compiled, and this operator ran
  between its graphs, at a graph break;
- `skipped`: dynamo saw the frame's own code (`input_codes`) and ran it as it is: it skipped the frame (a graph
  break it could not resume from, a break in a loop, the recompile limit, a skip rule);
- `untraced`: dynamo never saw the frame: compile was off around it (`torch.compiler.disable`, a checkpointed
  call dynamo could not take, or no compiled call on the stack at all).

Markers from the whole stack complete the picture: a `torch.compiler.disable` wrapper (and the function it
disables), torch's activation checkpointing, and the distributed wrap's hooks (their operators are the wrap's,
not the model's work, and are counted apart).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

_SEP = os.sep
_STDLIB = sysconfig.get_paths().get("stdlib", "") or ""
_TOOL = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_MODULE_FILE = _SEP.join(("torch", "nn", "modules", "module.py"))
_CALLS = ("_call_impl", "_wrapped_call_impl")  # every module call passes through them
_CHECKPOINT = _SEP.join(("torch", "utils", "checkpoint.py"))
_DISTRIBUTED = _SEP.join(("torch", "distributed", ""))
_EVAL_FRAME = _SEP.join(("torch", "_dynamo", "eval_frame.py"))
_COMPILE_ENTRIES = ("compile_wrapper",)  # the entry of a torch.compile call (eval_frame.py)


_ROOT: list[str] = []


def _torch_root() -> str:
    if not _ROOT:
        import torch

        _ROOT.append(os.path.dirname(os.path.abspath(torch.__file__)) + _SEP)
    return _ROOT[0]


def is_user_file(path: str) -> bool:
    """Code of the recipe, the repository or a library (transformers...): not torch, not this tool, not stdlib."""
    if not path or path.startswith("<"):
        return False
    if path.startswith(_torch_root()) or path.startswith(_TOOL + _SEP):
        return False
    return not (_STDLIB and path.startswith(_STDLIB + _SEP) and "site-packages" not in path)


class Attribution:
    """Classifies eager operators from the stack; caches what it learnt per (module, user code)."""

    def __init__(self, paths: dict[int, str]) -> None:
        self.paths = paths  # id(module) -> its dotted path in the unwrapped model ("" for the model)
        # keyed by id(code), the code kept beside its answer (so the id is not reused): a code object dynamo
        # wrote may hold a dict among its constants, and then it does not hash
        self._user: dict[int, tuple[Any, bool]] = {}  # is user code
        self._kinds: dict[int, tuple[Any, str]] = {}
        self._last: tuple[Any, tuple[str | None, Any, Any, bool]] | None = None

    def user(self, code: Any) -> bool:
        hit = self._user.get(id(code))
        if hit is None:
            hit = self._user[id(code)] = (code, is_user_file(code.co_filename))
        return hit[1]

    def kind(self, code: Any) -> str:
        """What the user frame's code is to dynamo: gap, skipped or untraced."""
        hit = self._kinds.get(id(code))
        known = hit[1] if hit is not None else None
        if known is None:
            from torch._dynamo.convert_frame import input_codes, output_codes

            if code in output_codes:
                known = "gap"
            elif code in input_codes:
                known = "skipped"
            else:
                known = "untraced"
            if known != "untraced":  # untraced code may be seen by dynamo later in the step
                self._kinds[id(code)] = (code, known)
        return known

    def owner(self, frame: Any) -> tuple[str | None, Any, Any, bool]:
        """(innermost module's path or None, innermost user frame, its code, a wrap hook on the way) for an
        operator called from `frame`. A torch module's own code (`nn.Linear.forward`) is no user frame: the user
        frame is then the one that called it (`self.q_proj(x)` in the model's file). Consecutive operators of
        one frame share the answer (the frame is held while cached, so its identity cannot be reused)."""
        if self._last is not None and self._last[0] is frame:
            return self._last[1]
        start = frame
        path: str | None = None
        user, wrap = None, False
        while frame is not None and (path is None or user is None):
            code = frame.f_code
            if path is None and code.co_name in _CALLS and code.co_filename.endswith(_MODULE_FILE):
                path = self.paths.get(id(frame.f_locals.get("self")))
            elif user is None:
                if self.user(code):
                    user = frame
                elif path is None and _DISTRIBUTED in code.co_filename:
                    wrap = True
            frame = frame.f_back
        found = (path, user, user.f_code if user is not None else None, wrap)
        self._last = (start, found)
        return found

    def forget(self) -> None:
        """Drop the cached frame (at the end of a measured micro-step: nothing of it is held after)."""
        self._last = None

    def markers(self, frame: Any) -> list[str]:
        """What the whole stack says about compile around an operator, innermost first:

        - `disable:<fn (file:line)>`: a torch.compiler.disable wrapper of user code (compile off under it);
        - `checkpoint:<file:line>`: torch's activation checkpointing (it runs with compile off), called there;
        - `skipped:<fn (file:line)>`: a user frame or module call dynamo had seen and ran as it is this time
          (a skip; when the recompile limit was hit there, compile is off for every call under it);
        - `entry`: a torch.compile entry (compile on from there down, unless a marker inside turns it off).
        """
        from torch._dynamo.convert_frame import input_codes, output_codes

        out: list[str] = []
        checkpoint = False  # inside torch's checkpoint frames: the next user frame out is the one that called it
        while frame is not None:
            code = frame.f_code
            path = code.co_filename
            if checkpoint and self.user(code):
                out.append(f"checkpoint:{path}:{frame.f_lineno}")
                checkpoint = False
            if path.endswith(_CHECKPOINT):
                checkpoint = True
            elif path.endswith(_EVAL_FRAME):
                fn = _disabled_function(frame)
                if fn is not None:
                    out.append("disable:" + fn)
                elif code.co_name in _COMPILE_ENTRIES:
                    out.append("entry")
            elif (self.user(code) or code.co_name in _CALLS) and code in input_codes and code not in output_codes:
                out.append(f"skipped:{code.co_name} ({path}:{code.co_firstlineno})")
            frame = frame.f_back
        if checkpoint:
            out.append("checkpoint:?")
        return out[:40]


def _disabled_function(frame: Any) -> str | None:
    """The user function a `torch.compiler.disable` wrapper frame runs, as `qualname (file:line)`; None for any
    other dynamo wrapper, and for torch's own disabled functions (checkpointing is named by its own marker)."""
    local = frame.f_locals
    if type(local.get("self")).__name__ != "DisableContext":
        return None
    fn = local.get("fn")
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return None
    return f"{getattr(target, '__qualname__', code.co_name)} ({code.co_filename}:{code.co_firstlineno})"


def current_frame() -> Any:
    """The caller's caller frame (the operator's call site, seen from a dispatch mode's handler)."""
    return sys._getframe(2)
