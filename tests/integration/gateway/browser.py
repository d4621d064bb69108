"""Real Chromium for the browser-client tests: Debian's build, driven by Playwright."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")  # Debian's, from `make setup`: Playwright's own download is not used
WAIT_MS = 30_000  # generous: the machine is shared; the tests themselves take a few seconds


def launch_chromium() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} not found: run `make setup` (or `apt-get install -y chromium`)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI's setup installs it: a missing browser there is a broken setup
        pytest.skip(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser: Browser, console: list[str], url: str, *, init_script: str | None = None) -> Page:
    """``url`` in a fresh profile (empty localStorage), its console and errors collected in ``console``."""
    context = browser.new_context()
    if init_script is not None:
        context.add_init_script(init_script)
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.goto(url)
    return page
