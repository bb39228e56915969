"""The official weights layout: init-random → load → same outputs, and clear errors for broken directories."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from renderer import create_renderer
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.text import PromptError
from renderer.flash.weights import (GBUFFER_ENCODER, TINY_DECODER, TRANSFORMER_CONFIG, TRANSFORMER_PARTIAL,
                                    TRANSFORMER_WEIGHTS, WeightsError)
from studio.cli import main as cli
from tests.test_flash import conds, make_frames, one_torch_thread  # noqa: F401 (autouse fixture)

PROMPT = "a green jungle world"


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("flash") / "tiny"
    assert cli(["flash", "init-random", str(root), "--config", "tiny", "--seed", "5", "--prompt", PROMPT]) == 0
    return root


@pytest.fixture
def broken(weights_dir, tmp_path):
    root = tmp_path / "w"
    shutil.copytree(weights_dir, root)
    return root


def render_two_chunks(renderer) -> np.ndarray:
    frames = make_frames(16)
    with renderer.open_session(64, 32, seed=2) as s:
        return np.concatenate([s.render(frames[i:i + 8], conds(PROMPT, 8)).rgb for i in (0, 8)])


def test_init_random_writes_the_official_layout(weights_dir):
    for name in (TRANSFORMER_CONFIG, TRANSFORMER_WEIGHTS, TRANSFORMER_PARTIAL, GBUFFER_ENCODER, TINY_DECODER,
                 "text_embeddings.safetensors"):
        assert (weights_dir / name).is_file(), name
    config = json.loads((weights_dir / TRANSFORMER_CONFIG).read_text())
    assert config["_class_name"] == "HeliosTransformer3DModel" and config["in_channels"] == 96
    partial = load_file(weights_dir / TRANSFORMER_PARTIAL)
    assert {"patch_embedding.weight", "patch_short.weight", "patch_mid.weight", "patch_long.weight",
            "norm_out.scale_shift_table", "text_sink.slots"} <= set(partial)
    assert partial["patch_embedding.weight"].shape[1] == 96
    assert any(k.startswith("decoder.3.conv.") for k in load_file(weights_dir / TINY_DECODER))


def test_round_trip_gives_the_same_outputs(weights_dir):
    in_memory = create_renderer("flash", config="tiny", seed=5, prompts=[PROMPT], chunk_size=8)
    loaded = create_renderer("flash", weights=weights_dir, chunk_size=8)
    assert loaded.describe()["config"] == "tiny"
    assert np.array_equal(render_two_chunks(in_memory), render_two_chunks(loaded))


def test_missing_file_is_named(broken):
    (broken / TINY_DECODER).unlink()
    with pytest.raises(WeightsError, match="missing tiny_decoder/taew2_1_ft.safetensors"):
        FlashPipeline.from_dir(broken, device="cpu")


def test_missing_directory_is_named(tmp_path):
    with pytest.raises(WeightsError, match="weights directory does not exist"):
        FlashPipeline.from_dir(tmp_path / "nope", device="cpu")


def test_wrong_shapes_are_listed(broken):
    state = load_file(broken / GBUFFER_ENCODER)
    state["encoder.0.weight"] = torch.zeros(3, 3, 3, 3)
    save_file(state, str(broken / GBUFFER_ENCODER))
    with pytest.raises(WeightsError, match=r"gbuf_small_encoder.safetensors: .*1 shape mismatch\(es\): "
                                           r"encoder.0.weight \(3, 3, 3, 3\) !="):
        FlashPipeline.from_dir(broken, device="cpu")


def test_unexpected_and_missing_keys_are_listed(broken):
    partial = load_file(broken / TRANSFORMER_PARTIAL)
    partial["blocks.0.extra"] = torch.zeros(1)
    del partial["patch_mid.weight"]
    save_file(partial, str(broken / TRANSFORMER_PARTIAL))
    base = load_file(broken / TRANSFORMER_WEIGHTS)
    patch_mid = base.pop("patch_mid.weight")
    save_file(base, str(broken / TRANSFORMER_WEIGHTS))
    with pytest.raises(WeightsError, match=r"transformer: checkpoint does not fit the model: 1 missing key\(s\): "
                                           r"patch_mid.weight$"):
        FlashPipeline.from_dir(broken, device="cpu")
    save_file(base | {"patch_mid.weight": patch_mid}, str(broken / TRANSFORMER_WEIGHTS))
    with pytest.raises(WeightsError, match=r"transformer_partial.safetensors: .*1 unexpected key\(s\): blocks.0.extra"):
        FlashPipeline.from_dir(broken, device="cpu")


def test_embeddings_may_come_from_either_transformer_file(broken):
    """Flash embeddings only in the partial (not in transformer/) load."""
    base = load_file(broken / TRANSFORMER_WEIGHTS)
    del base["patch_mid.weight"]
    save_file(base, str(broken / TRANSFORMER_WEIGHTS))
    pipe = FlashPipeline.from_dir(broken, device="cpu")
    assert torch.equal(pipe.transformer.patch_mid.weight, load_file(broken / TRANSFORMER_PARTIAL)["patch_mid.weight"])


def test_corrupt_checkpoint_and_config_are_clear_errors(broken):
    (broken / TRANSFORMER_WEIGHTS).write_bytes(b"not a safetensors file")
    with pytest.raises(WeightsError, match="not a readable safetensors file"):
        FlashPipeline.from_dir(broken, device="cpu")
    (broken / TRANSFORMER_CONFIG).write_text("{")
    with pytest.raises(WeightsError, match="config.json: not valid JSON"):
        FlashPipeline.from_dir(broken, device="cpu")


def test_wider_taehv_tgrow_checkpoint_loads_like_taehv(broken):
    """taew2_1 files may carry a stride-2 TGrow at decoder.7; TAEHV keeps the last-timestep channels."""
    state = load_file(broken / TINY_DECODER)
    w = state["decoder.7.conv.weight"]
    state["decoder.7.conv.weight"] = torch.cat([torch.zeros_like(w), w])
    state["encoder.0.weight"] = torch.zeros(1)                # TAEHV files may hold the encoder too
    save_file(state, str(broken / TINY_DECODER))
    pipe = FlashPipeline.from_dir(broken, device="cpu")
    assert torch.equal(pipe.decoder.decoder[7].conv.weight, w)


def test_cli_reports_broken_directories_in_one_line(broken, capsys):
    (broken / GBUFFER_ENCODER).unlink()
    assert cli(["flash", "info", str(broken)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "gbuf_small_encoder.safetensors" in err and "\n" not in err
    assert cli(["flash", "init-random", str(broken)]) == 2
    assert "not an empty directory" in capsys.readouterr().err
    assert cli(["flash", "init-random", str(broken / "new"), "--config", "huge"]) == 2
    assert "unknown flash config 'huge'; choose one of full, tiny" in capsys.readouterr().err


def test_info_prints_config_and_parameter_counts(weights_dir, capsys):
    assert cli(["flash", "info", str(weights_dir)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["config"]["name"] == "tiny" and info["parameters"]["transformer"] > 0
    assert info["cached_prompts"] >= 1


@pytest.fixture(scope="module")
def tiny_wan_dir(tmp_path_factory):
    """A Wan 2.1-style directory with a real (tiny, random) umT5 encoder and a word-level tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, UMT5Config, UMT5EncoderModel

    root = tmp_path_factory.mktemp("wan")
    words = ["<pad>", "</s>", "<unk>"] + "a the world red blue green purple moon city night".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(root / "tokenizer")
    torch.manual_seed(0)
    UMT5EncoderModel(UMT5Config(vocab_size=len(words), d_model=32, d_kv=8, d_ff=64, num_layers=1,
                                num_heads=4)).save_pretrained(root / "text_encoder")
    return root


