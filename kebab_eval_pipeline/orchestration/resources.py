"""Run settings as Dagster resources: the config file plus per-run overrides.

``eval_settings`` holds the run's settings (config file, golden set, k, answers, baseline);
``system_under_test`` is the system the run asks — its kind and mode are what a person looks for
first, so it is a resource of its own in the UI (Deployment → Resources), used by the assets that
call or describe it. Both are editable in the launchpad. Secrets never live here — adapters read
them from environment variables by name.

Dagster replaces a resource's whole config when a run config names any of its fields, so every
field defaults to "as the config file says" (None) rather than to a value set at load time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import dagster as dg

from kebab_eval_pipeline.chain.run_overrides import CONFIG_ENV, apply_overrides, config_path, judge_overrides
from kebab_eval_pipeline.chain.settings import RunSettings, load_settings
from kebab_eval_pipeline.store.runs import RunStore

__all__ = ["CONFIG_ENV", "ArtifactStorage", "EvalSettingsResource", "SystemUnderTestResource"]


class SystemUnderTestResource(dg.ConfigurableResource):
    """The system under test: reference (the bundled BM25/vector search), command (a program run
    per query), http (a search service), replay (a recorded trace) or python (a Python object
    called in-process). Its endpoint, command,
    corpus and the rest come from the config file's `system:` block; set `kind`, `mode` or
    `chunk_size` here to override it for one run (a different kind starts from an empty block)."""

    kind: str | None = None  # reference | command | http | replay | python; None: the config file's
    mode: str | None = None  # lexical | vector | hybrid for the reference system; passed to others
    chunk_size: int | None = None  # the reference chunker's size in characters

    def overrides(self) -> dict:
        """The fields set here, keyed as in the settings' ``system:`` block (kind excluded)."""
        return {
            key: value
            for key, value in (("mode", self.mode), ("chunk_size", self.chunk_size))
            if value is not None
        }


def settings_fields(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The CLI's run overrides as :class:`EvalSettingsResource` fields: ``repeat: auto`` is its
    ``repeat_auto`` field."""
    fields = dict(overrides)
    if fields.get("repeat") == "auto":
        del fields["repeat"]
        fields["repeat_auto"] = True
    return fields


class EvalSettingsResource(dg.ConfigurableResource):
    """Typed run settings: a YAML config file (SPEC §12) and optional overrides of its keys."""

    # None: the file named by $KEBAB_EVAL_CONFIG (the one the code location loaded), else defaults.
    config_file: str | None = None
    golden: str | None = None
    answers: bool | None = None
    baseline: str | None = None
    k: list[int] | None = None
    repeat: int | None = None  # how many times each query is asked (1..100); None: the file's
    # True: `repeat: auto` (ask again until the gated metrics are steady; a Dagster config field is
    # an int or a string, not either); None: the file's.
    repeat_auto: bool | None = None
    # The LLM judge: True turns it on (the file's judge: block, else the default local judge), False
    # off; judge_model / judge_prompt_version override those keys of it (and turn it on).
    judge: bool | None = None
    judge_model: str | None = None
    judge_prompt_version: str | None = None
    # JSON object of top-level config keys replacing the file's (evaluation_chain's settings=…)
    settings_json: str | None = None

    def judge_overrides(self) -> dict | None:
        """The ``judge:`` block to use instead of the file's, or None to keep the file's."""
        return judge_overrides(self.judge, self.judge_model, self.judge_prompt_version)

    def config_path(self) -> str | None:
        return config_path(self.config_file)

    def load(self, system: SystemUnderTestResource | None = None) -> RunSettings:
        """The effective settings with ``system``'s overrides applied; raises InputError (naming
        file and key) when invalid."""
        overrides = {
            key: value
            for key, value in (
                ("golden", self.golden),
                ("answers", self.answers),
                ("baseline", self.baseline),
                ("k", self.k),
                ("repeat", "auto" if self.repeat_auto else self.repeat),
            )
            if value is not None
        }
        replace = json.loads(self.settings_json) if self.settings_json else None
        return apply_overrides(
            load_settings(self.config_path(), replace=replace),
            overrides,
            kind=system.kind if system is not None else None,
            system_overrides=system.overrides() if system is not None else {},
            judge=self.judge_overrides(),
        )


class ArtifactStorage(dg.ConfigurableResource):
    """Where run artifacts live (local folder or fsspec URL); the IO manager writes to the same base."""

    base: str

    def store(self) -> RunStore:
        return RunStore(self.base)
