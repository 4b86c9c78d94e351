"""The ``nightly:`` and ``freshness:`` blocks of the run config: when the nightly evaluation runs,
and how old the last passing evaluation of the current system version may be.

```yaml
nightly: {cron: "0 2 * * *", timezone: Europe/Berlin}   # default: 0 2 * * *, UTC
freshness: {max_hours: 26}                               # default: 26
```
"""

from __future__ import annotations

from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from kebab_eval_pipeline.foundation.config_model import StrictSettings

DEFAULT_NIGHTLY_CRON = "0 2 * * *"
DEFAULT_NIGHTLY_TIMEZONE = "UTC"
#: A little more than a day: a nightly that ran a few minutes late still counts as fresh.
DEFAULT_FRESHNESS_HOURS = 26.0


def _schedule_accepts(cron: str) -> bool:
    """Whether Dagster's ScheduleDefinition accepts ``cron`` — the schedule's own test (five fields,
    minute resolution, no 30 February), so a cron this accepts is one the nightly schedule accepts.
    Dagster is imported only for a configured cron."""
    import dagster as dg

    try:
        dg.ScheduleDefinition(name="nightly_cron_probe", cron_schedule=cron, job_name="nightly_cron_probe")
    except dg.DagsterInvalidDefinitionError:
        return False
    return True


class NightlySettings(StrictSettings):
    """When the nightly schedule fires: a five-field cron expression in an IANA time zone."""

    cron: str = DEFAULT_NIGHTLY_CRON
    timezone: str = DEFAULT_NIGHTLY_TIMEZONE

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        if value == DEFAULT_NIGHTLY_CRON:  # the default needs no check (and no Dagster import)
            return value
        if not isinstance(value, str) or not _schedule_accepts(value.strip()):
            raise ValueError(
                f"{value!r} is not a cron expression: five fields, minute hour day month weekday "
                "(e.g. '0 2 * * *' for 02:00 every day)"
            )
        return value.strip()

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        if value in ("UTC", "utc"):
            return "UTC"
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"{value!r} is not a known time zone: give an IANA name such as 'UTC' or 'Europe/Berlin'"
            ) from None
        return value

    def zone(self) -> ZoneInfo:
        """The schedule's time zone."""
        return ZoneInfo(self.timezone)


class FreshnessSettings(StrictSettings):
    """How many hours may pass without a passing evaluation of the current system version before
    the freshness check warns."""

    max_hours: Annotated[float, Field(gt=0, le=24 * 366)] = DEFAULT_FRESHNESS_HOURS
