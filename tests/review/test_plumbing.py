"""Git side of `diff`: sides, trees, changed files, renames, bad input.

Analysis is replaced by a tiny fake here (findings from `# ERR` markers) so
these tests pin the git plumbing and the matching, whatever the rules say.
"""

from __future__ import annotations

import hashlib
import subprocess

import pytest
from fixture_repo import base_files, commit, git, init_repo, recipe_files, write

from model_compile import __version__
from model_compile.errors import InputError
from model_compile.findings.models import RecipeReport, Report
from model_compile.review import changes as ch
from model_compile.review.gittree import GitTree, WorkTree, open_repo
from model_compile.review.run import review
from model_compile.rules.finding import Finding


def fake_analyze(tree, recipes):
    names = sorted(ch.recipe_names(tree)) if recipes is None else recipes
    report = Report(version=__version__, root="fake")
    for name in names:
        prefix = f"recipes/{name}/"
        r = RecipeReport(name=name, path=prefix.rstrip("/"))
        for path in [p for p in tree.files() if p.startswith(prefix) and p.endswith(".py")]:
            text = tree.read_bytes(path).decode("utf-8", "replace")
            if "apply_model_compile" in text:
                r.compile_path = "kit"
            for i, line in enumerate(text.splitlines(), 1):
                if "# ERR" in line:
                    r.findings.append(
                        Finding(
                            rule="FK001",
                            severity="error",
                            file=path,
                            line=i,
                            message="marked",
                            fix="-",
                            recipe=name,
                            code=line.strip(),
                        )
                    )
        report.recipes.append(r)
    return report


def _repo(tmp_path):
    files = base_files()
    files.update(recipe_files("vlm"))
    files.update(recipe_files("toy", compile_at=None))
    return init_repo(tmp_path / "repo", files)


def _state(root):
    """Everything a diff run must leave alone: HEAD, index bytes, status, file bytes."""
    files = {}
    for p in sorted(root.rglob("*")):
        if ".git" not in p.parts and p.is_file():
            files[str(p)] = hashlib.sha1(p.read_bytes()).hexdigest()
    index = (root / ".git" / "index").read_bytes()
    return (
        git(root, "rev-parse", "HEAD"),
        hashlib.sha1(index).hexdigest(),
        git(root, "--no-optional-locks", "status", "--porcelain"),
        files,
    )


def test_gittree_reads_blobs_without_checkout(tmp_path):
    root = _repo(tmp_path)
    first = git(root, "rev-parse", "HEAD")
    write(root, {"recipes/vlm/README.md": "# changed\n"})
    commit(root, "readme")
    repo = open_repo(root)
    old = GitTree(repo.commit(first))
    assert old.read_bytes("recipes/vlm/README.md").startswith(b"# vlm")
    assert old.read_bytes("nope.py") is None
    assert "pkg/kit/mllm/model.py" in old.files()
    assert (root / "recipes/vlm/README.md").read_text() == "# changed\n"


def test_worktree_view_has_untracked_not_ignored_not_deleted(tmp_path):
    root = _repo(tmp_path)
    write(root, {"new.py": "x = 1\n", "ignored/skip.py": "y = 2\n"})
    (root / "recipes/toy/README.md").unlink()
    tree = WorkTree(open_repo(root))
    assert "new.py" in tree.files()
    assert "ignored/skip.py" not in tree.files()
    assert "recipes/toy/README.md" not in tree.files()
    assert tree.read_bytes("recipes/toy/README.md") is None
    assert tree.read_bytes("new.py") == b"x = 1\n"


def test_dirty_tree_defaults_to_head_and_sees_staged_unstaged_untracked(tmp_path):
    root = _repo(tmp_path)
    write(root, {"recipes/vlm/configs/train.yaml": "model: {}\n"})
    git(root, "add", "recipes/vlm/configs/train.yaml")
    write(root, {"recipes/vlm/README.md": "# edited\n", "recipes/toy/model/extra.py": "z = 3\n"})
    before = _state(root)
    rep = review(root, analyze=fake_analyze)
    assert _state(root) == before
    assert rep.base.rev == "HEAD" and rep.head.commit is None
    kinds = {f.path: (f.change, f.kind) for d in rep.recipes for f in d.files}
    assert kinds == {
        "recipes/vlm/configs/train.yaml": ("modified", "config"),
        "recipes/vlm/README.md": ("modified", "docs"),
        "recipes/toy/model/extra.py": ("added", "model"),
    }


