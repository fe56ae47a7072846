"""Shared fixtures of the Python module's tests (run by CTest one test per process).

A run whose only tests were skipped exits 77, which CTest reports as skipped
(SKIP_RETURN_CODE): a skip is never counted as a pass."""
import os

import pytest

import carve

SOURCE_DIR = os.environ.get("CARVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus == 0 and reporter and reporter.stats.get("skipped") and not reporter.stats.get("passed"):
        session.exitstatus = 77


@pytest.fixture
def session():
    """A CPU session; skips where the library has no CPU JIT (the minimal build, where
    sessions are unavailable)."""
    try:
        return carve.Session(threads=2)
    except carve.UnavailableError as e:
        pytest.skip(f"this build has no CPU JIT: {e}")


@pytest.fixture
def jit(session):
    """Skips where compiling is unavailable."""
    try:
        session.compile("graph g {\n input x: f32[1]\n n = relu(x) -> y: f32[1]\n output y\n}")
    except carve.UnavailableError as e:
        pytest.skip(f"this build has no CPU JIT: {e}")


@pytest.fixture
def onnx(session, jit):
    """Skips where the library has no ONNX importer."""
    try:
        session.compile(os.path.join(SOURCE_DIR, "no-such-model.onnx"))
    except carve.UnavailableError as e:
        pytest.skip(f"this build has no ONNX importer: {e}")
    except carve.IoError:
        pass


def source_path(*parts):
    return os.path.join(SOURCE_DIR, *parts)
