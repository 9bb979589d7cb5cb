"""A real Chromium (Debian's, never a downloaded one) driven by Playwright, logged in to the app."""

import json
import os
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser(django_db_setup):
    """One Chromium per module; skipped without one unless ROJO_REQUIRE_BROWSER is set.

    Playwright's sync API keeps an event loop running in the test thread, which Django
    takes for an async context; the tests' own ORM calls are plain sync code, so Django's
    guard is lifted while the browser is up.
    """
    executable = chromium_path()
    if executable is None:
        if os.environ.get("ROJO_REQUIRE_BROWSER"):
            pytest.fail("ROJO_REQUIRE_BROWSER is set but no chromium is installed")
        pytest.skip("no chromium installed (apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    # Playwright's 5 s for an expectation is short for a page on a loaded machine (several
    # workers, each with a browser, on two cores): what the tests wait for still has to happen.
    expect.set_options(timeout=30_000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
            yield browser
            browser.close()


@pytest.fixture
def page_for(browser, asgi_server):
    """page_for(user, width=1280, height=800, timezone=None): a page logged in as `user` on
    the live server."""
    contexts = []
    pages = []

    def make(user=None, *, width: int = 1280, height: int = 800, timezone: str | None = None):
        context = browser.new_context(
            base_url=asgi_server,
            viewport={"width": width, "height": height},
            timezone_id=timezone,
            locale="en-US",
        )
        context.set_default_timeout(30_000)
        if user is not None:
            client = Client()
            client.force_login(user)
            session = client.cookies[settings.SESSION_COOKIE_NAME].value
            context.add_cookies(
                [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": asgi_server}]
            )
        contexts.append(context)
        page = context.new_page()
        page.dialogs = []
        page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
        page.console_errors = []
        page.on(
            "console",
            lambda msg: page.console_errors.append(msg.text) if msg.type == "error" else None,
        )
        # What a page could not load, for the report of a test that fails (a page whose
        # scripts never ran has been seen under load, with no other trace).
        page.load_problems = []
        page.on(
            "requestfailed",
            lambda request: page.load_problems.append(f"{request.url}: {request.failure}"),
        )
        page.on(
            "response",
            lambda response: (
                page.load_problems.append(f"{response.url}: {response.status}")
                if response.status >= 400
                else None
            ),
        )
        pages.append(page)
        return page

    yield make
    for page in pages:  # shown with a failing test's output only
        if page.console_errors or page.load_problems:
            print("page console errors:", page.console_errors, "load problems:", page.load_problems)
    for context in contexts:
        context.close()


def screenshot(page, name: str) -> Path:
    """Save a screenshot under test-artifacts/ (not committed) and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


class MainThreadTasks:
    """The page's main-thread tasks while the `with` block runs, from Chromium's trace.

    Each task's CPU time (the trace's `tdur`) is what the page's own work costs; its wall time
    also holds the wait for a core, which on a shared machine can be several times longer.
    """

    def __init__(self, browser, page):
        self.browser = browser
        self.page = page
        self.cpu_ms: list[float] = []
        self.wall_ms: list[float] = []

    def __enter__(self):
        self.browser.start_tracing(
            page=self.page,
            categories=["devtools.timeline", "disabled-by-default-devtools.timeline"],
        )
        return self

    def __exit__(self, *exc_info):
        trace = json.loads(self.browser.stop_tracing())
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        main = {
            (event["pid"], event["tid"])
            for event in events
            if event.get("name") == "thread_name" and event["args"]["name"] == "CrRendererMain"
        }
        for event in events:
            task = event.get("name") == "RunTask" and event.get("ph") == "X"
            if task and (event["pid"], event["tid"]) in main:
                self.cpu_ms.append(event.get("tdur", 0) / 1000)
                self.wall_ms.append(event["dur"] / 1000)
        return False

    def longest(self) -> float:
        """The CPU time of the longest task, in ms."""
        return max(self.cpu_ms, default=0.0)
