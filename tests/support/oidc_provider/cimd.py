"""The test provider's fetch of a client ID metadata document (django-oauth-toolkit's CIMD):
a client_id at https://testserver/ (the site Django's test client calls) is fetched from the
app's live test server (OIDC_PROVIDER_SITE), as a TLS-terminating proxy in front of the site
would pass it on: the request's Host kept, `X-Forwarded-Proto: https`. Any other host is
refused, so the provider fetches nothing but the app's own document."""

import os
from urllib.parse import urlsplit

import urllib3
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher

SITE_HOST = "testserver"


class SiteFetcher(SafeMetadataFetcher):
    """DOT's fetcher with the site's address in place of a DNS lookup and TLS; the
    document is read and checked by DOT as ever (status, JSON, size, its max-age)."""

    def fetch(self, client_id):
        parts = urlsplit(client_id)
        if parts.scheme != "https" or parts.netloc != SITE_HOST:
            raise CIMDError(f"the test provider fetches documents of {SITE_HOST} only")
        target = os.environ["OIDC_PROVIDER_SITE"].rstrip("/") + parts.path
        headers = {
            "Host": parts.netloc,
            "X-Forwarded-Proto": "https",
            "Accept": "application/json",
        }
        try:
            response = urllib3.request(
                "GET", target, headers=headers, redirect=False, preload_content=False, timeout=10
            )
        except urllib3.exceptions.HTTPError as exc:
            raise CIMDError(f"could not fetch client_id document: {exc}") from exc
        try:
            return self._read_document(response)
        finally:
            response.release_conn()
