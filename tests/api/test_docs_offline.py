"""`/api/docs` works offline: the page references no external host (Ninja's bundled Swagger UI
from the static files, `ninja` being an installed app; no CDN) and every asset it names, and the
OpenAPI document it loads, answer 200 from the server itself."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx2
import pytest


class Refs(HTMLParser):
    """Every URL an element of the page refers to (src, href), and inline JSON settings."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


@pytest.fixture
def page(live_server) -> tuple[str, str]:
    response = httpx2.get(f"{live_server.url}/api/docs", timeout=10)
    assert response.status_code == 200
    return live_server.url, response.text


def test_the_page_references_no_external_host(page):
    base, html = page
    parser = Refs()
    parser.feed(html)
    assert parser.urls, "the page names its assets"
    foreign = [u for u in parser.urls if urlsplit(urljoin(base + "/", u)).netloc != urlsplit(base).netloc]
    assert foreign == []
    assert not re.search(r"(?i)cdn|unpkg|jsdelivr|cdnjs|googleapis", html)
    assert any(u.endswith("swagger-ui-bundle.js") for u in parser.urls)


def test_every_asset_and_the_openapi_document_answer_200(page):
    base, html = page
    parser = Refs()
    parser.feed(html)
    for url in parser.urls:
        response = httpx2.get(urljoin(base + "/", url), timeout=10)
        assert response.status_code == 200, url
        assert response.content, url
    settings = json.loads(re.search(r'id="swagger-settings">(.*?)</script>', html, re.S).group(1))
    assert settings["validatorUrl"] is None  # no online validator badge either
    document = httpx2.get(urljoin(base + "/", settings["url"]), timeout=10)
    assert document.status_code == 200 and document.json()["info"]["title"] == "Durable workflows"
