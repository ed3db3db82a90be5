"""The interactive docs are served with their own assets: nothing is fetched from a CDN."""

from __future__ import annotations

import re

import pytest

from tests.conftest import Client


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_use_only_local_assets(client: Client, page: str) -> None:
    r = client.get(page)
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assets = re.findall(r'(?:src|href)="([^"]+)"', r.text) + re.findall(r"url: '([^']+)'", r.text)
    assert assets, "the page loads scripts and styles"
    assert not [a for a in assets if a.startswith(("http:", "https:", "//"))], assets
    assert "cdn" not in r.text.lower()
    for asset in assets:
        if asset.startswith("/static-offline-docs/"):
            got = client.get(asset)
            assert got.status_code == 200 and len(got.content) > 1000, asset
