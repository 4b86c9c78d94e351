"""``kebab-eval``: the helper CLI for what Dagster's own CLI does not do.

:mod:`.main` assembles the commands (:mod:`.run`, :mod:`.runs`, :mod:`.baseline`, :mod:`.golden`,
:mod:`.stored`; the reference system's ``ref`` and the judge's ``judge`` sub-CLIs) and maps every
outcome to an exit code; :mod:`.driver` runs a partition in-process; :mod:`.instance` opens the
Dagster instance and the run store; :mod:`.show`, :mod:`.console`, :mod:`.tables`,
:mod:`.terminal` and :mod:`.progress_display` are what the CLI prints; :mod:`.interrupt` is Ctrl-C.

Importing this package imports nothing heavy: the console script takes over Ctrl-C
(:func:`console_main`) before typer, pandas or Dagster load, so an interrupt during start-up
ends with exit 130 and one line rather than a traceback. ``app`` and ``main`` load on first use.
"""

from __future__ import annotations


def console_main() -> None:
    """The ``kebab-eval`` console script (and ``python -m kebab_eval_pipeline.cli``): Ctrl-C taken
    over first, then :func:`kebab_eval_pipeline.cli.main.console_main`."""
    import os
    import signal

    def early(signum, frame) -> None:  # until interrupt.py is imported: nothing has started
        os.write(2, b"interrupted (Ctrl-C): before the command started: nothing was run or stored\n")
        os._exit(130)  # ExitCode.INTERRUPTED, before any module of ours is imported

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # an ignored SIGINT stays ignored
        signal.signal(signal.SIGINT, early)
    from kebab_eval_pipeline.cli import interrupt

    interrupt.install()
    _load().console_main()


def _load():
    """The :mod:`.main` module, with this package's ``main`` bound to its function (the import
    binds the package's ``main`` to the submodule; the function is what callers mean). ``app``, the
    whole command tree, is built on first use only: a command run by name loads its own part."""
    import importlib

    module = importlib.import_module("kebab_eval_pipeline.cli.main")
    globals().update(main=module.main)
    return module


def __getattr__(name: str) -> object:
    if name == "main":
        return _load().main
    if name == "app":
        app = _load().app
        globals().update(app=app)
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "console_main", "main"]
