"""tests/deploy: the Kubernetes manifests in deploy/kubernetes, checked offline (no cluster).
A run in which every test skipped (kubectl, yamllint or python3-kubernetes missing; the reasons
are printed) exits 77, which CTest counts as a skip."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # ctest_skip.py

from ctest_skip import pytest_runtest_logreport, pytest_sessionfinish  # noqa: E402,F401
