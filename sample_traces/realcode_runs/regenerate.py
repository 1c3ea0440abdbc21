"""Record the run directories that tests/analyzers/test_recompilation_realcode.py and
tests/analyzers/test_unsynced_realcode.py read.

Each set-up of the real-code corpus (examples/realcode) that issue 29's recompilation classes are
judged on runs once under `xlaprof run`, from the repository root, as
`python -c "runpy.run_path('examples/realcode/NAME.py')"`: the user's frames then name the
script by its path relative to the checkout, so the committed runs read the same on any
checkout (tests pass the repository root as the source root). Two are made smaller so that each
recorded run stays well under 1 MB: wlm_get_batch stops after 5 steps (`--max-steps 5`: 5 of its
8 graphs, 3 of them late), and mixtral_one_layer.py (this folder) is hf_mixtral_moe with one
decoder layer and a hidden size of 32.

Only what the analysis reads is kept: run.json, steps.jsonl, executions.jsonl (runs recorded
since issue 45), modules.json (the live module tree unrolled_loop matches; since issue 47),
debug.log, fallbacks.log, metrics/
and graphs/ (HLO text and HloProto per compiled graph).

Usage: python sample_traces/realcode_runs/regenerate.py [NAME ...]   (needs the runtime and
realcode extras; PJRT_DEVICE=CPU is set here)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SETUPS: dict[str, tuple[str, list[str]]] = {
    "gcn_eval_three_sizes": ("examples/realcode/gcn_eval_three_sizes.py", []),
    "hf_trainer_bert": ("examples/realcode/hf_trainer_bert.py", []),
    "hf_bert_cosine_lr": ("examples/realcode/hf_bert_cosine_lr.py", []),
    "mp_mnist_short_batch": ("examples/realcode/mp_mnist_short_batch.py", []),
    "hf_gpt2_decode": ("examples/realcode/hf_gpt2_decode.py", []),
    "wlm_get_batch": ("examples/realcode/wlm_get_batch.py", ["--max-steps", "5"]),
    "mixtral_one_layer": ("sample_traces/realcode_runs/mixtral_one_layer.py", []),
    # issue 37 (B): read sites, fixed evaluation sets, split-off graphs, padding
    "hf_generate_reads": ("examples/realcode/hf_generate_reads.py", []),
    "wlm_item_reads": ("examples/realcode/wlm_item_reads.py", []),
    "gat_three_index_sets": ("examples/realcode/gat_three_index_sets.py", []),
    "dcgan_short_batch": ("examples/realcode/dcgan_short_batch.py", []),
    "text_cls_dynamic_padding": ("examples/realcode/text_cls_dynamic_padding.py", []),
    "text_cls_pad_multiple_16": ("examples/realcode/text_cls_dynamic_padding.py", []),
    # issue 37: loops that never sync, graphs that grow
    "diffusers_sampling_loop": ("examples/realcode/diffusers_sampling_loop.py", []),
    "neural_ode_euler": ("examples/realcode/neural_ode_euler.py", []),
    "hf_generate_dynamic_cache": ("examples/realcode/hf_generate_dynamic_cache.py", []),
    "pt_examples_regression": ("examples/realcode/pt_examples_regression.py", []),
    # issue 47: read sites in two functions, a step split by a read (costs that add up)
    "mp_eval_reads": ("examples/realcode/mp_eval_reads.py", []),
    "item_split_padding": ("examples/realcode/item_split_padding.py", []),
    # issue 47: fixes that fit the cause
    "nanogpt_grad_accum": ("examples/realcode/nanogpt_grad_accum.py", []),
    "reinforce_episode": ("examples/realcode/reinforce_episode.py", []),
    "text_cls_growing_buckets": ("examples/realcode/text_cls_growing_buckets.py", []),
    "hf_trainer_eval_accumulate": ("examples/realcode/hf_trainer_eval_accumulate.py", []),
    "fsdp_auto_wrap": ("examples/realcode/fsdp_auto_wrap.py", []),
    "grad_accum_helper": ("examples/realcode/grad_accum_helper.py", []),
    "timm_random_erasing": ("examples/realcode/timm_random_erasing.py", []),
}
# Environment a recording adds (the padded variant that `xlaprof diff` compares).
ENV: dict[str, dict[str, str]] = {"text_cls_pad_multiple_16": {"PAD_TO_MULTIPLE_OF": "16"}}
# What the analysis of a run reads; a run judged on its reads alone keeps no graphs (the
# generate run's 40 growing graphs are 4 MB of HLO).
NO_GRAPHS = {"hf_generate_reads"}
KEEP = (
    "run.json",
    "steps.jsonl",
    "executions.jsonl",
    "modules.json",
    "debug.log",
    "fallbacks.log",
    "metrics",
    "graphs",
)
BOOTSTRAP = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


def regenerate(name: str) -> None:
    script, options = SETUPS[name]
    env = dict(os.environ, PJRT_DEVICE="CPU", HF_HUB_OFFLINE="1", **ENV.get(name, {}))
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        command = [sys.executable, "-m", "xlaprof", "run", "-q", "--out", str(out), *options]
        command += ["--", sys.executable, "-c", BOOTSTRAP, script]
        subprocess.run(command, cwd=ROOT, env=env, check=False)
        (run,) = [p.parent for p in out.glob("*/run.json")]
        target = HERE / name
        shutil.rmtree(target, ignore_errors=True)
        (target / run.name).mkdir(parents=True)
        for kept in KEEP:
            if kept == "graphs" and name in NO_GRAPHS:
                continue
            source = run / kept
            if source.is_dir():
                shutil.copytree(source, target / run.name / kept)
            elif source.is_file():
                shutil.copy2(source, target / run.name / kept)


if __name__ == "__main__":
    for name in sys.argv[1:] or SETUPS:
        regenerate(name)
        size = sum(f.stat().st_size for f in (HERE / name).rglob("*") if f.is_file())
        print(f"{name}: {size} bytes")
