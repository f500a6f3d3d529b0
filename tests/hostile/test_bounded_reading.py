"""Bounded reading: regular files only, symlinks inside the repository only, a size cap,
and every file that cannot be read reported as MC000 (never a silent skip)."""

from __future__ import annotations

import json
import os

import pytest
from hostile_helpers import ENGINE, RECIPE, cli, scaffold_repo, time_limit

from model_compile.discover import tree as tree_mod
from model_compile.discover.tree import DiskTree, read_regular


def _mc000(root) -> dict[str, str]:
    code, out, err = cli("validate", str(root), "--format", "json")
    assert code == 1, err
    data = json.loads(out)
    return {f["file"]: f["message"] for r in data["recipes"] for f in r["findings"] if f["rule"] == "MC000"}


def test_read_regular_refuses_what_would_block_or_never_end(tmp_path):
    fifo = tmp_path / "f.py"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.py"
    zero.symlink_to("/dev/zero")
    inside = tmp_path / "inside.py"
    (tmp_path / "real.py").write_text("x = 1\n")
    inside.symlink_to(tmp_path / "real.py")
    with time_limit(10):
        assert read_regular(fifo, tmp_path) == (None, "a FIFO, not a regular file")
        data, problem = read_regular(zero, tmp_path)
        assert data is None and "outside the repository" in problem
        assert read_regular(inside, tmp_path) == (b"x = 1\n", None)
        assert read_regular(inside, None)[1].startswith("a symlink")  # no boundary: never followed
        assert read_regular(tmp_path / "absent.py", tmp_path) == (None, "missing")
        assert read_regular(tmp_path, tmp_path)[1] == "a directory, not a regular file"
        assert "file too large" in read_regular(tmp_path / "real.py", tmp_path, max_bytes=3)[1]


def test_a_listed_file_replaced_before_it_is_read_is_judged_as_it_is_now(tmp_path):
    """The listing's entry types spare a stat per file; a file swapped for a FIFO, a link or a folder
    between the listing and the read is still refused the way read_regular refuses it."""
    names = ["fifo.py", "link.py", "folder.py", "gone.py", "big.py", "kept.py"]
    for name in names:
        (tmp_path / name).write_text("x = 1\n")
    tree = DiskTree(tmp_path, max_file_bytes=100)
    assert set(names) <= set(tree.files())
    for name in names[:5]:
        (tmp_path / name).unlink()
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "link.py").symlink_to("/dev/zero")
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "big.py").write_text("x = 1\n" * 100)
    with time_limit(10):
        assert tree.read_bytes("fifo.py") is None and tree.problem("fifo.py") == "a FIFO, not a regular file"
        assert tree.read_bytes("link.py") is None and "outside the repository" in tree.problem("link.py")
        assert tree.read_bytes("folder.py") is None and tree.problem("folder.py") == "a directory, not a regular file"
        assert tree.read_bytes("gone.py") is None and tree.problem("gone.py") is None  # missing
        assert tree.read_bytes("big.py") is None and "file too large" in tree.problem("big.py")
        assert tree.read_bytes("kept.py") == b"x = 1\n"


def test_a_listed_file_is_read_whole_whatever_its_size_said(tmp_path, monkeypatch):
    """A listed file is read in one call of its fstat size plus one byte; a file whose size was
    wrong (grown, shrunk, or a size-0 file with content) is still read to its end, within the cap."""
    sizes = {"empty.py": 0, "one.py": 1, "exact.py": 100, "page.py": 4096}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
    tree = DiskTree(tmp_path, max_file_bytes=100)
    tree.files()
    for name, size in sizes.items():
        data = tree.read_bytes(name)
        assert (data, tree.problem(name)) == ((b"x" * size, None) if size <= 100 else (None, tree.problem(name)))
    assert "file too large" in tree.problem("page.py")

    real_fstat = os.fstat
    for told, actual in ((0, 40), (10, 40), (60, 40), (40, 140)):  # what fstat says, what the file holds
        (tmp_path / "odd.py").write_bytes(b"y" * actual)

        def fstat(fd, told=told):
            st = real_fstat(fd)
            return os.stat_result(
                (st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, told, *st[7:10])
            )

        monkeypatch.setattr(tree_mod.os, "fstat", fstat)
        tree = DiskTree(tmp_path, max_file_bytes=100)
        tree.files()
        data = tree.read_bytes("odd.py")
        monkeypatch.setattr(tree_mod.os, "fstat", real_fstat)
        if actual <= 100:
            assert data == b"y" * actual, (told, actual)
        else:  # grown past the cap since fstat: refused, never read without bound
            assert data is None and "file too large" in tree.problem("odd.py"), (told, actual)


