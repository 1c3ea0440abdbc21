"""The training-process side: annotations, ``profile()``, the ``xlaprof run`` hook, the session
(split by job: sampler, sync hook, metrics, graphs, trace window, probe) and remote capture.

Everything here may run inside the job being measured, so it imports nothing of the analysis
stages (model, tables, inputs, analyzers, ...), renderers, pandas or plotly
(tests/test_layout.py checks it).
"""
