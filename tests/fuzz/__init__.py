"""The CLI-level fuzz harness (issue 22, "How to prove it"): seeded generators of hostile golden
files, run configs and replay traces (:mod:`tests.fuzz.cases`), and the code that runs each through
a real ``kebab-eval`` subprocess and classifies what happened (:mod:`tests.fuzz.harness`).
``tests/test_cli_fuzz.py`` drives both."""
