"""Learning as the report says (issue 24): mean flow (average velocity, JVP target, jump sampler, the interval
embedding as a weights variant), the light GAN term, and training history that reaches every tier."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from helpers.torch_threads import one_torch_thread  # noqa: F401
from renderer.flash.config import TINY
from renderer.flash.gbuffer_encoder import GBufferEncoder
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.sampler import FewStepSampler
from renderer.flash.transformer import FlashTransformer
from renderer.flash.decoder import TinyDecoder
from studio.cli import main as cli
from training.gan import GanTerm
from training.objective import FlashTrainee, ObjectiveSettings, mean_flow_loss, total_derivative
from training.trainer import Modules, TrainSettings, prepare_objective
from tests.test_training import SIZE, codec, held_out_outputs, recordings  # noqa: F401 (fixtures)

MEAN_FLOW = dataclasses.replace(TINY, interval_embedding=True)


# ---- mean flow on a distribution with a known answer ----------------------------------------------------------
def two_points(n: int, g: torch.Generator) -> torch.Tensor:
    return torch.where(torch.rand(n, 1, generator=g) < 0.5, -1.0, 1.0)


def w1_to_two_points(samples: torch.Tensor) -> float:
    """1-D Wasserstein-1 distance to the even two-point distribution {-1, +1} (sorted samples vs its quantiles)."""
    n = samples.numel()
    target = torch.where(torch.arange(n) < n // 2, -1.0, 1.0)
    return float((samples.flatten().sort().values - target).abs().mean())


def mlp(inputs: int) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, 48), nn.SiLU(), nn.Linear(48, 48), nn.SiLU(), nn.Linear(48, 1))


def test_one_mean_flow_step_beats_one_flow_matching_step_on_two_points():
    """Data {-1, +1}. One flow-matching step from t = 1 lands on E[x] = 0 whatever the training (the velocity at
    pure noise is n - E[x]): W1 = 1. One mean-flow jump follows the whole ODE: it can land on the two points."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    flow, mean = mlp(2), mlp(3)
    opt_flow, opt_mean = torch.optim.Adam(flow.parameters(), 3e-3), torch.optim.Adam(mean.parameters(), 3e-3)
    def u(x, r, t):
        return mean(torch.cat([x, r[:, None], t[:, None]], dim=1))
    for _ in range(600):
        z, n, t = two_points(256, g), torch.randn(256, 1, generator=g), torch.rand(256, generator=g)
        x = FewStepSampler.add_noise(z, n, t[:, None])
        loss = (flow(torch.cat([x, t[:, None]], 1)) - FewStepSampler.velocity_target(z, n)).pow(2).mean()
        opt_flow.zero_grad(), loss.backward(), opt_flow.step()
        t, r = torch.rand(256, generator=g), torch.rand(256, generator=g)
        t, r = torch.maximum(t, r), torch.minimum(t, r)
        r = torch.where(torch.rand(256, generator=g) < 0.5, t, r)        # half plain flow (r = t), as in MeanFlow
        loss, _, _, _ = mean_flow_loss(u, z, n, t, r)
        opt_mean.zero_grad(), loss.backward(), opt_mean.step()

    one_step, jump = FewStepSampler(num_steps=1, shift=1.0), FewStepSampler(num_steps=1, shift=1.0, mean_flow=True)
    with torch.no_grad():
        n, ones = torch.randn(4000, 1, generator=g), torch.ones(4000)
        x_flow = one_step.step(n, flow(torch.cat([n, ones[:, None]], 1)), 1.0, 0.0)
        x_mean = jump.step(n, u(n, torch.full((4000,), jump.jump_end(0)), ones), 1.0, 0.0)
    w_flow, w_mean = w1_to_two_points(x_flow), w1_to_two_points(x_mean)
    # measured (seeds 0, 1, 2): flow 0.82, 0.75, 0.89; mean flow 0.30, 0.32, 0.32
    assert w_flow > 0.6
    assert w_mean < 0.5 * w_flow


