"""The ``--json`` document's name and version: what its writer stamps and a reader sniffs
(``inputs.saved.is_saved``), apart from the schema's models (``model.document``), whose import
(pydantic's, and the models' own building: ~0.1 s) only a read or a check of a document needs.
"""

from __future__ import annotations

SCHEMA = "xlaprof.analysis/1"
# 3: the device view's rows as numbers (2 and before: as text, still read).
# 4: the steady step of every timeline row (``view.steady``; 3 and before: the reader makes it
# of the timeline rows the document kept), and the device view's notes as facts (3 and
# before: as text, shown as written).
DOCUMENT_VERSION = 4

# Set (to anything but empty) where the writer is to check the document it writes against the
# schema it is read back by, before writing it: the test suite sets it for itself and every
# process it starts; a document the schema refuses is then xlaprof's bug, raised.
SELF_CHECK_ENV = "XLAPROF_SELF_CHECK"
