"""`generate --path kit` on a recipe whose README keeps it off the kit says so, quoting the sentence."""

from __future__ import annotations

import pytest
from gen_helpers import RECIPE_REL, run_generate

from model_compile.parse.documentation import kit_avoidance

AVOIDS = "This recipe intentionally does not use the kit layer in its implementation."

# (README text, the line kit_avoidance reports, or None)
CASES = [
    (f"# Toy\n\n{AVOIDS} It\nis kept small.\n", 3),
    ("# Toy\n\nWe build the model without the MLLMModelKit helpers.\n", 3),
    ("Compile avoids the model kit here.\n", 1),
    ("First line.\nThis one does\nnot use the kit.\n", 2),  # a sentence over two lines: where it starts
    ("Text that does not use the kit.\n```\ncode\n```\n", 1),  # the paragraph before a code block
    ("```\nnot the kit\n```\nWe avoid the kit.\n", 4),
    # near misses
    ("It uses the kit.\n", None),
    ("Unlike recipes without compile support, this one calls the kit.\n", None),  # the negation is too far
    ("No compile here. The kit builds the model.\n", None),  # a negation in another sentence
    ("```\nnot the kit\n```\nFine.\n", None),  # inside a code block
    ("## Not the kit\n\nText.\n", None),  # a heading is no sentence
    ("The toolkit does not ship a trainer.\n", None),  # `toolkit` is not the kit
]


@pytest.mark.parametrize(("text", "line"), CASES)
def test_kit_avoidance(text, line):
    found = kit_avoidance(text)
    assert (found[0] if found else None) == line


def test_generate_kit_quotes_the_readme_that_keeps_off_the_kit(repo):
    readme = repo / RECIPE_REL / "README.md"
    readme.write_text(f"# Toy\n\n{AVOIDS} It\nis kept small.\n")
    code, _, err = run_generate(str(repo / RECIPE_REL))
    assert code == 0, err
    assert f'{RECIPE_REL}/README.md:3 names the kit after a negation: "{AVOIDS}"' in err
    assert "use a fallback instead: --path regional|submodule|graph-break|post-wrap --reason TEXT" in err


def test_generate_kit_says_nothing_of_a_readme_that_uses_the_kit(repo):
    (repo / RECIPE_REL / "README.md").write_text("# Toy\n\nThe kit builds the model.\n")
    code, _, err = run_generate(str(repo / RECIPE_REL))
    assert code == 0, err
    assert "names the kit after a negation" not in err