def test_the_mean_flow_sampler_lands_exactly_with_the_true_average_velocity():
    """Gaussian data N(0, s^2): x_t = (1 - t) x + t n is N(0, sd_t^2), sd_t^2 = (1 - t)^2 s^2 + t^2, and the flow
    maps z_t to z_t sd_r / sd_t, so u(z, r, t) = z (1 - sd_r / sd_t) / (t - r). Four jumps land on n * s exactly;
    Euler with the instantaneous velocity v = z sd_t' / sd_t does not (the check can tell them apart)."""
    s = 0.3
    def sd(t):
        return ((1 - t) ** 2 * s ** 2 + t ** 2) ** 0.5
    def dsd(t):
        return (t - (1 - t) * s ** 2) / sd(t)
    jumps, euler = FewStepSampler(num_steps=4, shift=5.0, mean_flow=True), FewStepSampler(num_steps=4, shift=5.0)
    sigmas = jumps.sigmas().tolist()
    n = torch.randn(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x, y = n.clone(), n.clone()
    for i in range(4):
        t, r = sigmas[i], jumps.jump_end(i)
        x = jumps.step(x, x * (1 - sd(r) / sd(t)) / (t - r), t, sigmas[i + 1])
        y = euler.step(y, y * dsd(t) / sd(t), t, sigmas[i + 1])
    assert torch.allclose(x, n * s, atol=1e-9)
    assert (y - n * s).abs().max() > 1e-2


def tiny_trainee(objective: str = "meanflow", gan=None, chunks: int = 2) -> FlashTrainee:
    torch.manual_seed(0)
    config = MEAN_FLOW if objective == "meanflow" else TINY
    transformer = FlashTransformer(config)
    if config.interval_embedding:                # a trained interval embedding, not the zero start
        for p in transformer.condition_embedder.interval_embedder.parameters():
            nn.init.normal_(p, std=0.05)
    return FlashTrainee(config, transformer, GBufferEncoder.for_config(config),
                        ObjectiveSettings(chunks, 0.5, objective), gan=gan)


def history_inputs(config, batch: int = 2):
    from training.objective import batch_inputs, batched_history

    history = batched_history(config, batch, 2, 4, "cpu", torch.float32)
    history.push(torch.randn(batch, 16, 2, 2, 4), torch.randn(batch, 80, 2, 2, 4))
    return batch_inputs(history, 2)


def test_the_jvp_total_derivative_of_the_transformer_equals_a_finite_difference():
    trainee = tiny_trainee().double()
    g = torch.Generator().manual_seed(1)
    x, v = (torch.randn(2, 16, 2, 2, 4, generator=g, dtype=torch.float64) for _ in range(2))
    gbuf, prompt = torch.randn(2, 80, 2, 2, 4, dtype=torch.float64), torch.randn(2, 8, 32, dtype=torch.float64)
    inputs = history_inputs(trainee.config)
    inputs = type(inputs)(**{k: t.double() if t.is_floating_point() else t for k, t in vars(inputs).items()})
    t, r = torch.tensor([0.7, 0.4], dtype=torch.float64), torch.tensor([0.2, 0.1], dtype=torch.float64)
    def u(x_, r_, t_):
        return trainee.velocity(x_, t_, gbuf, prompt, inputs, r_)
    dudt = total_derivative(u, x, r, t, v)
    eps = 2e-5       # timesteps are 1000 t into sinusoids (u turns fast in t); Helios modulates in fp32
    def along(dr):
        return (u(x + eps * v, r + dr, t + eps) - u(x - eps * v, r - dr, t - eps)) / (2 * eps)
    def error(a, b):
        return float((a - b).norm() / b.norm())
    assert error(dudt, along(0.0)) < 5e-3       # measured 7e-4
    # and it is the *total* derivative with r held: moving r too, or leaving t out, gives another one
    assert error(dudt, along(eps)) > 2e-2
    x_only = (u(x + eps * v, r, t) - u(x - eps * v, r, t)) / (2 * eps)
    assert error(dudt, x_only) > 2e-2


def test_a_mean_flow_training_step_gives_every_parameter_of_the_transformer_a_gradient():
    trainee = tiny_trainee()
    g = torch.Generator().manual_seed(0)
    loss = trainee(torch.rand(2, 16, 5, 3, 16, 32), torch.randn(2, 16, 4, 2, 4), torch.randn(2, 8, 32), False, g)
    loss.backward()
    emb = trainee.transformer.condition_embedder.interval_embedder
    assert torch.isfinite(loss) and emb.linear_2.weight.grad.abs().sum() > 0
    assert trainee.transformer.proj_out.weight.grad.abs().sum() > 0


# ---- the interval embedding as a weights variant --------------------------------------------------------------
def test_the_interval_embedding_starts_at_zero_and_leaves_the_model_unchanged():
    torch.manual_seed(0)
    model = FlashTransformer(TINY).eval()
    hidden, prompt = torch.randn(1, 96, 2, 2, 4), torch.randn(1, 8, 32)
    inputs = history_inputs(TINY, 1)
    before = model(hidden, torch.tensor([700.0]), prompt, **inputs.kwargs(), return_dict=False)[0]
    keys = set(model.state_dict())
    model.add_interval_embedding()
    assert {k for k in model.state_dict() if k not in keys} == {
        f"condition_embedder.interval_embedder.linear_{i}.{p}" for i in (1, 2) for p in ("weight", "bias")}
    after = model(hidden, torch.tensor([[700.0, 300.0]]), prompt, **inputs.kwargs(), return_dict=False)[0]
    assert torch.equal(before, after)


def test_prepare_objective_adds_the_embedding_to_weights_without_it_and_records_it():
    modules = Modules(TINY, FlashTransformer(TINY), None, None, None, None, None, True)
    prepare_objective(modules, TrainSettings(config="tiny", objective="meanflow"))
    assert modules.config.interval_embedding and modules.transformer.has_interval_embedding
    flow = Modules(TINY, FlashTransformer(TINY), None, None, None, None, None, True)
    prepare_objective(flow, TrainSettings(config="tiny"))
    assert not flow.config.interval_embedding and not flow.transformer.has_interval_embedding


def test_a_mean_flow_directory_round_trips_and_inspect_tells_the_variants_apart(tmp_path, capsys):
    import json

    for name, config in (("flow", TINY), ("meanflow", MEAN_FLOW)):
        FlashPipeline.random(config, seed=0, device="cpu").save(tmp_path / name)
        assert cli(["flash", "inspect", str(tmp_path / name), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["loads"] and report["mean_flow"] is (name == "meanflow")
        loaded = FlashPipeline.from_dir(tmp_path / name, device="cpu")
        meanflow = name == "meanflow"
        assert loaded.config.interval_embedding is meanflow and loaded.sampler.mean_flow is meanflow
    assert cli(["flash", "inspect", str(tmp_path / "meanflow")]) == 0
    assert "mean flow" in capsys.readouterr().out
    # a config that says mean flow over weights without the embedding does not load, and says why
    doc = json.loads((tmp_path / "flow/transformer/config.json").read_text())
    doc["flash"]["interval_embedding"] = True
    (tmp_path / "flow/transformer/config.json").write_text(json.dumps(doc))
    assert cli(["flash", "inspect", str(tmp_path / "flow"), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert any("interval_embedder" in k for k in report["files"]["transformer/"]["missing"])


# ---- the GAN term ---------------------------------------------------------------------------------------------
def test_the_discriminator_learns_and_the_generator_gets_its_gradient():
    torch.manual_seed(0)
    gan = GanTerm(TinyDecoder(TINY.decoder_channels), weight=0.1, lr=1e-3)
    real_latent = torch.randn(2, 16, 1, 2, 4)
    fake_latent = (0.3 * torch.randn(2, 16, 1, 2, 4)).requires_grad_(True)
    g_loss = gan.generator_loss(fake_latent, real_latent)
    g_loss.backward()
    assert fake_latent.grad.abs().sum() > 0                               # the generator is pushed ...
    assert all(p.grad is None for p in gan.discriminator.parameters())     # ... without touching D
    losses = [gan.discriminator_step()]
    for _ in range(30):
        gan.generator_loss(fake_latent.detach(), real_latent)
        losses.append(gan.discriminator_step())
    assert losses[-1] < 0.8 * losses[0]                                    # D tells these apart


def test_the_gan_term_reaches_the_transformer_in_a_training_step():
    gan = GanTerm(TinyDecoder(TINY.decoder_channels), weight=0.5)
    batch = (torch.rand(2, 16, 5, 3, 16, 32), torch.randn(2, 16, 4, 2, 4), torch.randn(2, 8, 32), False)
    plain, with_gan = tiny_trainee("flow"), tiny_trainee("flow", gan)
    a = plain(*batch, torch.Generator().manual_seed(0))
    b = with_gan(*batch, torch.Generator().manual_seed(0))
    assert not torch.equal(a, b) and gan.pending is not None
    a.backward(), b.backward()            # same weights, same draws: only the GAN term tells the gradients apart
    grads = [m.transformer.proj_out.weight.grad for m in (plain, with_gan)]
    assert (grads[0] - grads[1]).abs().sum() > 1e-3 * grads[0].abs().sum()


# ---- history in training --------------------------------------------------------------------------------------
def long_tier_seen(trainee: FlashTrainee, warmup: int) -> list[bool]:
    """Per transformer call of one training step: whether the long history tier held anything."""
    seen = []
    hook = trainee.transformer.register_forward_pre_hook(
        lambda _m, _a, kw: seen.append(bool(kw["latents_history_long"].abs().sum() > 0)), with_kwargs=True)
    chunks = trainee.settings.chunks + warmup
    trainee(torch.rand(2, 8 * chunks, 5, 3, 16, 32), torch.randn(2, 16, 2 * chunks, 2, 4), torch.randn(2, 8, 32),
            False, torch.Generator().manual_seed(0), warmup)
    hook.remove()
    return seen


@pytest.mark.parametrize("objective", ["flow", "meanflow"])
def test_the_long_history_tier_is_reached_in_a_training_step_with_warm_up_chunks(objective):
    from training.objective import warmup_chunks_to_reach_long

    trainee = tiny_trainee(objective)
    assert not any(long_tier_seen(trainee, 0))        # two 2-latent chunks never reach (4, 2, 1)'s long tier
    assert warmup_chunks_to_reach_long(trainee.config, chunks=2) == 1
    seen = long_tier_seen(trainee, 1)
    assert not seen[0] and seen[-1]                   # the last trained chunk sees it (4 latents pushed before)
    assert all(long_tier_seen(trainee, 2))            # with two, every trained chunk does


def test_history_chunks_default_to_what_the_recordings_allow(tmp_path):
    from gbuffer.formats import write_npy_windows
    from helpers.torch_threads import random_frames
    from training.trainer import auto_history_chunks

    write_npy_windows(random_frames(16), tmp_path / "short")
    write_npy_windows(random_frames(48), tmp_path / "long")
    short, long = str(tmp_path / "short"), str(tmp_path / "long")
    assert auto_history_chunks([long], TINY, chunks=2) == 1
    assert auto_history_chunks([long], TINY, chunks=3) == 0          # three chunks reach the long tier alone
    assert auto_history_chunks([long], TINY, chunks=1) == 2
    assert auto_history_chunks([long, short], TINY, chunks=1) == 1   # 16 frames: 2 chunks, 1 of them trained


@pytest.mark.parametrize("flag, value, message", [("--history-chunks", "-1", "--history-chunks: must be >= 0"),
                                                   ("--gan-weight", "-0.1", "--gan-weight: the GAN weight")])
def test_bad_objective_settings_are_one_line_errors(tmp_path, capsys, flag, value, message):
    assert cli(["train", str(tmp_path), "--config", "tiny", flag, value, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        cli(["train", str(tmp_path), "--objective", "distill", "-o", str(tmp_path / "out")])
    assert exc.value.code == 2


# ---- the CLI, end to end --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_train_meanflow_with_gan_resumes_and_writes_a_mean_flow_directory(recordings, codec, tmp_path):
    """`train --objective meanflow --gan-weight`: checkpoints carry the discriminator, a resume continues, and the
    exported directory loads as the mean-flow variant and renders."""
    import json

    from renderer import create_renderer

    out = tmp_path / "mf"
    common = ["train", str(recordings["a"]), "--config", "tiny", "--codec", str(codec), "--size", SIZE,
              "--chunks", "2", "--objective", "meanflow", "--gan-weight", "0.05", "--checkpoint-every", "2",
              "--log-every", "1", "-o", str(out), "--no-progress"]
    assert cli(common + ["--steps", "2"]) == 0
    assert "gan" in torch.load(sorted((out / "checkpoints").glob("*.pt"))[-1], weights_only=False)
    assert cli(common + ["--steps", "3", "--resume"]) == 0
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 3 and all(r["mse"] > 0 and r["mse"] != r["loss"] for r in log), log    # before weighting
    assert json.loads((out / "transformer/config.json").read_text())["flash"]["interval_embedding"] is True
    renderer = create_renderer("flash", weights=str(out), device="cpu")
    assert renderer.pipeline.sampler.mean_flow
    outputs, _, _ = held_out_outputs(out, recordings["held"])
    assert len(outputs) and outputs[0].shape[-1] == 3
    # a flow run refuses to resume the mean-flow checkpoints
    flow = [("flow" if c == "meanflow" else c) for c in common]
    assert cli(flow + ["--steps", "4", "--resume"]) == 2


def test_the_mean_flow_loss_is_weighted_per_sample_so_a_wild_model_cannot_run_it_away():
    """An untrained transformer's du/dt makes the target large; the adaptive weight keeps each sample's term
    near 1 (below 1 by construction: e / (e + c)), and a sample a thousand times further off pulls no harder."""
    g = torch.Generator().manual_seed(0)
    z, n = torch.randn(4, 2, generator=g), torch.randn(4, 2, generator=g)
    t, r = torch.full((4,), 0.8), torch.full((4,), 0.3)
    scale = torch.tensor([1.0, 1.0, 1e3, 1e3])[:, None]
    w = torch.ones(1, requires_grad=True)

    def wild(x, r_, t_):
        return w * scale * (x + t_[:, None])          # du/dt and the error both grow with the scale

    loss, _, _, unweighted = mean_flow_loss(wild, z, n, t, r)
    loss.backward()
    assert 0.5 < loss.item() < 1.0 and w.grad is not None and torch.isfinite(w.grad).all()
    assert unweighted > 1e4                          # what the weight hides, reported as it is
    assert abs(w.grad.item()) < 10.0                  # unweighted, the 1e3 samples' gradient is ~1e6
