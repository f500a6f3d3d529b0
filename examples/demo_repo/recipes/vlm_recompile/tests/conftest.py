import sys
from pathlib import Path

# The repository root (two levels above the recipe) holds demo_engine and recipes/.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def pytest_addoption(parser):
    parser.addoption("--world-size", type=int, default=1, help="smoke workers to spawn")
    parser.addoption("--config-name", default="train", help="configs/<name>.yaml to use")
    parser.addoption(
        "--config-override", action="append", default=[], metavar="K=V", help="dotlist override (repeatable)"
    )
