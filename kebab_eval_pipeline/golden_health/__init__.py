"""The golden set's health: stale gold, duplicate questions, leaked questions, answerable queries
without support, slices too small to conclude on, and the suspect-gold queue — as one table of
findings (:mod:`.findings`) that the ``golden_health`` asset and ``kebab-eval golden health`` show.

Pure functions over the golden tables (no Dagster, no store): :mod:`.text` normalises and hashes,
:mod:`.duplicates` and :mod:`.leakage` are the vectorised kernels, :mod:`.settings` is the
``golden_health:`` block of the run config."""