def test_fifo_device_link_and_outside_link_are_mc000_not_hangs(tmp_path):
    root = scaffold_repo(tmp_path / "repo", use_git=False)
    engine_dir = root / RECIPE / "engine"
    os.mkfifo(engine_dir / "fifo.py")
    os.mkfifo(root / RECIPE / "configs" / "stage.yaml")
    (engine_dir / "zero.py").symlink_to("/dev/zero")
    (engine_dir / "passwd.py").symlink_to("/etc/passwd")
    (engine_dir / "dangling.py").symlink_to(root / "nowhere.py")
    with time_limit(30):
        found = _mc000(root)
    assert "FIFO" in found[f"{RECIPE}/engine/fifo.py"]
    assert "FIFO" in found[f"{RECIPE}/configs/stage.yaml"]
    assert "symlink to /dev/zero, outside the repository" in found[f"{RECIPE}/engine/zero.py"]
    assert "outside the repository" in found[f"{RECIPE}/engine/passwd.py"]
    assert "broken symlink" in found[f"{RECIPE}/engine/dangling.py"]


def test_symlink_inside_the_repository_is_read(tmp_path):
    root = scaffold_repo(tmp_path / "repo", use_git=False)
    (root / "shared").mkdir()
    (root / "shared" / "helpers.py").write_text("def helper():\n    return 1\n")
    (root / RECIPE / "engine" / "helpers.py").symlink_to(root / "shared" / "helpers.py")
    code, out, err = cli("validate", str(root), "--format", "json")
    assert code == 0, out


def test_size_cap_is_a_setting_and_a_finding(tmp_path):
    root = scaffold_repo(tmp_path / "repo", use_git=False)
    (root / "pyproject.toml").write_text("[tool.model-compile]\nmax-file-bytes = 2000\n")
    big = root / RECIPE / "model" / "big.py"
    big.write_text("x = 1\n" * 1000)
    found = _mc000(root)
    assert "file too large, skipped (6,000 bytes > max-file-bytes 2,000)" in found[f"{RECIPE}/model/big.py"]


def test_unreadable_engine_and_schema_are_findings(tmp_path, monkeypatch):
    root = scaffold_repo(tmp_path / "repo", use_git=False)
    denied = {str(root / ENGINE), str(root / RECIPE / "configs" / "schema.py")}
    real_open = os.open

    def fake_open(path, flags, *args, **kwargs):  # as root, chmod 000 does not stop a read
        if str(path) in denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(tree_mod.os, "open", fake_open)
    found = _mc000(root)
    assert "Permission denied" in found[ENGINE]
    assert "Permission denied" in found[f"{RECIPE}/configs/schema.py"]


def test_unlistable_recipe_folder_stays_in_the_list(tmp_path, monkeypatch):
    root = scaffold_repo(tmp_path / "repo", use_git=False)
    locked = str(root / RECIPE)
    real_scandir = os.scandir

    def fake_scandir(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", fake_scandir)
    assert DiskTree(root).unlisted() == {RECIPE: "Permission denied"}
    code, out, err = cli("validate", str(root), "--format", "json")
    data = json.loads(out)
    assert code == 1 and [r["name"] for r in data["recipes"]] == ["example"]
    (finding,) = data["recipes"][0]["findings"]
    assert finding["rule"] == "MC000" and "Permission denied" in finding["message"]


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"), reason="needs root to drop to nobody")
def test_really_unreadable_files_as_another_user():
    """The same with real permissions: `nobody` validates a repo whose engine it may not read."""
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from hostile_helpers import ROOT

    base = Path(tempfile.mkdtemp(prefix="mc-nobody-"))  # pytest's tmp_path is private to root
    try:
        root = scaffold_repo(base / "repo", use_git=False)
        for dirpath, _dirnames, filenames in os.walk(base):
            os.chmod(dirpath, 0o755)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
        os.chmod(root / ENGINE, 0o000)
        proc = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-m",
                "model_compile.cli",
                "validate",
                str(root),
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
            env={"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin"},
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if proc.returncode not in (0, 1) and "model-compile" not in proc.stderr:
        pytest.skip(f"nobody cannot run this interpreter: {proc.stderr.strip()[:120]}")
    assert proc.returncode == 1, proc.stderr
    messages = [f["message"] for r in json.loads(proc.stdout)["recipes"] for f in r["findings"] if f["rule"] == "MC000"]
    assert any("Permission denied" in m for m in messages), messages
