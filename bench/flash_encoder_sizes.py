"""For each G-buffer encoder family: the width that gives the model card's 37 MB in bf16 and in fp32, and the
size at hidden 128 (the card's "hidden dim 128"). Pure arithmetic on modules built on the meta device.

    python -m bench.flash_encoder_sizes       # prints a Markdown table (docs/flash.md)
"""

from __future__ import annotations

import torch

from renderer.flash.config import GBUFFER_CHANNELS, LATENT_CHANNELS
from renderer.flash.gbuffer_encoder import grouped_encoder
from renderer.flash.taehv import taehv_encoder

CARD_BYTES = 37e6
G, L = GBUFFER_CHANNELS, LATENT_CHANNELS


def params(module) -> int:
    return sum(p.numel() for p in module.parameters())


FAMILIES = {
    "grouped (hidden per branch)": lambda w: params(grouped_encoder(w)),
    "branches (TAEHV width per branch)": lambda w: G * params(taehv_encoder(w)),
    "shared (TAEHV width) + fusion": lambda w: params(taehv_encoder(w)) + (G * L) ** 2 + G * L,
}


def main() -> None:
    print("| family | params at 128 | MB bf16 / fp32 at 128 | width for 37 MB bf16 | width for 37 MB fp32 |")
    print("|---|---|---|---|---|")
    with torch.device("meta"):
        for name, count in FAMILIES.items():
            at128 = count(128)
            fit = {b: min(range(8, 1024), key=lambda w: abs(count(w) * b - CARD_BYTES)) for b in (2, 4)}
            cells = [f"{w} ({count(w) * b / 1e6:.1f} MB)" for b, w in fit.items()]
            print(f"| {name} | {at128 / 1e6:.2f} M | {at128 * 2 / 1e6:.1f} / {at128 * 4 / 1e6:.1f} | "
                  f"{cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
