"""/api/docs in a real Chromium: Swagger UI renders the API's operations under the app's own CSP
(its files served by the app, no CDN, no inline script), for logged-in users only; the
OpenAPI schema too is for logged-in users only."""

import pytest
from playwright.sync_api import expect

from tests.support.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Recorded before any script of the page runs (Playwright's init scripts are not the page's).
RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


def operations() -> int:
    """How many operations the API has, by its own schema."""
    from rojos.web.api import api

    return sum(len(methods) for methods in api.get_openapi_schema()["paths"].values())


def test_the_api_docs_render_the_operations_under_the_csp(page_for, users, asgi_server):
    page = page_for(users["viewer"])
    page.add_init_script(RECORD_VIOLATIONS)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))

    response = page.goto("/api/docs")

    assert response.status == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    chat = page.locator(".opblock", has_text="/api/projects/{project_id}/chat")
    expect(chat).to_be_visible()
    expect(chat.locator(".opblock-summary-method")).to_have_text("POST")
    expect(page.locator(".opblock")).to_have_count(operations())
    expect(page.locator(".info .title")).to_contain_text("Rojo Chat API")
    chat.locator(".opblock-summary").click()  # an operation opens, with its responses
    expect(chat.locator(".responses-table")).to_contain_text("429")
    screenshot(page, "api-docs")

    assert page.evaluate("window.cspViolations") == []
    assert page.console_errors == []
    assert requested and all(url.startswith(asgi_server) for url in requested), requested
    assert f"{asgi_server}/static/ninja/swagger-ui-bundle.js" in requested


def test_anonymous_users_get_neither_the_docs_nor_the_schema(page_for, client_for, asgi_server):
    page = page_for()

    page.goto("/api/docs")

    expect(page).to_have_url("/login/?next=/api/docs")
    expect(page.locator(".opblock")).to_have_count(0)
    schema = client_for().get("/api/openapi.json")
    assert schema.status_code == 302
    assert schema.headers["location"] == "/login/?next=/api/openapi.json"
    assert "paths" not in schema.text
