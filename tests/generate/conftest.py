"""Fixtures for the generate tests (helpers live in gen_helpers.py)."""

import pytest
from gen_helpers import make_repo


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path)
