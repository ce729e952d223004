import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

# Module fixtures that run pipeline stages (a chain of stages, a training run, a Ray instance): every test
# that uses one is a `stage` test, so `-m "not slow and not stage"` (the fast subset) never builds them.
STAGE_FIXTURES = frozenset({"trained", "built", "chain", "runs", "planted", "pristine", "run", "ray_instance"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if STAGE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.stage)
