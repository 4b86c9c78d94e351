"""A python system's versions read live, in a process of its own (``kind: python``).

A run builds its python system once per process (:func:`.python_adapter.python_system`). A version
reading — the system-version sensor's tick, the observations of ``system_under_test``, the freshness
check — happens in a process that lives for days (the code server) and must answer with what the
system is *now*: what a run started at this moment, in a new process, would build. So each reading
starts a Python process of its own that

* imports ``system.callable`` afresh (Python imports a module once per process: in the caller,
  edited code would not be seen), with the caller's ``sys.path``, working directory and environment
  — what the caller can import, it imports;
* calls the factory with ``args`` (a rebuilt index is loaded), asks ``versions()`` within
  ``timeout_s`` and writes the system info (:meth:`.python_adapter.PythonSystem.info`) as one JSON
  line, then exits.

Whatever the factory loads, registers in module-level state or leaves running goes with that
process: the caller does not grow per reading (Haystack's ``InMemoryDocumentStore`` keeps every
store's documents in a registry for the life of the process; built in the code server every tick, it
grew by the index's size each time). What the system prints goes to stderr, never into the result.

The reading has at most :data:`READ_LIMIT_S`, under Dagster's default 60 s for a sensor evaluation,
so a slow or hanging factory makes a tick skip with the reason instead of failing it; the process
and everything it started are then killed (:func:`.command.run_to_exit`). A problem the loader finds
(a module not found, a factory that raises) is the same
:class:`~kebab_eval_pipeline.foundation.errors.InputError` building the system in-process raises;
a reading that is too slow, crashes or writes no result is an InputError naming ``system.callable``,
with the process's exit and the tail of its stderr.
"""

from __future__ import annotations

import json
import os
import sys

import yaml

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.foundation.errors import FieldValueError, InputError, Offender
from kebab_eval_pipeline.systems.command import run_to_exit, tail
from kebab_eval_pipeline.systems.kinds.python import PythonSystemSettings
from kebab_eval_pipeline.systems.outcome import QueryFailure
from kebab_eval_pipeline.systems.python_worker import settings_from_payload, settings_payload

#: The longest a reading may take, factory included (Dagster gives a sensor evaluation 60 s).
READ_LIMIT_S = 50.0
_RESULT_CAP = 4 << 20  # bytes of result: a system info is a few KiB
# The reading process: the caller's sys.path first, then this module's reader (sys.argv[1]: payload).
_BOOT = (
    "import json, sys\n"
    "sys.path[:0] = json.loads(sys.argv[1])['sys_path']\n"
    "from kebab_eval_pipeline.systems.python_versions import read_in_this_process\n"
    "read_in_this_process(sys.argv[1])\n"
)


def _payload(settings: PythonSystemSettings) -> str:
    """What the reading process needs: the caller's ``sys.path`` and the settings, as a worker
    process gets them (:func:`.python_worker.settings_payload`)."""
    return json.dumps({"sys_path": [p for p in sys.path if isinstance(p, str)], **settings_payload(settings)})


def _unreadable(settings: PythonSystemSettings, reason: str) -> InputError:
    return InputError(
        "cannot read the python system's versions",
        [
            Offender(
                "<config>",
                f"{settings.callable}: reading its versions in a process of its own: {reason}",
                field="system.callable",
            )
        ],
    )


def live_python_info(settings: PythonSystemSettings) -> SystemInfo:
    """The system info of a freshly imported and built ``settings`` system, read in a process of its
    own (see the module docstring). Raises InputError when it cannot be built or read."""
    try:
        payload = _payload(settings)
    except yaml.YAMLError as exc:  # args given in Python (not from a file) that YAML cannot hold
        raise _unreadable(settings, f"system.args cannot be passed on: {exc}") from None
    argv = [sys.executable, "-c", _BOOT, payload]
    try:
        stdout, stderr, code = run_to_exit(argv, None, READ_LIMIT_S, _RESULT_CAP)
    except QueryFailure as failure:  # too slow (killed), too much output, could not start
        raise _unreadable(settings, str(failure)) from None
    lines = stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        result = json.loads(lines[-1])
        if "error" in result:
            error = result["error"]
            raise InputError(
                "cannot start the python system",
                [Offender("<config>", str(error["message"]), field=str(error["field"]))],
            )
        return SystemInfo.model_validate(result["info"])
    except (IndexError, ValueError, KeyError, TypeError):
        ended = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
        shown = tail(stderr.decode("utf-8", "replace"))
        raise _unreadable(
            settings, f"no result ({ended})" + (f"; stderr: {shown}" if shown else "")
        ) from None


def read_in_this_process(payload: str) -> None:
    """The reading process's work (run by :data:`_BOOT`, never by the caller): build the system,
    ask its versions, write ``{"info": …}`` or ``{"error": {"field", "message"}}`` as one line on
    the original stdout, and end the process — threads the system left running (a ``versions()``
    past its time, its own pools) end with it."""
    from kebab_eval_pipeline.systems.python_adapter import PythonSystem

    result = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the system's own prints (Python's or a C library's) go to stderr
    settings = settings_from_payload(json.loads(payload))
    # This process is the system's own already (its crash is reported by the caller): built here,
    # not in a worker process of its own.
    settings = settings.model_copy(update={"isolation": "in_process"})
    try:
        line = {"info": PythonSystem(settings).info().model_dump(mode="json")}
    except FieldValueError as exc:  # what load_system checks: import, factory, methods
        line = {"error": {"field": exc.field, "message": str(exc)}}
    result.write(json.dumps(line) + "\n")
    result.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
