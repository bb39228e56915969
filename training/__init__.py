"""Training beside the renderer: paired recordings → a Flash model (and its codecs) in the official layout.

    data.py        paired recordings → in-memory clips at the training size, prompts per recording
    codec.py       the TAEHV-architecture RGB encoder, and `train codec` (encoder + decoder on RGB frames)
    targets.py     RGB frames → RGB latents: our codec's encoder, or the Wan 2.1 VAE for official weights
    objective.py   the flow objective and the self-rollout history (the streaming session's own history code)
    trainer.py     `train`: model setup (scratch / weights, LoRA), the loop, checkpoints, export
    distributed.py torchrun: process group, DDP / FSDP wrapping, rank-0-only bookkeeping
    bookkeeping.py JSONL log, loss-curve PNG, atomic checkpoint files
    metrics.py     PSNR, SSIM, temporal flicker (used by `eval`)

Nothing here is imported by the studio's serving path (`alaya-studio serve` never imports training or peft).
See docs/training.md.
"""
