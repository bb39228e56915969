"""A chunk's few denoising steps through the Helios transformer, with what the steps share computed once.

Between the steps of one chunk only the noisy latent and the timestep change. Helios's forward
(diffusers' HeliosTransformer3DModel.forward) still redoes, at every step: the history tiers' patchifiers, the
G-buffer half of the patch embedding, the rotary tables, the history's zero-timestep modulation expanded to every
history token, the prompt's projection and every block's cross-attention keys and values. On a CPU those were
more than half of a nano step (21 ms a step, ~7 ms of it the step's own matrix products; BENCHMARKS.md
"Flash live"). ChunkSteps computes them when the chunk starts and runs each step's blocks on what is left:

    chunk start: history tokens (B, Nh, D) | G-buffer tokens (B, Nc, D) | rotary (B, N, 1, head / 2) | per block:
                 history modulation (6, D), cross-attention K, V (B, heads, sink + L, head)
    each step:   noisy tokens + G-buffer tokens → [history | chunk] → blocks → output norm → (B, 16, t, h, w)

The arithmetic is the library's, op for op, up to float rounding: the same modules, the same casts (norms and
modulation in fp32), the same attention. Inference only (the pipeline takes the library's forward wherever
gradients flow), and only for the layout Flash uses (`supports`): another Helios variant runs the library's forward.
The history still attends to the chunk's tokens (Helios's self-attention is not causal), so its hidden states
are recomputed at every step; only its inputs are shared.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from diffusers.models.transformers.transformer_helios import (HeliosAttention, HeliosAttnProcessor,
                                                              HeliosRotaryPosEmbed, center_down_sample_3d,
                                                              pad_for_3d_conv)

from renderer.flash.history import HistoryInputs
from renderer.flash.transformer import FlashTransformer

GELU_TANH_SIGMOID = 2 * (2 / torch.pi) ** 0.5     # 0.5 (1 + tanh(z)) = sigmoid(2 z)
# adds 1 to the two scales of a block's (shift, scale, gate) x 2 modulation, (6, 1): the norms' x (1 + scale)
ONE_PLUS_SCALE = torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0, 0.0]).unsqueeze(-1)


def supports(transformer: FlashTransformer) -> bool:
    """Whether ChunkSteps computes exactly what this transformer's forward does."""
    c = transformer.config                    # diffusers' FrozenDict: read by key, as its type says
    attention = [a for b in transformer.blocks for a in (b.attn1, b.attn2)]
    return (c["zero_history_timestep"] and c["has_multi_term_memory_patch"] and c["guidance_cross_attn"]
            and c["added_kv_proj_dim"] is None and c["qk_norm"] == "rms_norm_across_heads"
            and all(isinstance(a, HeliosAttention) and type(a.processor) is HeliosAttnProcessor
                    and not getattr(a, "fused_projections", False)
                    and a.processor._attention_backend is None for a in attention))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation (FeedForward "gelu-approximate"). On a CPU as x sigmoid(2z), the same function,
    in place: 2.2x faster than aten's tanh GELU at a nano FFN's size; elsewhere aten's own."""
    if x.device.type != "cpu":
        return F.gelu(x, approximate="tanh")
    u = x * x
    return u.mul_(0.044715 * GELU_TANH_SIGMOID).add_(GELU_TANH_SIGMOID).mul_(x).sigmoid_().mul_(x)


