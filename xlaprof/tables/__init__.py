"""Tables computed from the model, purely: frames and model objects in, DataFrames out.

Nothing here reads a file or prints. ``device/`` is the device model of a capture (which events
are compute, their categories, per-device steps and utilization, op totals and rates, host
against device, one host reduced to a ``DeviceSummary``); ``intervals`` is the interval
arithmetic they share and ``categorical`` the comparisons on an event frame's categorical
columns. ``step_numbers`` numbers trace events by step, ``timeline`` splits each step's wall
time, ``story`` says what bounds each step (the one step model every verdict comes from),
``step_stats`` what the reports say of every step at once (from the rows, or a pod's
aggregates), ``hosts`` and ``stragglers`` compare the hosts of a pod, and ``compare`` two runs.
"""