def test_clean_branch_uses_merge_base_with_main(tmp_path):
    root = _repo(tmp_path)
    git(root, "checkout", "-q", "-b", "feature")
    write(root, {"recipes/toy/README.md": "# toy v2\n"})
    commit(root, "docs")
    write(root, {"recipes/vlm/README.md": "# vlm v2\n"})
    commit(root, "docs 2")
    rep = review(root, analyze=fake_analyze)
    assert rep.base.commit == git(root, "rev-parse", "main")
    assert {d.name for d in rep.recipes} == {"toy", "vlm"}
    assert all(d.touches == ["docs"] for d in rep.recipes)


def test_clean_main_says_nothing_to_review(tmp_path):
    root = _repo(tmp_path)
    rep = review(root, analyze=fake_analyze)
    assert rep.recipes == [] and rep.exit_code == 0
    assert any("nothing between them" in n for n in rep.notes)


def test_findings_match_across_line_shifts_and_renames(tmp_path):
    root = _repo(tmp_path)
    eng = root / "recipes/toy/engine/toy_engine.py"
    eng.write_text(eng.read_text() + "\nOLD = 1  # ERR old\n")
    c1 = commit(root, "old error")
    eng.write_text('"""doc"""\n\n' + eng.read_text() + "NEW = 2  # ERR new\n")
    git(root, "mv", "recipes/toy", "recipes/toy2")
    git(root, "mv", "recipes/toy2/engine/toy_engine.py", "recipes/toy2/engine/toy2_engine.py")
    c2 = commit(root, "rename + new error")
    rep = review(root, base=c1, head=c2, analyze=fake_analyze)
    (d,) = rep.recipes
    assert (d.status, d.old_name, d.name) == ("renamed", "toy", "toy2")
    assert [f.code for f in rep.new] == ["NEW = 2  # ERR new"]
    assert rep.new[0].on_changed_line and rep.new[0].file == "recipes/toy2/engine/toy2_engine.py"
    assert [f.code for f in rep.unchanged] == ["OLD = 1  # ERR old"] and rep.fixed == []
    assert rep.exit_code == 1
    back = review(root, base=c2, head=c1, analyze=fake_analyze)
    assert [f.code for f in back.fixed] == ["NEW = 2  # ERR new"] and back.fixed[0].side == "base"
    assert back.exit_code == 0


def test_untracked_copy_of_deleted_file_is_a_rename(tmp_path):
    root = _repo(tmp_path)
    old = root / "recipes/vlm/README.md"
    text = old.read_text()
    old.unlink()
    write(root, {"recipes/vlm/docs.md": text + "more\n"})
    rep = review(root, analyze=fake_analyze)
    (f,) = rep.recipes[0].files
    assert (f.change, f.old_path, f.path) == ("renamed", "recipes/vlm/README.md", "recipes/vlm/docs.md")


def test_added_and_deleted_recipes(tmp_path):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    git(root, "rm", "-q", "-r", "recipes/toy")
    write(root, recipe_files("newr"))
    c1 = commit(root, "swap")
    rep = review(root, base=c0, head=c1, analyze=fake_analyze)
    status = {d.name: d.status for d in rep.recipes}
    assert status == {"toy": "deleted", "newr": "added"}


def test_kit_change_reaches_the_recipes_that_call_the_changed_class(tmp_path):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    kit = root / "pkg/kit/mllm/model.py"
    kit.write_text(kit.read_text().replace("model.compile(", "model = torch.compile(model, "))
    c1 = commit(root, "kit")
    rep = review(root, base=c0, head=c1)
    assert rep.kit_changed and rep.kit_files == ["pkg/kit/mllm/model.py"] and rep.kit_classes == ["MLLMModelKit"]
    # toy has no kit compile: it is in scope only because its run imports the changed file
    assert [(d.name, d.status) for d in rep.recipes] == [("toy", "imports"), ("vlm", "kit")]
    (toy,) = [d for d in rep.recipes if d.name == "toy"]
    assert [i.path for i in toy.imports] == ["pkg/kit/mllm/model.py"] and toy.code_changed


