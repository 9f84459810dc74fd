"""pytest hooks that make a run in which every test skipped exit 77, which CTest counts as a
skip (SKIP_RETURN_CODE 77) rather than a pass. A conftest imports both hooks by name:
`from ctest_skip import pytest_runtest_logreport, pytest_sessionfinish`. `require` is the
one rule for a box that should start here."""
import os

import pytest

SKIPPED = 77
_outcomes = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and _outcomes["passed"] == 0 and _outcomes["skipped"] > 0:
        session.exitstatus = SKIPPED


def require(problem):
    """For a box that should start here: skips with `problem`, or fails under
    CODEBOX_TESTS_REQUIRE_BOX=1 (CI); nothing when `problem` is None or empty."""
    if not problem:
        return
    if os.environ.get("CODEBOX_TESTS_REQUIRE_BOX") == "1":
        pytest.fail(f"{problem} (CODEBOX_TESTS_REQUIRE_BOX=1)")
    pytest.skip(problem)
