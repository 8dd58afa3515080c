"""Records from code: raise sites and their message templates, drafts (``errkb mine``),
and drift (where a record's message is raised now)."""
