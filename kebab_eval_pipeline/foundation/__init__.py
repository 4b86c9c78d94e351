"""The foundation: files, paths, ids, YAML, errors and limits — nothing here knows about
evaluation; every other package builds on it."""
