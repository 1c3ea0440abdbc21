"""Paths to ``Part``s: every way a path can be wrong is mapped to one error class.

``paths`` takes report and log files, run directories and trace folders; ``captures`` finds a
capture's sessions and hosts and reads one file; ``traces`` loads one session as a ``Trace``
and computes its device model (``xlaprof.load_trace``); ``pod/`` reads many hosts in worker
processes (or on a dask cluster), each reduced where it is read, with a Parquet cache; and
``sourcefiles`` says which of the user's source files analysis may read. This stage comes
after ``tables`` because the pod's workers reduce each host with the tables' own functions.
"""
