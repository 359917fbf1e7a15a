"""Shared fixtures: a project folder in a temp dir, and the repo's paths.

Under CI, `.ci/run` sets UDO_BUILD_NO_SKIP=1: a test that would skip (a missing package or
server) fails instead, so nothing is silently left untested.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
RECIPES = REPO / "recipes"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project folder (marked, so recipe paths may not leave it)."""
    (tmp_path / ".udo-build-root").write_text("")
    return tmp_path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("UDO_BUILD_NO_SKIP") == "1" and report.skipped \
            and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, but UDO_BUILD_NO_SKIP=1 (CI) forbids skips: {report.longrepr}"


LONGEST_FIRST = ("tests/conformance/",)  # files whose tests take minutes: handed out first


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest file first (the conformance run, minutes over every core): with the tests
    spread over workers a file at a time (README's `-n auto --dist loadfile`), a worker that
    took it last would run alone at the end while the others sit idle."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))
