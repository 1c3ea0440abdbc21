"""An unconditional diffusion training step with diffusers' UNet2DModel (tiny random-init
config, no attention blocks) and DDPMScheduler.add_noise, the loop of diffusers' unconditional
image generation example (random images stand in for the data set), one sync a step.

Source: huggingface/diffusers examples/unconditional_image_generation/train_unconditional.py
(noise, random timesteps, `noise_scheduler.add_noise`, the UNet's noise prediction against the
noise, MSE, AdamW), reproduced in our own words.

What is true (bare runtime): add_noise moves the scheduler's table to the device and indexes it
with the device timesteps, so nothing in the step reads back; every step has the same shapes.
But the UNet's nearest-neighbour upsampling has no XLA lowering for its backward on this
runtime: aten::upsample_nearest2d_backward runs on the CPU once a step (the bare counters: see
corpus.toml), inside `loss.backward()`, and each call copies its input to the host and back.
autograd runs the XLA backward on its own device thread, where no Python frame is on the
stack, so no input can name the line (the finding is unlocated). No recompilation, unrolled
loop or graph break. Heavy here: about 3 min a compile on a shared 2-core machine."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F
import torch_xla
from diffusers import DDPMScheduler, UNet2DModel

STEPS = 4
BATCH = 2


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = UNet2DModel(
        sample_size=16,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(16, 32),
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
    ).to(device)
    model.train()
    noise_scheduler = DDPMScheduler(num_train_timesteps=1000)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _step in range(STEPS):
        clean_images = torch.randn(BATCH, 3, 16, 16).to(device)
        noise = torch.randn_like(clean_images)
        timesteps = torch.randint(0, 1000, (BATCH,)).to(device)
        noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)
        noise_pred = model(noisy_images, timesteps).sample
        loss = F.mse_loss(noise_pred, noise)
        loss.backward()  # the fallback runs in here, on autograd's device thread
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
