"""Chromium for the browser tests, looked up when a test needs it. Where it is missing the test
skips, except in CI (``CI`` set, as CI services do, and ``.ci/run``): a skipped browser test checks
nothing, so there it fails and says what to install."""

from __future__ import annotations

import os
import shutil
from typing import Optional

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
MISSING = "no Chromium on PATH (apt-get install chromium; .ci/run installs it)"


def find_browser() -> Optional[str]:
    return next((path for path in map(shutil.which, NAMES) if path), None)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_browser() -> str:
    """Chromium's path; else skip the test, or fail it in CI."""
    found = find_browser()
    if found:
        return found
    if in_ci():
        pytest.fail(f"{MISSING}: in CI (CI={os.environ['CI']}) a browser test must run, not skip")
    pytest.skip(MISSING)
