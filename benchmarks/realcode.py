"""The real-code corpus (examples/realcode) under xlaprof: right/wrong per set-up.

Run: python benchmarks/realcode.py [SETUP ...] [--out DIR]   (PJRT_DEVICE=CPU is set here)

Model and training code from real libraries (transformers, torchvision, timm, accelerate,
diffusers, peft, datasets) and
patterns of public training code reproduced in our own words, each profiled as its manifest
entry says (examples/realcode/corpus.toml: `xlaprof run`, the script's own `xlaprof.profile()`,
or a pasted log) and judged by examples/corpus/judge.py: expected findings at the marked lines
with a fix text that applies, no control fires, one step per training iteration, compile count
as in the bare runtime. tests/corpus/test_realcode.py runs the fast ones; this runs all of them
(about 20 to 120 s each on a shared 2-core machine) and writes realcode.json in --out.
"""

from __future__ import annotations

from corpus import EXAMPLES, main

if __name__ == "__main__":
    main(EXAMPLES / "realcode", __doc__)
