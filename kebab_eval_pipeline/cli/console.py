"""The CLI's two consoles — results on stdout, progress, warnings and errors on stderr — fitted to
the terminal on a terminal and never wrapped anywhere else (:mod:`.terminal`)."""

from __future__ import annotations

from kebab_eval_pipeline.cli.terminal import make_console

out = make_console()
err = make_console(stderr=True)
