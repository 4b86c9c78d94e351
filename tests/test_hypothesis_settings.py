"""Every property test of the suite tolerates a slow machine (issue 23): no Hypothesis deadline and
no ``too_slow`` health check, which fail a valid example for taking long on a loaded CI box. The
checks about the generated data stay on. Reads each @given test's effective settings, as Hypothesis
will run it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from hypothesis import HealthCheck

TESTS = Path(__file__).resolve().parent
GIVEN = re.compile(r"^@given\(", re.MULTILINE)


def property_tests() -> dict[str, object]:
    """``module::name`` → test function, for every @given test in tests/ (imported as pytest does)."""
    found = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        if not GIVEN.search(path.read_text(encoding="utf-8")):
            continue
        module = importlib.import_module(".".join(path.relative_to(TESTS.parent).with_suffix("").parts))
        for name, obj in vars(module).items():
            if name.startswith("test_") and getattr(obj, "is_hypothesis_test", False):
                found[f"{path.relative_to(TESTS.parent)}::{name}"] = obj
    return found


def test_no_property_test_fails_for_being_slow():
    tests = property_tests()
    assert len(tests) >= 55  # the audit of issue 23 counted 55; a lower count means the scan broke
    slow = {
        name: (s.deadline, [h.name for h in s.suppress_health_check])
        for name, test in tests.items()
        if (s := test._hypothesis_internal_use_settings).deadline is not None
        or HealthCheck.too_slow not in s.suppress_health_check
    }
    assert slow == {}
