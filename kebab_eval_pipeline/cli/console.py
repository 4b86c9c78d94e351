"""The CLI's two consoles — results on stdout, progress, warnings and errors on stderr — fitted to
the terminal on a terminal and never wrapped anywhere else (:mod:`.terminal`), and the line reader
of the interactive sessions (``golden record``, ``judge label``)."""

from __future__ import annotations

from kebab_eval_pipeline.cli.terminal import make_console

out = make_console()
err = make_console(stderr=True)


def line_asker():
    """Prompts on stdout, answers from stdin: with line editing and history on a terminal
    (readline), line by line from a pipe (a scripted session)."""
    import contextlib
    import signal
    import sys

    from rich.text import Text

    terminal = sys.stdin.isatty()
    if terminal:
        # imported for its effect on input(); not every platform has it: plain input() then
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401
    # The session ends itself on Ctrl-C (KeyboardInterrupt: the entry being typed dropped, the
    # summary printed), not at once as the CLI's own handler would (cli/interrupt.py). On a
    # terminal even when the parent started this process with SIGINT ignored (Python then installs
    # no KeyboardInterrupt handler, and a ^C does nothing); from a pipe, an ignored SIGINT stays so.
    if terminal or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def ask(label: str) -> str:
        line = out.input(Text(label, style="bold"))
        if not terminal:  # a piped answer is not echoed by a terminal: show it, so the log reads
            out.print(line, markup=False, highlight=False)
        return line

    return ask
