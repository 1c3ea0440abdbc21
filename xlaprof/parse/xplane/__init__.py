"""XSpace (``*.xplane.pb``) captures to the event frame (``xlaprof.parse.events``).

``schema`` builds the public XSpace schema at run time and reads what planes say about devices,
``wire`` decodes every event's bytes at once, and ``frame`` joins the two into the frame.
The decoding's core is compiled (``_native.c``, built by the set-up: the events located, decoded
and merged into time order in one pass each, no Python object per event); where it is not
built, ``wire``'s numpy decoder does the same (1.5 to 2 million events a second of CPU, where a
Python loop over upb's messages managed about 0.3 million: ``benchmarks/xplane_decode.py``), and
says so once. ``args`` is the frame's ``args`` column, decoded on demand.
"""

from xlaprof.parse.xplane.frame import xspace_frame
from xlaprof.parse.xplane.schema import read_xspace, xspace_class

__all__ = ["read_xspace", "xspace_class", "xspace_frame"]
