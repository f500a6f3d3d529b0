"""All-or-nothing writes of several files.

1. Check every target before touching any: a regular file (not a symlink,
   folder, FIFO or device) or absent, writable (mode bits, access, immutable
   flag), unchanged since the plan read it, its folder writable.
2. Stage every new content in a temp file next to its target, with the
   target's mode (and owner, where allowed), line endings and BOM.
3. Rename them all into place, keeping a hard-link backup of each original.
   On any failure every file already renamed is restored from its backup,
   every temp file and created folder removed, and `InputError` names the
   file: the tree is byte-identical to before.
"""

from __future__ import annotations

import codecs
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.errors import InputError

TMP_SUFFIX = ".mc-tmp"
BACKUP_SUFFIX = ".mc-bak"
_FS_IOC_GETFLAGS = 0x80086601  # Linux: inode flags (chattr)
_IMMUTABLE_OR_APPEND = 0x00000010 | 0x00000020


@dataclass
class Target:
    """One file to write: `old` is the text the plan was made from (None: absent)."""

    path: Path
    rel: str
    new: str
    old: str | None


@dataclass
class _Checked:
    target: Target
    exists: bool
    mode: int
    uid: int = -1
    gid: int = -1
    crlf: bool = False
    bom: bool = False
    missing_dirs: list[Path] = field(default_factory=list)


def _universal(data: bytes) -> str | None:
    """The text a plan is made from: BOM dropped, universal newlines (`guard.decode`)."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError:
        return None


def _flags_forbid_write(path: Path) -> bool:
    """The immutable or append-only attribute is set (Linux; False where unknown)."""
    try:
        import array
        import fcntl

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except (ImportError, OSError):
        return False
    try:
        buf = array.array("l", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf, True)
        return bool(buf[0] & _IMMUTABLE_OR_APPEND)
    except OSError:
        return False
    finally:
        os.close(fd)


def _refuse(rel: str, why: str) -> InputError:
    return InputError(f"cannot write {rel}: {why}; nothing was written")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check(target: Target) -> _Checked:
    """Everything that can be known before writing; InputError naming the file otherwise."""
    path, rel = target.path, target.rel
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _refuse(rel, exc.strerror or str(exc)) from None
    if st is None:
        if target.old is not None:
            raise _refuse(rel, "it was removed after the plan was made")
        missing: list[Path] = []
        parent = path.parent
        while not os.path.lexists(parent):
            missing.append(parent)
            parent = parent.parent
        if not parent.is_dir():
            raise _refuse(rel, f"{parent} is not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise _refuse(rel, f"folder {parent} is not writable")
        return _Checked(target, False, 0o666 & ~_umask(), missing_dirs=list(reversed(missing)))
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(rel, "it is a symlink (generate replaces regular files only)")
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise _refuse(rel, f"it is {kind}")
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o222:
        raise _refuse(rel, f"it is read-only (mode {mode:04o}); make it writable to let generate edit it")
    if not os.access(path, os.W_OK) or _flags_forbid_write(path):
        raise _refuse(rel, "it is not writable (permissions or the immutable/append-only attribute)")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise _refuse(rel, f"folder {path.parent} is not writable (the edit replaces the file by a rename)")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise _refuse(rel, exc.strerror or str(exc)) from None
    if target.old is None or _universal(data) != target.old:
        raise _refuse(rel, "it changed after the plan was made; rerun generate")
    crlf = data.count(b"\r\n") > data.count(b"\n") - data.count(b"\r\n")
    return _Checked(target, True, mode, st.st_uid, st.st_gid, crlf, data.startswith(codecs.BOM_UTF8))


def encode(text: str, crlf: bool, bom: bool = False) -> bytes:
    """UTF-8 bytes of planned text (LF inside), with the CRLF line endings and BOM the file had."""
    if crlf:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    return (codecs.BOM_UTF8 if bom else b"") + text.removeprefix("\ufeff").encode("utf-8")


def _stage(item: _Checked) -> str:
    path = item.target.path
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(encode(item.target.new, item.crlf, item.bom))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, item.mode)
        if item.exists and hasattr(os, "chown"):
            try:
                os.chown(tmp, item.uid, item.gid)
            except OSError:
                pass  # not allowed to give the file away: it keeps our owner
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _backup(path: Path) -> str:
    fd, backup = tempfile.mkstemp(prefix=f".{path.name}.", suffix=BACKUP_SUFFIX, dir=path.parent)
    os.close(fd)
    os.unlink(backup)
    try:
        os.link(path, backup)
    except OSError:
        shutil.copy2(path, backup)
    return backup


def write_all(targets: list[Target]) -> list[str]:
    """Write every target or none (see the module docstring); the rel paths written."""
    checked = [check(t) for t in targets]
    created: list[Path] = []
    staged: dict[int, str] = {}
    done: list[tuple[_Checked, str | None]] = []
    current = checked[0].target.rel if checked else ""
    try:
        for i, item in enumerate(checked):
            current = item.target.rel
            for folder in item.missing_dirs:
                if not folder.exists():
                    folder.mkdir()
                    created.append(folder)
            staged[i] = _stage(item)
        for i, item in enumerate(checked):
            current = item.target.rel
            backup = _backup(item.target.path) if item.exists else None
            done.append((item, backup))
            os.replace(staged[i], item.target.path)
            del staged[i]
    except (OSError, MemoryError) as exc:
        problems = _rollback(done, staged, created)
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        tail = "every file was restored" if not problems else "RESTORE FAILED for " + ", ".join(problems)
        raise InputError(f"cannot write {current}: {why}; {tail}, nothing was written") from None
    for _, backup in done:
        if backup is not None:
            Path(backup).unlink(missing_ok=True)
    return [item.target.rel for item in checked]


def _rollback(done: list[tuple[_Checked, str | None]], staged: dict[int, str], created: list[Path]) -> list[str]:
    """Undo a partial write; the files that could not be restored (none, normally)."""
    problems: list[str] = []
    for item, backup in reversed(done):
        try:
            if backup is not None:
                os.replace(backup, item.target.path)
                # rename() between two links of one file (the rename that failed) does nothing
                Path(backup).unlink(missing_ok=True)
            else:
                item.target.path.unlink(missing_ok=True)
        except OSError:
            problems.append(item.target.rel + (f" (original kept in {backup})" if backup else ""))
    for tmp in staged.values():
        Path(tmp).unlink(missing_ok=True)
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:
            pass
    return problems
