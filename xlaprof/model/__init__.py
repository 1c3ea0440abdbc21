"""What the analysis reads and returns, as data: nothing here computes a table.

``input`` is ``AnalysisInput``, everything an analyzer may use (built from a run directory or
from text files); ``trace`` a loaded capture (``Trace``: events, hosts, devices, steps; where
its events are is an ``EventSource``: held in memory, or a pod's caches) and ``device`` the
device model its loader computed (``DeviceSummary``). A pod's data is in ``pod`` (per-host
results and the on-disk event source ``CachedEvents``, the only reader of files here, of its
own caches), ``ondisk`` (per-step tables left on disk until asked for) and ``stats`` (the
mergeable aggregates its workers send instead). ``parts`` is one job output and where it came
from (``Part``, with a typed ``RunSummary``), and ``result`` what its analysis produced
(``PartResult``, ``AnalysisResult``, ``RunComparison``), as every renderer reads it.
"""