def test_embed_adds_prompts_to_the_cache_so_no_encoder_is_needed_later(broken, tiny_wan_dir):
    text = "a purple moon city"
    with pytest.raises(PromptError, match="no embedding for prompt 'a purple moon city'"):
        render_prompt(create_renderer("flash", weights=broken, chunk_size=8), text)
    live = render_prompt(create_renderer("flash", weights=broken, chunk_size=8, text_encoder=str(tiny_wan_dir)),
                         text)                                    # encoded on the fly by umT5
    assert cli(["flash", "embed", str(broken), text, "--text-encoder", str(tiny_wan_dir)]) == 0
    cached = render_prompt(create_renderer("flash", weights=broken, chunk_size=8), text)
    assert np.array_equal(cached, live)


def render_prompt(renderer, text: str) -> np.ndarray:
    with renderer.open_session(64, 32, seed=0) as s:
        return s.render(make_frames(4), conds(text, 4)).rgb


HF_TO_WAN_T5 = {"layer.0.layer_norm": "norm1", "layer.0.SelfAttention.q": "attn.q", "layer.0.SelfAttention.k": "attn.k",
                "layer.0.SelfAttention.v": "attn.v", "layer.0.SelfAttention.o": "attn.o",
                "layer.0.SelfAttention.relative_attention_bias": "pos_embedding.embedding",
                "layer.1.layer_norm": "norm2", "layer.1.DenseReluDense.wi_0": "ffn.gate.0",
                "layer.1.DenseReluDense.wi_1": "ffn.fc1", "layer.1.DenseReluDense.wo": "ffn.fc2"}


def wan_t5_name(key: str) -> str | None:
    """transformers UMT5 → Wan T5Encoder names, as in Wan 2.1's wan/modules/t5.py (written independently)."""
    if key == "shared.weight":
        return "token_embedding.weight"
    if key == "encoder.final_layer_norm.weight":
        return "norm.weight"
    m = re.fullmatch(r"encoder\.block\.(\d+)\.(.+)\.weight", key)
    return f"blocks.{m.group(1)}.{HF_TO_WAN_T5[m.group(2)]}.weight" if m else None


def test_original_wan_text_encoder_layout_encodes_like_the_diffusers_one(tiny_wan_dir, tmp_path):
    """Wan 2.1's own release: models_t5_umt5-xxl-enc-bf16.pth (Wan's T5Encoder names) + google/umt5-xxl/."""
    from transformers import UMT5EncoderModel

    from renderer.flash.text import WAN_T5_CHECKPOINT, WAN_TOKENIZER, UMT5PromptEncoder

    state = UMT5EncoderModel.from_pretrained(tiny_wan_dir / "text_encoder").state_dict()
    wan = {wan_t5_name(k): v for k, v in state.items() if wan_t5_name(k)}
    assert len(wan) == len(state) - 1                                  # embed_tokens is tied to shared
    original = tmp_path / "wan_original"
    (original / "google").mkdir(parents=True)
    torch.save(wan, original / WAN_T5_CHECKPOINT)
    shutil.copytree(tiny_wan_dir / "tokenizer", original / WAN_TOKENIZER)
    a = UMT5PromptEncoder(tiny_wan_dir, 8, 32)("a  red &amp; blue world")
    b = UMT5PromptEncoder(original, 8, 32)("a red & blue world")      # Helios' prompt cleaning: same tokens
    assert a.shape == (5, 32) and torch.equal(a, b)
    shutil.rmtree(original / WAN_TOKENIZER)
    with pytest.raises(PromptError, match="without its google/umt5-xxl/ tokenizer folder"):
        UMT5PromptEncoder(original, 8, 32)
