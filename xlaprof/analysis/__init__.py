"""Analysis: the data model (``model``), helpers over steps, traces, hosts and graphs, and the
registered analyzers in ``checks/`` (one module each: data in, findings out).

Named ``analysis`` rather than ``analyze`` so that the public function ``xlaprof.analyze`` is
never shadowed by a submodule once something imports it.
"""
