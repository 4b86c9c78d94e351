"""A team's own search index and its deployment, with the evaluation wired in (an example project)."""
