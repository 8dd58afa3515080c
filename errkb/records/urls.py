"""Stable, relative URLs of the site's pages, shared by the site and enrichment.

A fix page's path derives from repo and slug only, so links in enriched logs and
search engines stay valid across dataset versions. Paths end in .html so the site
works from file:// too (no directory index there).

One message raised at several sites of a repo gives several records with one slug
(the upstream generator cuts slugs at 50 characters; lint W402). Then the (repo, slug)
address is a short page listing them, and each record's own page is one level down,
named by its id (:func:`record_page_path`); links made from (repo, slug) stay valid.
"""

from __future__ import annotations

from urllib.parse import quote


def fix_page_path(repo: str, slug: str) -> str:
    owner, name = repo.split("/", 1)
    return f"errors/{quote(owner)}/{quote(name)}/{quote(slug)}.html"


def record_page_path(repo: str, slug: str, record_id: str) -> str:
    """The own page of one of several records sharing ``slug`` in ``repo``: next to the
    list page at :func:`fix_page_path`, in a folder named like it."""
    return fix_page_path(repo, slug)[: -len(".html")] + f"/{quote(record_id)}.html"


def fix_page_url(site_url: str, repo: str, slug: str) -> str:
    """Absolute URL of a fix page under ``site_url`` (where the site is hosted)."""
    return site_url.rstrip("/") + "/" + fix_page_path(repo, slug)


def shared_slug_order(record: dict) -> tuple:
    """The order of records sharing a slug (their list page, the look-up error naming them):
    by raise site, then id."""
    line = record.get("lineNumber")
    return (str(record.get("filePath")), line if isinstance(line, int) else 0, str(record.get("id")))
