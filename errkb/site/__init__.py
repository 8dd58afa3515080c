"""The static documentation site (fix pages, search, tag and repo pages) and the
standalone validation snippets.

The names below are imported on first use, so importing the package (or one light
module in it) does not load the heavy ones: explain's cold start depends on it.
"""

import importlib

_EXPORTS = {
    "SiteError": "errkb.site.output",
    "build_site": "errkb.site.build",
    "check_site": "errkb.site.build",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
