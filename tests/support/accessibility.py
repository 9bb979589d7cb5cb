"""axe-core, vendored under static/vendor/axe-core/ and never loaded by the app, run in a page."""

from django.conf import settings

WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]


def axe_violations(page) -> list[str]:
    """The page's WCAG 2.2 AA violations as axe-core reports them, one readable line per node."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        # By URL, from the app's own static files: the pages' CSP refuses an inline script.
        page.add_script_tag(url=f"{settings.STATIC_URL}vendor/axe-core/axe.min.js")
    results = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", WCAG_AA
    )
    return [
        f"{violation['id']}: {' '.join(node['target'])}: {node['failureSummary']}"
        for violation in results["violations"]
        for node in violation["nodes"]
    ]