def test_a_change_to_one_kit_class_leaves_the_recipes_of_another_out(tmp_path):
    files = base_files()
    files["pkg/kit/llm/model.py"] = files["pkg/kit/mllm/model.py"].replace("class MLLMModelKit", "class LLMModelKit")
    files.update(recipe_files("vlm"))
    text = recipe_files("lm")
    files.update(
        {
            p: t.replace("pkg.kit.mllm.model import MLLMModelKit", "pkg.kit.llm.model import LLMModelKit").replace(
                "MLLMModelKit()", "LLMModelKit()"
            )
            for p, t in text.items()
        }
    )
    root = init_repo(tmp_path / "repo", files)
    c0 = git(root, "rev-parse", "HEAD")
    kit = root / "pkg/kit/mllm/model.py"
    kit.write_text(kit.read_text().replace("model.compile(", "model = torch.compile(model, "))
    c1 = commit(root, "kit")
    rep = review(root, base=c0, head=c1)
    assert rep.kit_classes == ["MLLMModelKit"]
    assert [d.name for d in rep.recipes] == ["vlm"]  # lm calls LLMModelKit, which the change does not touch


def test_a_kit_file_changed_outside_its_compile_scopes_the_recipes_that_import_it(tmp_path):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    kit = root / "pkg/kit/mllm/model.py"
    kit.write_text(kit.read_text() + "\n\ndef unrelated():\n    return 1\n")
    c1 = commit(root, "kit helper")
    rep = review(root, base=c0, head=c1)
    assert not rep.kit_changed  # the kit's compile is unchanged; the code the recipes import is not
    assert [(d.name, d.status) for d in rep.recipes] == [("toy", "imports"), ("vlm", "imports")]
    assert any("changed outside apply_model_compile" in n and "where their run imports" in n for n in rep.notes)


def test_binary_file_is_listed_not_read_as_text(tmp_path):
    root = _repo(tmp_path)
    write(root, {"recipes/vlm/assets/logo.png": b"\x89PNG\r\n\x1a\n\0\0\0IHDR" + bytes(range(256))})
    c1 = commit(root, "bin")
    rep = review(root, base="HEAD~1", head=c1, analyze=fake_analyze)
    (f,) = rep.recipes[0].files
    assert f.binary and f.kind == "other"


def test_not_a_repo(tmp_path):
    with pytest.raises(InputError, match="not inside a git repository"):
        review(tmp_path, analyze=fake_analyze)


def test_unknown_revision(tmp_path):
    root = _repo(tmp_path)
    with pytest.raises(InputError, match="unknown revision 'nope'"):
        review(root, base="nope", analyze=fake_analyze)
    with pytest.raises(InputError, match="unknown revision"):
        review(root, head="HEAD~5", analyze=fake_analyze)


def test_shallow_clone_without_base(tmp_path):
    root = _repo(tmp_path)
    first = git(root, "rev-parse", "HEAD")
    write(root, {"recipes/vlm/README.md": "# v2\n"})
    commit(root, "2")
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{root}", str(clone)], check=True)
    with pytest.raises(InputError, match="shallow clone"):
        review(clone, base=first, head="HEAD", analyze=fake_analyze)
    with pytest.raises(InputError, match="shallow clone"):
        review(clone, base="HEAD~1", head="HEAD", analyze=fake_analyze)


def test_empty_repo(tmp_path):
    git_root = tmp_path / "empty"
    git_root.mkdir()
    git(git_root, "init", "-q")
    with pytest.raises(InputError, match="no commits"):
        review(git_root, analyze=fake_analyze)


def test_hunk_lines():
    patch = b"@@ -3,0 +4,2 @@\n+a\n+b\n@@ -10 +12 @@\n-x\n+y\n@@ -20,2 +21,0 @@\n-q\n-r\n"
    assert ch._hunk_lines(patch) == [4, 5, 12, 21, 22]
