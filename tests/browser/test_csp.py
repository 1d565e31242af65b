"""The Content-Security-Policy in a real browser: the API's Swagger UI still works under it (its
start-up script is a file), and an inline script injected into a page does not run."""
import pytest

pytestmark = pytest.mark.browser


def test_swagger_ui_runs_under_the_policy_and_inline_scripts_do_not(page):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    response = page.goto("/api/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.locator(".swagger-ui .info .title").wait_for()  # drawn by Swagger UI's scripts
    page.locator(".opblock-tag", has_text="events").first.wait_for()  # and the schema was fetched and drawn
    assert errors == []
    with pytest.raises(Exception):
        page.add_script_tag(content="window.injected = true;")
    assert page.evaluate("window.injected === undefined")
    assert any("Content Security Policy" in text for text in errors)
