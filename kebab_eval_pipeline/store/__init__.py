"""The run store: everything a run keeps under the storage base, owned in one place.

:mod:`.layout` names every path under the base; :mod:`.artifact_store` writes and reads each
asset's tables per run; :mod:`.runs` is the run store itself (a run's typed artifacts, its report
files, the judge cache's place); :mod:`.pins` keeps the baseline pins. Nothing else in the package
builds a path under the base.
"""
