"""Apache Spark as an engine: the per-patient unit of work over a cluster (``pip install 'anonymizer[spark]'``).

:func:`anonymize` is the DataFrame API (notebooks, jobs); :func:`run` is ``anonymizer run --engine
spark``; :func:`read_target` reads the tables of a Parquet or Delta target.  docs/scale-out.md says
how to submit and size a job.
"""

from __future__ import annotations

from anonymizer.spark.frames import Anonymized, anonymize
from anonymizer.spark.job import read_target, run, session

__all__ = ["Anonymized", "anonymize", "read_target", "run", "session"]