def rotate(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Helios's interleaved rotary embedding (apply_rotary_emb_transposed) for x (B, N, heads, head): each pair
    (x1, x2) → (x1 cos - x2 sin, x1 sin + x2 cos), which is the pair as a complex number times e^(i angle);
    `rotation` (B, N, 1, head / 2) complex64. One complex product (in float32, as the library's, which promotes
    to its float32 tables): 7x faster than the library's four real products into a strided result."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rotation).flatten(-2).type_as(x)


def rotary_tables(rope: HeliosRotaryPosEmbed, history: HistoryInputs, chunk_grid: tuple[int, int, int],
                  short_grid: tuple[int, int], device: torch.device) -> torch.Tensor:
    """The rotary angles of [long | mid | short | chunk] tokens as Helios's forward assembles them (the mid and
    long tiers average their positions over their patches) → the rotation `rotate` takes. The same for every chunk
    of a rollout (positions are relative to the chunk), so computed once per layout."""
    indices = tuple(tuple(map(tuple, i.tolist())) for i in (history.indices_long, history.indices_mid,
                                                             history.indices_short, history.indices_chunk))
    return _rotary_tables(rope, indices, chunk_grid[1:], short_grid, device)


@functools.lru_cache(maxsize=8)
def _rotary_tables(rope: HeliosRotaryPosEmbed, indices: tuple, chunk_grid: tuple[int, int],
                   short_grid: tuple[int, int], device: torch.device) -> torch.Tensor:
    long, mid, short, chunk = (torch.tensor(i, device=device) for i in indices)

    def tokens(frames: torch.Tensor, grid: tuple[int, int], pool: int = 1) -> torch.Tensor:
        table = rope(frames, *grid, device)                              # (B, 2 x head, t, h, w)
        if pool > 1:
            table = center_down_sample_3d(pad_for_3d_conv(table, (pool,) * 3), (pool,) * 3)
        return table.flatten(2).transpose(1, 2)

    table = torch.cat([tokens(long, short_grid, 4), tokens(mid, short_grid, 2), tokens(short, short_grid),
                       tokens(chunk, chunk_grid)], dim=1)                # (B, N, 2 x head)
    cos, sin = table.unsqueeze(2).chunk(2, dim=-1)                      # the library reads cos[0::2], sin[1::2]
    return torch.complex(cos[..., 0::2].contiguous(), sin[..., 1::2].contiguous())   # (B, N, 1, head / 2)


def patchify(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A Conv3d whose stride is its kernel (patches that do not overlap, no padding) as one matrix product:
    x (B, C, T, H, W), weight (O, C, pt, ph, pw) → (B, O, T/pt, H/ph, W/pw); a remainder that fills no whole
    patch is dropped, as the convolution drops it."""
    o, c, pt, ph, pw = weight.shape
    b, _, t, h, w = x.shape
    t, h, w = t // pt, h // ph, w // pw
    patches = (x[:, :, :t * pt, :h * ph, :w * pw].reshape(b, c, t, pt, h, ph, w, pw)
               .permute(0, 2, 4, 6, 1, 3, 5, 7).reshape(b, t, h, w, c * pt * ph * pw))
    return F.linear(patches, weight.reshape(o, -1), bias).permute(0, 4, 1, 2, 3)


def patch_tokens(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x (B, C, T, H, W) through a patchifier's Conv3d weight (D, C, pt, ph, pw) → tokens (B, n, D), in the
    library's token order (t, h, w)."""
    return patchify(x, weight, bias).flatten(2).transpose(1, 2)


def history_tokens(transformer: FlashTransformer, history: HistoryInputs) -> torch.Tensor:
    """The history tiers through their patchifiers, as the library pads them (a remainder of the mid (2, 4, 4)
    and long (4, 8, 8) patches repeats) → [long | mid | short] tokens (B, Nh, D). They depend on the history
    alone, so a session may make them before its next chunk's frames arrive (FlashSession.render_stream)."""
    model, dtype = transformer, transformer.patch_embedding.weight.dtype
    tiers = [(model.patch_long, pad_for_3d_conv(history.long, (4, 8, 8))),
             (model.patch_mid, pad_for_3d_conv(history.mid, (2, 4, 4))), (model.patch_short, history.short)]
    return torch.cat([patch_tokens(x.to(dtype), conv.weight, conv.bias) for conv, x in tiers], dim=1)


class ChunkSteps:
    """Velocity calls for one chunk: built from the chunk's G-buffer latent (B, 80, t, h, w), prompt
    (B, L, text_dim) and history; then `(noisy (B, 16, t, h, w), timestep (B,) or (B, 2)) → (B, 16, t, h, w)`,
    what `transformer(cat(noisy, gbuffer_latent), timestep, prompt, **history.kwargs())` returns.
    `tokens`: the history's `history_tokens`, where they were made ahead."""

    def __init__(self, transformer: FlashTransformer, gbuffer_latent: torch.Tensor, prompt: torch.Tensor,
                 history: HistoryInputs, tokens: torch.Tensor | None = None):
        self.model = model = transformer
        dtype = model.patch_embedding.weight.dtype
        self.dtype, self.prompt = dtype, prompt.to(dtype)
        noisy_channels = model.patch_embedding.in_channels - gbuffer_latent.shape[1]
        weight = model.patch_embedding.weight
        self.noisy_weight = weight[:, :noisy_channels]
        self.gbuffer_tokens = patch_tokens(gbuffer_latent.to(dtype), weight[:, noisy_channels:],
                                           model.patch_embedding.bias)                      # (B, Nc, D)
        t, h, w = gbuffer_latent.shape[2:]
        p_t, p_h, p_w = model.config["patch_size"]
        self.grid = (t // p_t, h // p_h, w // p_w)
        self.history_tokens = history_tokens(model, history) if tokens is None else tokens    # (B, Nh, D)
        self.history_length = self.history_tokens.shape[1]
        (s_h, s_w), (k_h, k_w) = history.short.shape[-2:], model.patch_short.kernel_size[1:]
        short_grid = (s_h // k_h, s_w // k_w)
        self.rotation = rotary_tables(model.rope, history, self.grid, short_grid, weight.device)
        self.one_plus_scale = ONE_PLUS_SCALE.to(weight.device)
        # the history's tokens carry timestep 0 (zero_history_timestep): one modulation per block for all of them
        _, zero_proj, _ = model.condition_embedder(torch.zeros(1, device=weight.device), self.prompt,
                                                   is_return_encoder_hidden_states=False)
        zero_proj = zero_proj.unflatten(-1, (6, -1))                                        # (1, 6, D)
        text = model.condition_embedder.text_embedder(self.prompt)                          # (B, L, D)
        self.blocks = [self._block_constants(i, block, zero_proj, text) for i, block in enumerate(model.blocks)]

    def _block_constants(self, i: int, block, zero_proj: torch.Tensor, text: torch.Tensor) -> dict:
        sink = self.model.text_sink
        context = torch.cat([sink.tokens(i, text), text], dim=1) if sink is not None else text
        cross = block.attn2
        key = cross.norm_k(cross.to_k(context)).unflatten(2, (cross.heads, -1)).transpose(1, 2)
        value = cross.to_v(context).unflatten(2, (cross.heads, -1)).transpose(1, 2)
        # (6, B, N, D) float32 per token: shift, 1 + scale, gate of self-attention, then of the FFN; the history's
        # rows (timestep 0) written here, the chunk's at each step (`_modulation`)
        b, nh, nc = text.shape[0], self.history_length, self.gbuffer_tokens.shape[1]
        table = torch.empty(6, b, nh + nc, zero_proj.shape[-1], dtype=torch.float32, device=text.device)
        history = block.scale_shift_table + zero_proj.float() + self.one_plus_scale        # (1, 6, D)
        table[:, :, :nh] = history.transpose(0, 1).unsqueeze(2)
        constants = {"modulation": table, "key": key, "value": value}
        attn = block.attn1
        if attn.is_amplify_history:
            scale = 1.0 + torch.sigmoid(attn.history_key_scale) * (attn.max_scale - 1.0)
            constants["history_key_scale"] = scale.view(1, 1, -1, 1) if attn.history_scale_mode == "per_head" else scale
        return constants

    def __call__(self, noisy: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
        model = self.model
        tokens = patch_tokens(noisy.to(self.dtype), self.noisy_weight) + self.gbuffer_tokens
        hidden = torch.cat([self.history_tokens, tokens], dim=1)                          # (B, N, D)
        temb, proj, _ = model.condition_embedder(timestep, self.prompt, is_return_encoder_hidden_states=False)
        proj = proj.unflatten(-1, (6, -1))                                                   # (B, 6, D)
        for block, constants in zip(model.blocks, self.blocks):
            hidden = self._block(block, constants, hidden, proj)
        # output norm over the chunk's tokens with the chunk's temb (HeliosOutputNorm)
        norm = model.norm_out
        shift, scale = (norm.scale_shift_table + temb.unsqueeze(1)).chunk(2, dim=1)         # (B, 1, D) each
        chunk = hidden[:, self.history_length:]
        chunk = torch.addcmul(shift, norm.norm(chunk.float()), 1 + scale).type_as(chunk)
        out = model.proj_out(chunk)
        b = out.shape[0]
        p_t, p_h, p_w = model.config["patch_size"]
        t, h, w = self.grid
        out = out.reshape(b, t, h, w, p_t, p_h, p_w, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
        return out.flatten(6, 7).flatten(4, 5).flatten(2, 3)

    def _modulation(self, block, constants: dict, proj: torch.Tensor) -> torch.Tensor:
        """The block's modulation table with the chunk's rows for this step's timestep (proj (B, 6, D))."""
        table = constants["modulation"]
        chunk = block.scale_shift_table + proj.float() + self.one_plus_scale                # (B, 6, D)
        table[:, :, self.history_length:] = chunk.transpose(0, 1).unsqueeze(2)
        return table

    def _block(self, block, constants: dict, hidden: torch.Tensor, proj: torch.Tensor) -> torch.Tensor:
        """HeliosTransformerBlock.forward with guidance cross-attention, on [history | chunk] tokens."""
        nh = self.history_length
        shift, scale, gate, c_shift, c_scale, c_gate = self._modulation(block, constants, proj)
        # 1. self-attention over every token
        normed = torch.addcmul(shift, block.norm1(hidden.float()), scale).type_as(hidden)
        attn = block.attn1
        query = attn.norm_q(attn.to_q(normed)).unflatten(2, (attn.heads, -1))
        key = attn.norm_k(attn.to_k(normed)).unflatten(2, (attn.heads, -1))
        value = attn.to_v(normed).unflatten(2, (attn.heads, -1))
        query, key = rotate(query, self.rotation), rotate(key, self.rotation)
        if "history_key_scale" in constants:
            key = torch.cat([key[:, :nh] * constants["history_key_scale"], key[:, nh:]], dim=1)
        out = F.scaled_dot_product_attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2))
        out = attn.to_out[0](out.transpose(1, 2).flatten(2, 3).type_as(query))
        hidden = torch.addcmul(hidden.float(), out, gate).type_as(hidden)
        # 2. cross-attention of the chunk's tokens to [sink | prompt] (the history's tokens skip it)
        chunk = hidden[:, nh:]
        cross = block.attn2
        query = cross.norm_q(cross.to_q(block.norm2(chunk.float()).type_as(chunk)))
        query = query.unflatten(2, (cross.heads, -1)).transpose(1, 2)
        out = F.scaled_dot_product_attention(query, constants["key"], constants["value"])
        chunk += cross.to_out[0](out.transpose(1, 2).flatten(2, 3).type_as(chunk))     # in place: hidden's rows
        # 3. feed-forward over every token
        normed = torch.addcmul(c_shift, block.norm3(hidden.float()), c_scale).type_as(hidden)
        ffn = block.ffn.net
        out = ffn[2](gelu_tanh(ffn[0].proj(normed)))
        return torch.addcmul(hidden.float(), out.float(), c_gate).type_as(hidden)
