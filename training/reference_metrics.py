"""Metrics that need a reference network, from local weights only (nothing is ever downloaded): CLIP score and
FVD for `alaya-studio eval` (`--clip-weights DIR`, `--i3d-weights FILE`).

CLIP score: 100 x max(cos(image, text), 0) per frame, averaged (the usual definition), with a Hugging Face CLIP
directory (`CLIPModel` + its processor, e.g. openai/clip-vit-base-patch32 saved locally). The text is the prompt
the recording was rendered with.

FVD: the Fréchet distance between I3D features of the output's and the ground truth's clips of `clip_frames`
consecutive frames (16, as in the FVD paper). The I3D is a TorchScript file mapping videos (B, 3, T, 224, 224)
in [-1, 1] to features (B, D), e.g. the I3D torchscript of StyleGAN-V's FVD code, wrapped to that signature.
FVD needs several clips per side: with fewer clips than feature dimensions the covariances are rank-deficient
and the figure is rough (the eval report says how many clips it used).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from training.errors import TrainingError

I3D_SIZE = 224


class ClipScorer:
    def __init__(self, path: str | Path, device: str | torch.device = "cpu"):
        try:
            from transformers import CLIPModel, CLIPProcessor

            model = CLIPModel.from_pretrained(str(path), local_files_only=True)
            # transformers' PreTrainedModel.to is wrapped (functools.wraps of Module.to), and its type asks for self
            # twice (as diffusers' in renderer/flash/pipeline.py)
            self.model = model.to(device).eval()  # type: ignore[arg-type]
            self.processor = CLIPProcessor.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError, KeyError, ImportError) as exc:
            raise TrainingError(f"not a local CLIP directory ({first_line(exc)})", str(path)) from None
        self.device = torch.device(device)
        self._texts: dict[str, torch.Tensor] = {}

    def _text(self, prompt: str) -> torch.Tensor:
        if prompt not in self._texts:
            # CLIP reads at most its context (77 tokens): a long prompt is cut, as CLIP score does everywhere
            tokens = self.processor(text=[prompt], return_tensors="pt", padding=True, truncation=True,
                                    max_length=self.model.config.text_config.max_position_embeddings)
            with torch.inference_mode():
                emb = self.model.get_text_features(**{k: v.to(self.device) for k, v in tokens.items()})
            self._texts[prompt] = F.normalize(_tensor(emb), dim=-1)
        return self._texts[prompt]

    def score(self, rgb: np.ndarray, prompt: str) -> float:
        """One frame, uint8 (H, W, 3), against the prompt's text."""
        pixels = self.processor(images=[rgb], return_tensors="pt")["pixel_values"].to(self.device)
        with torch.inference_mode():
            image = F.normalize(_tensor(self.model.get_image_features(pixel_values=pixels)), dim=-1)
        return float(100.0 * (image * self._text(prompt)).sum(-1).clamp_min(0).mean())


def _tensor(features) -> torch.Tensor:
    """transformers returns the projected features as a tensor (or, in some versions, an output object)."""
    return features if isinstance(features, torch.Tensor) else features.pooler_output


class I3dFeatures:
    def __init__(self, path: str | Path, device: str | torch.device = "cpu"):
        try:
            self.model = torch.jit.load(str(path), map_location=device).eval()
        except (RuntimeError, ValueError, OSError) as exc:
            raise TrainingError(f"not a TorchScript I3D ({first_line(exc)})", str(path)) from None
        self.device = torch.device(device)

    def __call__(self, frames: list[np.ndarray]) -> np.ndarray:
        """One clip, T frames uint8 (H, W, 3) → its feature vector (D,)."""
        video = torch.from_numpy(np.stack(frames)).to(self.device).permute(3, 0, 1, 2).float()   # (3, T, H, W)
        video = F.interpolate(video, size=(I3D_SIZE, I3D_SIZE), mode="bilinear", align_corners=False)
        with torch.inference_mode():
            features = self.model(video.unsqueeze(0) / 127.5 - 1.0)
        return features.reshape(-1).double().cpu().numpy()


class FvdClips:
    """Cuts an output stream and its ground truth into clips of `clip_frames` and keeps their I3D features."""

    def __init__(self, i3d: I3dFeatures, clip_frames: int = 16):
        self.i3d, self.clip_frames = i3d, clip_frames
        self.output: list[np.ndarray] = []
        self.truth: list[np.ndarray] = []
        self._pending: tuple[list, list] = ([], [])

    def update(self, output: np.ndarray, truth: np.ndarray) -> None:
        out, gt = self._pending
        out.append(output)
        gt.append(truth)
        if len(out) == self.clip_frames:
            self.output.append(self.i3d(out))
            self.truth.append(self.i3d(gt))
            self._pending = ([], [])

    def merged(self, other: "FvdClips") -> "FvdClips":
        out = FvdClips(self.i3d, self.clip_frames)
        out.output, out.truth = self.output + other.output, self.truth + other.truth
        return out

    def summary(self) -> dict:
        clips = len(self.output)
        fvd = frechet_distance(np.stack(self.output), np.stack(self.truth)) if clips >= 2 else None
        return {"fvd": None if fvd is None else round(fvd, 3), "fvd_clips": clips}


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Fréchet distance between Gaussians fitted to feature rows a (N, D) and b (M, D):
    |mu_a - mu_b|^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2)). The trace of the square root is the sum of the square
    roots of the eigenvalues of S_a S_b (real and >= 0 for covariances; rounding noise is clipped)."""
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    eig = np.linalg.eigvals(s_a @ s_b).real.clip(min=0)
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(s_a) + np.trace(s_b) - 2 * np.sqrt(eig).sum())


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__
