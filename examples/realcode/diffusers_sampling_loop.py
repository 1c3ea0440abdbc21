"""The "deconstructed pipeline" sampling loop of diffusers' documentation, on the XLA device:
a UNet2DModel (tiny random-init config) and a DDPMScheduler, 6 timesteps, written by hand the
way the guide writes it (for t in scheduler.timesteps: the UNet predicts the noise residual,
scheduler.step computes the previous sample), with nothing that syncs inside the loop.

Source: huggingface/diffusers docs/source/en/using-diffusers/write_own_pipeline.md
("Deconstruct a basic pipeline"), reproduced in our own words.

What is true (bare runtime): nothing syncs until the image is read at the end, so the 6
iterations trace into one graph holding 6 copies of the UNet, compiled once and run once (the
run has no step boundary at all). The loop is the user's `for t in scheduler.timesteps`. The body
is not pure: DDPMScheduler.step indexes its host tables (alphas_cumprod) with `t` and branches
on `t > 0`, so scan is no drop-in; the fix diffusers' own pipelines use on XLA is a sync per
timestep (`xm.mark_step()` at the end of each iteration, in every pipeline's denoising loop),
one UNet graph compiled once and reused 6 times. A persistent compilation cache cannot help a
graph compiled once per process that has no repeated step, and scan_layers does not apply."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch_xla
from diffusers import DDPMScheduler, UNet2DModel

TIMESTEPS = 6


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = UNet2DModel(
        sample_size=16,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
    ).to(device)
    model.eval()
    scheduler = DDPMScheduler(num_train_timesteps=1000)
    scheduler.set_timesteps(TIMESTEPS)
    sample = torch.randn(1, 3, 16, 16).to(device)
    for t in scheduler.timesteps:  # expect: unrolled_loop
        with torch.no_grad():
            noise_pred = model(sample, t).sample
        sample = scheduler.step(noise_pred, t, sample).prev_sample
    image = (sample / 2 + 0.5).clamp(0, 1)
    print(f"image mean {image.cpu().mean().item():.4f}")


if __name__ == "__main__":
    main()
