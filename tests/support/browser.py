"""A real headless Chromium for the console's browser tests: Debian's ``chromium`` and
``chromium-driver``, driven by Selenium with both paths given, so nothing is downloaded.

:func:`require_chromium` skips a test where the two packages are missing (``.ci/run`` installs
them, so CI never skips); :func:`chromium` starts a browser with a fresh profile and the flags
that work on these machines, and quits it afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

__all__ = ["CHROMEDRIVER", "CHROMIUM", "chromium", "require_chromium"]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def require_chromium() -> None:
    """Skip where the packages are missing, except in CI, where that is a failure (``.ci/run``
    installs them): a browser test is never passed off as run."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        why = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@contextmanager
def chromium(*, width: int = 1280, height: int = 900) -> Iterator[WebDriver]:
    """A Selenium WebDriver of headless Chromium, ``width`` CSS pixels wide (below 600, a
    phone's screen is emulated). Certificates of the test fleet's own CA are accepted."""
    require_chromium()
    profile = tempfile.mkdtemp(prefix="fleet-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in _FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.accept_insecure_certs = True
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    if width < 600:  # a window is never that narrow: emulate the phone's screen instead
        metrics = {"width": width, "height": height, "deviceScaleFactor": 2, "mobile": True}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
