"""`generate --write` is all-or-nothing: every target checked first, every failure rolled back,
line endings and modes kept."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hostile_helpers import DEMO, assert_one_line_error, cli, commit_all, leftovers, tree_state

from model_compile.generate.writing import transaction
from model_compile.generate.writing.transaction import Target

RECIPE = "recipes/vlm_plain"
ENGINE = f"{RECIPE}/engine/vlm_plain_engine.py"
SCHEMA = f"{RECIPE}/configs/schema.py"
STAGE = f"{RECIPE}/configs/train.yaml"
ASSERTS = f"{RECIPE}/tests/skills/model-compile/asserts.py"


@pytest.fixture
def demo(tmp_path):
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root)
    commit_all(root)
    return root


def _write(root, *extra):
    return cli("generate", str(root / RECIPE), "--write", "--force", *extra)


def test_every_rename_failure_restores_the_tree(demo, monkeypatch):
    """Fail the n-th rename for every n: the tree is byte-identical and no temp file is left."""
    before = tree_state(demo)
    real_replace = os.replace
    n_targets = None
    for fail_at in range(1, 10):
        calls = {"n": 0}

        def flaky(src, dst, *, _fail_at=fail_at, _calls=calls):
            if str(src).endswith(transaction.TMP_SUFFIX):
                _calls["n"] += 1
                if _calls["n"] == _fail_at:
                    raise PermissionError(1, "Operation not permitted", str(dst))
            return real_replace(src, dst)

        monkeypatch.setattr(transaction.os, "replace", flaky)
        code, out, err = _write(demo)
        if calls["n"] < fail_at:  # fewer targets than fail_at: the write went through
            n_targets = calls["n"]
            break
        assert_one_line_error(code, err, "every file was restored")
        assert "cannot write recipes/vlm_plain/" in err
        assert tree_state(demo) == before, f"tree changed when rename {fail_at} failed"
        assert not leftovers(demo)
    assert n_targets == 6  # engine, schema, stage YAML, README, two recipe tests (asserts, parity)


def test_target_that_is_a_folder_or_read_only_or_immutable_is_refused_first(demo, monkeypatch):
    (demo / ASSERTS).mkdir(parents=True)
    before = tree_state(demo)
    code, out, err = _write(demo)
    assert_one_line_error(code, err, ASSERTS)
    assert tree_state(demo) == before
    os.rmdir(demo / ASSERTS)

    os.chmod(demo / ENGINE, 0o444)
    before = tree_state(demo)
    code, out, err = _write(demo)
    assert_one_line_error(code, err, f"cannot write {ENGINE}: it is read-only (mode 0444)")
    assert tree_state(demo) == before
    os.chmod(demo / ENGINE, 0o644)
    before = tree_state(demo)

    monkeypatch.setattr(transaction, "_flags_forbid_write", lambda path: path.name == "schema.py")
    code, out, err = _write(demo)
    assert_one_line_error(code, err, f"cannot write {SCHEMA}: it is not writable")
    assert tree_state(demo) == before


@pytest.mark.skipif(shutil.which("chattr") is None or os.geteuid() != 0, reason="needs chattr as root")
def test_real_immutable_schema(demo):
    schema = demo / SCHEMA
    if subprocess.run(["chattr", "+i", str(schema)], capture_output=True).returncode:
        pytest.skip("the file system does not support the immutable attribute")
    try:
        before = tree_state(demo)
        code, out, err = _write(demo)
        assert_one_line_error(code, err, f"cannot write {SCHEMA}")
        assert tree_state(demo) == before and not leftovers(demo)
    finally:
        subprocess.run(["chattr", "-i", str(schema)], check=True)


def test_crlf_files_keep_crlf_and_mode_and_the_rerun_is_a_no_op(demo):
    for rel in (ENGINE, SCHEMA, STAGE):
        path = demo / rel
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    os.chmod(demo / ENGINE, 0o750)
    commit_all(demo, "crlf")
    code, out, err = _write(demo)
    assert code == 0, err
    for rel in (ENGINE, SCHEMA, STAGE):
        data = (demo / rel).read_bytes()
        assert data.count(b"\r\n") == data.count(b"\n") > 20, rel
    assert (demo / ENGINE).stat().st_mode & 0o777 == 0o750
    after = tree_state(demo)
    code, out, err = cli("generate", str(demo / RECIPE), "--write", "--force", "--format", "json")
    assert code == 0 and '"changed": false' in out
    assert tree_state(demo) == after


def test_unparseable_sibling_refuses_the_plan(demo):
    (demo / RECIPE / "engine" / "helpers.py").write_text("def broken(:\n")
    before = tree_state(demo)
    code, out, err = _write(demo)
    assert_one_line_error(code, err, "recipes/vlm_plain/engine/helpers.py: cannot parse")
    assert tree_state(demo) == before


def test_write_all_creates_folders_and_removes_them_on_failure(tmp_path, monkeypatch):
    keep = tmp_path / "keep.txt"
    keep.write_text("old\n")
    targets = [
        Target(keep, "keep.txt", "new\n", "old\n"),
        Target(tmp_path / "a" / "b" / "new.txt", "a/b/new.txt", "x\n", None),
    ]
    before = tree_state(tmp_path)
    real_replace = os.replace

    def fail_second(src, dst):
        if str(dst).endswith("new.txt"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(transaction.os, "replace", fail_second)
    with pytest.raises(Exception, match="cannot write a/b/new.txt: No space left on device; every file was restored"):
        transaction.write_all(targets)
    assert tree_state(tmp_path) == before  # keep.txt restored, a/ and a/b/ removed
    monkeypatch.setattr(transaction.os, "replace", real_replace)
    assert transaction.write_all(targets) == ["keep.txt", "a/b/new.txt"]
    assert keep.read_text() == "new\n" and (tmp_path / "a" / "b" / "new.txt").read_text() == "x\n"
    assert not leftovers(tmp_path)


def test_file_changed_since_the_plan_is_refused(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("edited meanwhile\n")
    with pytest.raises(Exception, match="changed after the plan was made"):
        transaction.write_all([Target(path, "f.py", "new\n", "planned from this\n")])
    assert path.read_text() == "edited meanwhile\n"


def test_symlink_target_is_refused(tmp_path):
    (tmp_path / "real.py").write_text("x\n")
    (tmp_path / "link.py").symlink_to(tmp_path / "real.py")
    with pytest.raises(Exception, match="symlink"):
        transaction.write_all([Target(tmp_path / "link.py", "link.py", "y\n", "x\n")])
