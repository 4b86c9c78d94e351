"""Ship gates: their settings (:mod:`.settings`, pandas-free, read when the config loads) and their
evaluation against a run's metrics or a comparison (:mod:`.evaluate`)."""
