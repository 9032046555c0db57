"""Pages link to what they cite: the docs they name open on the site, and the API docs have a
way back to it."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_the_problem_page_links_docs_sweeps_md(client: Any, all_reduce: Any, cpu_hardware: Any) -> None:
    page = client.get(f"/problems/all-reduce/?hardware={cpu_hardware.slug}").content.decode()
    assert '<a href="/docs/sweeps.md">docs/sweeps.md</a> says how' in page
    doc = client.get("/docs/sweeps.md")
    assert doc.status_code == 200 and doc["Content-Type"] == "text/plain; charset=utf-8"
    assert doc.content.decode().startswith("# ")


def test_only_documents_in_docs_are_served(client: Any) -> None:
    assert client.get("/docs/no-such-doc.md").status_code == 404
    assert client.get("/docs/..%2Fpyproject.md").status_code == 404


def test_every_docs_link_on_the_pages_resolves(client: Any, all_reduce: Any, cpu_hardware: Any) -> None:
    pages = ["/hardware/", f"/leaderboard/?hardware={cpu_hardware.slug}",
             f"/problems/all-reduce/?hardware={cpu_hardware.slug}"]
    links = {link for url in pages for link in re.findall(r'href="(/docs/[^"]+)"', client.get(url).content.decode())}
    assert "/docs/portal.md" in links and "/docs/sweeps.md" in links
    for link in links:
        assert client.get(link).status_code == 200, link


@pytest.mark.parametrize("url", ["/api/docs/", "/api/redoc/"])
def test_the_api_docs_lead_back_to_the_site(client: Any, url: str) -> None:
    page = client.get(url).content.decode()
    bar = page.split('<nav id="site-bar"', 1)[1].split("</nav>", 1)[0]
    assert 'href="/"' in bar and "PKB Portal" in bar
    assert 'href="/api/redoc/"' in bar and 'href="/api/docs/"' in bar
