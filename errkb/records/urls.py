"""Stable, relative URLs of the site's pages, shared by the site and enrichment.

A fix page's path derives from repo and slug only, so links in enriched logs and
search engines stay valid across dataset versions. Paths end in .html so the site
works from file:// too (no directory index there).
"""

from __future__ import annotations

from urllib.parse import quote


def fix_page_path(repo: str, slug: str) -> str:
    owner, name = repo.split("/", 1)
    return f"errors/{quote(owner)}/{quote(name)}/{quote(slug)}.html"


def fix_page_url(site_url: str, repo: str, slug: str) -> str:
    """Absolute URL of a fix page under ``site_url`` (where the site is hosted)."""
    return site_url.rstrip("/") + "/" + fix_page_path(repo, slug)
