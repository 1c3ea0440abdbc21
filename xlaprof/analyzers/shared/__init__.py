"""What several analyzers share: none of it is an analyzer of its own.

``sites`` attributes host reads and CPU fallbacks to the user's lines, ``sourcecode`` reads
the user's own source to name what a graph knows only by line (classes, layer stacks, loops),
``scan_rewrite`` writes the ``scan_layers`` rewrite of a stack from how its layers are called,
``graph_diff`` finds what changed between the graphs one line compiled, and ``bottlenecks``
holds what the per-step bottleneck analyzers read (steady steps, a class's share, the lines and
host spans to name as evidence).
"""
