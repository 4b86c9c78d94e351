"""``kebab-eval``: the command tree and the entry point that turns every outcome into an exit code.

Exit codes (:class:`~kebab_eval_pipeline.foundation.errors.ExitCode`, explained in its
``EXIT_CODES``): 0 success; 1 a blocking gate failed or the system under test failed
(system_health); 2 bad input or usage — a message naming each offender (file, position, query id,
field, reason); 3 an unexpected internal failure — one paragraph (``KEBAB_EVAL_DEBUG=1`` shows the
traceback); 4 refused because another run of the same run id is in progress (or replaced this
run's results while it ran); 130 interrupted (Ctrl-C: one line saying what was stored,
:mod:`.interrupt`). Never a traceback otherwise.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys

import typer
from rich.markup import escape

from kebab_eval_pipeline.cli import interrupt
from kebab_eval_pipeline.cli.console import err
from kebab_eval_pipeline.cli.help import tidy
from kebab_eval_pipeline.cli.terminal import mask_standard_streams
from kebab_eval_pipeline.foundation import cancellation
from kebab_eval_pipeline.foundation.errors import (
    ExitCode,
    GateFailure,
    InputError,
    Interrupted,
    Offender,
    RunInProgress,
    SystemHealthFailure,
)

#: The root of the command tree (:func:`_tree`).
ROOT = {
    "no_args_is_help": True,
    "add_completion": False,
    "pretty_exceptions_enable": False,
    "help": "Evaluate RAG/search systems against golden sets; each run is a Dagster partition.",
}


def _group(name: str, help: str, commands: tuple[str, ...]):
    """What adds group ``name`` to a tree: its commands are ``kebab_eval_pipeline.cli.<name>``'s
    functions ``<name>_<command>`` (``runs add`` is ``runs.runs_add``), the module imported then."""

    def add(app: typer.Typer) -> None:
        module = importlib.import_module(f"kebab_eval_pipeline.cli.{name}")
        group = typer.Typer(no_args_is_help=True, help=help)
        app.add_typer(group, name=name)
        for command in commands:
            group.command(command)(getattr(module, f"{name}_{command}"))

    return add


def _single(module: str, name: str):
    """What adds command ``name``, function ``name`` of ``kebab_eval_pipeline.cli.<module>``, to a
    tree (the module imported then)."""

    def add(app: typer.Typer) -> None:
        app.command()(getattr(importlib.import_module(f"kebab_eval_pipeline.cli.{module}"), name))

    return add


def _ref(app: typer.Typer) -> None:
    from kebab_eval_pipeline.cli import calibrate as calibrate_command
    from kebab_eval_pipeline.reference.cli import ref_app

    # `ref calibrate` reads a run config and a golden set, which the reference layer knows nothing of
    if not any(c.name == "calibrate" for c in ref_app.registered_commands):
        ref_app.command("calibrate")(calibrate_command.calibrate)
    app.add_typer(ref_app, name="ref", help="The built-in reference RAG system: index, search, ask.")


def _judge(app: typer.Typer) -> None:
    from kebab_eval_pipeline.cli import judge_labels
    from kebab_eval_pipeline.judge.cli import judge_app

    # `judge label` / `judge calibrate` read a stored run, which the judge layer knows nothing of
    for name in ("label", "calibrate"):
        if not any(c.name == name for c in judge_app.registered_commands):
            judge_app.command(name)(getattr(judge_labels, name))
    app.add_typer(judge_app, name="judge")


#: Every top-level command and group of ``kebab-eval``, in the order the tree is built (``--help``
#: lists them in it), with what adds it to a tree. Each imports its command's module when called:
#: a command run by name loads only its own (``kebab-eval run`` none of the others'); the whole
#: tree (:data:`app`) is built for the root's help, a typo, and an empty option value.
COMMANDS = {
    "runs": _group("runs", "Register and list run partitions.", ("add", "list", "outputs")),
    "golden": _group(
        "golden",
        "Validate, convert, describe, record, diff and size golden sets.",
        ("validate", "convert", "suggest", "schema", "record", "health", "diff", "size"),
    ),
    "baseline": _group(
        "baseline", "Pin, show and clear the baseline run of each golden set.", ("set", "show", "clear")
    ),
    "run": _single("run", "run"),
    "rejudge": _single("run", "rejudge"),
    "compare": _single("stored", "compare"),
    "export": _single("stored", "export"),
    "history": _single("stored", "history"),
    "bisect": _single("bisect", "bisect"),
    "sweep": _single("sweep", "sweep"),
    "ref": _ref,
    "judge": _judge,
}


def _tree(names) -> typer.Typer:
    """A ``kebab-eval`` app holding the commands and groups ``names`` of :data:`COMMANDS`."""
    tree = typer.Typer(**ROOT)
    for name in names:
        COMMANDS[name](tree)
    return tree


_app: typer.Typer | None = None


def __getattr__(name: str) -> object:
    if name == "app":  # the whole command tree, built on first use (tests, --help)
        global _app
        if _app is None:
            _app = _tree(COMMANDS)
        return _app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _command(args: list[str]):
    """The click command tree ``main`` runs ``args`` with: only the named command's part of it
    when ``args`` name one and no option in them is given an empty value (so the
    empty-value check reads the same options it reads in the whole tree); else the whole tree."""
    name = args[0] if args else None
    if name in COMMANDS and not _empty_values(args):
        return typer.main.get_group(_tree([name]))
    return typer.main.get_command(__getattr__("app"))


def _empty_values(args: list[str]) -> list[str]:
    """The option-like arguments of ``args`` given an empty value (``--x ""``, ``--x=``), by name."""
    names = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name.startswith("-") and (
            (eq and not value.strip()) or (not eq and i + 1 < len(args) and not args[i + 1].strip())
        ):
            names.append(name)
    return names


def _value_options(command) -> set[str]:
    """Option names (``--golden``, ``-o``) that take a value in some command of ``command`` (the
    click tree of :data:`app`) and are a flag in none."""
    valued, flags = set(), set()

    def walk(command) -> None:
        for param in command.params:
            if param.param_type_name == "option":  # typer may vendor its own click: no isinstance
                names = [*param.opts, *param.secondary_opts]
                (flags if param.is_flag or param.count else valued).update(names)
        for child in getattr(command, "commands", {}).values():
            walk(child)

    walk(command)
    return valued - flags


def empty_option_values(args: list[str], command=None) -> list[Offender]:
    """Options given an empty value (``--golden ""``, ``--config=``): each would silently mean the
    default (the bundled demo, the current folder, a new run id), so each is refused, named.
    ``command``: the click tree of :data:`app` when the caller has built it already."""
    valued = _value_options(command if command is not None else typer.main.get_command(__getattr__("app")))
    return [
        Offender(name, "empty value: give one, or leave the option out")
        for name in _empty_values(args)
        if name in valued
    ]


def main() -> None:
    """Console-script entry: map errors to exit codes, never a traceback.

    0 success; 1 a blocking gate or the system-health check failed; 2 bad input or usage (one line
    per offender); 3 an unexpected internal failure (one paragraph; ``KEBAB_EVAL_DEBUG=1`` raises
    it with its traceback); 4 another run of the same run id is in progress; 130 interrupted.
    """
    mask_standard_streams()  # nothing printed holds a secret of a config this process loads
    cancellation.reset()  # a request belongs to one command (tests call main in one process)
    interrupt.reset()  # start-up is over: a command may say more
    try:
        # Built once: typer makes the click tree from every command's signature (a tenth of a
        # second or more for the whole tree, paid by every command and every test's subprocess),
        # and both the empty-value check and the command itself read it.
        command = _command(sys.argv[1:])
        empty = empty_option_values(sys.argv[1:], command)
        if empty:
            raise InputError("empty option value", empty)
        # Outside standalone mode click *returns* the code of a `typer.Exit` instead of exiting.
        # tidy: help printed as written (no swallowed [words], no mid-sentence breaks, no <bool>).
        code = tidy(command)(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except InputError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        sys.exit(ExitCode.INPUT)
    except RunInProgress as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        sys.exit(ExitCode.IN_PROGRESS)
    except SystemHealthFailure as exc:
        err.print(f"[red]system failed:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(ExitCode.FAILED)
    except GateFailure as exc:
        err.print(f"gate failed: {exc}", markup=False, highlight=False)
        sys.exit(ExitCode.FAILED)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Interrupted as exc:  # Ctrl-C during a run: the driver says what was stored
        interrupt.say(str(exc))
        sys.exit(interrupt.EXIT_CODE)
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C: the shell's code for SIGINT, not 1 (a failed gate)
        interrupt.say(interrupt.STOPPED)
        sys.exit(interrupt.EXIT_CODE)
    except Exception as exc:
        # Usage errors: typer vendors its own click, whose ClickException is a TyperException.
        if isinstance(exc, typer.TyperException) and hasattr(exc, "show"):
            exc.show()
            sys.exit(exc.exit_code)
        if os.environ.get("KEBAB_EVAL_DEBUG"):
            raise
        from kebab_eval_pipeline.cli.write_failures import cannot_write, is_write_failure, write_failure

        failure = write_failure(exc)  # a full disk, a read-only folder: named, with the remedy
        if failure is not None and is_write_failure(failure):
            err.print(f"error: {cannot_write(failure)}", markup=False, highlight=False)
            sys.exit(ExitCode.INPUT)
        if isinstance(exc, OSError) and exc.filename is not None:
            # A path that cannot be written or read (permissions, a full disk, a folder in the
            # way): bad input, named with the file, not an internal failure.
            err.print(f"error: {exc.filename}: {exc.strerror or exc}", markup=False, highlight=False)
            sys.exit(ExitCode.INPUT)
        # A bug or an environment failure, not bad input: one paragraph, not a traceback.
        # Exit 3, never 1: CI must tell a crash from a failed gate.
        err.print(
            f"error: {type(exc).__name__}: {exc}\n"
            "(an internal failure; set KEBAB_EVAL_DEBUG=1 to see the traceback)",
            markup=False,
            highlight=False,
        )
        sys.exit(ExitCode.INTERNAL)


def console_main() -> None:
    """The ``kebab-eval`` console script and ``python -m kebab_eval_pipeline.cli``: :func:`main`,
    then the process ends with main's exit code and without the interpreter's teardown of native
    libraries. Arrow's worker threads can still be alive when their library is unloaded at exit, and
    ``std::terminate`` then aborts a run that has finished (SIGABRT, "terminate called without an
    active exception"; apache/arrow#34314, seen here now and then on exit): the exit code would say
    a finished run crashed. Output is flushed and logging shut down first. An exception that
    escapes :func:`main` (``KEBAB_EVAL_DEBUG=1``) still ends the interpreter normally, with its
    traceback."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # sys.exit("message"): printed as the interpreter would
            print(exc.code, file=sys.stderr)
            code = 1
    workers = sys.modules.get("kebab_eval_pipeline.systems.python_worker")
    if workers is not None:  # a python system's worker processes end with the run, not after it
        workers.close_workers()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing left to flush into
            stream.flush()
    os._exit(code)
