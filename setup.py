"""The compiled part of xlaprof: the XSpace decoder's core (xlaprof/parse/xplane/_native.c).

Everything else is in pyproject.toml. The extension is optional: where it does not build (no C
compiler, a big-endian machine) the install still succeeds and the numpy decoder it mirrors
runs instead (``xlaprof.parse.xplane.wire.native`` says so once).
"""

import sys

import numpy
from setuptools import Extension, setup

extensions = []
if sys.byteorder == "little":  # the decoder reads doubles' little-endian bits as they lie
    extensions.append(
        Extension(
            "xlaprof.parse.xplane._native",
            sources=["xlaprof/parse/xplane/_native.c"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=["-O2", "-std=c11"] if sys.platform != "win32" else [],
            optional=True,
        )
    )

setup(ext_modules=extensions)
