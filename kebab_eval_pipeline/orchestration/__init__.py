"""The Dagster layer: partitions, assets, gate checks, resources, IO manager, automation, the run
lock. Nothing is imported here: ``registered_runs`` is read by the CLI's reading commands, which
never import Dagster."""
