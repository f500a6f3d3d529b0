"""One short real training run through engine.train(), with skill asserts injected."""

from pathlib import Path

from demo_engine.testing.utils import run_smoke

RECIPE_ROOT = Path(__file__).resolve().parents[1]


def test_smoke(request):
    run_smoke(
        RECIPE_ROOT,
        config_name=request.config.getoption("--config-name"),
        world_size=request.config.getoption("--world-size"),
        overrides=request.config.getoption("--config-override"),
    )
