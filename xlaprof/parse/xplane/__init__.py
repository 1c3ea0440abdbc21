"""XSpace (``*.xplane.pb``) captures to the event frame (``xlaprof.parse.events``).

``schema`` builds the public XSpace schema at run time and reads what planes say about devices,
``wire`` decodes every event's bytes at once with numpy, and ``frame`` joins the two into the
frame: 1.5 to 2 million events a second of CPU, where a Python loop over upb's messages managed
about 0.3 million (``benchmarks/xplane_decode.py``). ``args`` is the frame's ``args`` column,
decoded on demand.
"""

from xlaprof.parse.xplane.frame import xspace_frame
from xlaprof.parse.xplane.schema import read_xspace, xspace_class

__all__ = ["read_xspace", "xspace_class", "xspace_frame"]
