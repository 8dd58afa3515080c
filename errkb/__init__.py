"""errkb: match runtime errors to the knowledge that explains and fixes them."""

__version__ = "0.1.0"
