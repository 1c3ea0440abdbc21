"""A text-to-image UNet training step with diffusers' UNet2DConditionModel (tiny random-init
config) and DDPMScheduler.add_noise, the loop of diffusers' text-to-image training example
(random latents and text embeddings stand in for the VAE and the text encoder), one sync a step.

Source: huggingface/diffusers examples/text_to_image/train_text_to_image.py (noise, random
timesteps, `noise_scheduler.add_noise`, the UNet's noise prediction against the noise, MSE),
reproduced in our own words.

What is true (bare runtime): a healthy step. add_noise moves the scheduler's table to the device
and indexes it with the device timesteps, so nothing is read back; every step has the same
shapes, so the step's graph compiles once and is reused (the first step's graph differs only in
that AdamW's state does not exist yet). No recompilation, host sync, fallback or graph break."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F
import torch_xla
from diffusers import DDPMScheduler, UNet2DConditionModel

STEPS = 5
BATCH = 2


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    unet = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        norm_num_groups=8,
    ).to(device)
    unet.train()
    noise_scheduler = DDPMScheduler(num_train_timesteps=1000)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
    for _step in range(STEPS):
        latents = torch.randn(BATCH, 4, 16, 16).to(device)
        text_embeddings = torch.randn(BATCH, 8, 32).to(device)
        noise = torch.randn_like(latents)
        timesteps = torch.randint(0, 1000, (BATCH,)).to(device)
        noisy_latents = noise_scheduler.add_noise(latents, noise, timesteps)
        pred = unet(noisy_latents, timesteps, encoder_hidden_states=text_embeddings).sample
        loss = F.mse_loss(pred.float(), noise.float(), reduction="mean")
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
