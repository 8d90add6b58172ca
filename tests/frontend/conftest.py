"""A real headless Chromium driven by Playwright's sync API, against pytest-django's live server."""

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("LAKEUI_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
WIDTHS = (1280, 768)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        message = f"No Chromium at {CHROMIUM}: `make test` installs Debian's chromium (or set LAKEUI_CHROMIUM)."
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in the test's thread; the test still reads the database through the
    # ORM between browser steps, which Django refuses in a thread with a running loop unless told it is safe. Only
    # for these tests: subprocesses started later (`check --deploy`) must not inherit it.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()
    finally:
        playwright.stop()
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


class Console:
    """Every console error and uncaught page error of a page: a test that sees one fails."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on(
            "console",
            lambda message: self.errors.append(f"console: {message.text}") if message.type == "error" else None,
        )
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": WIDTHS[0], "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.console = Console(page)
    yield page
    context.close()
    assert page.console.errors == [], page.console.errors


def screenshot(page, name: str) -> None:
    """Full-page screenshots at each width, for a person to look at; the page must not scroll sideways."""
    ARTIFACTS.mkdir(exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 0:
            page.screenshot(path=str(ARTIFACTS / f"{name}-{width}-overflow.png"), full_page=True)
        # Which elements stick out (the innermost first), to say what to fix.
        wide = (
            page.evaluate(
                """() => { const w = document.documentElement.clientWidth; return [...document.querySelectorAll('body *')]
               .filter(e => e.getBoundingClientRect().right > w + 1 && ![...e.children].some(
                   c => c.getBoundingClientRect().right > w + 1))
               .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + (e.textContent || '').slice(0, 40)); }"""
            )
            if overflow > 0
            else []
        )
        assert overflow <= 0, f"{name} scrolls sideways by {overflow}px at {width}px: {wide}"
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})
