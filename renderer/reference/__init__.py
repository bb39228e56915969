"""The reference renderer: a deferred PBR style shader in torch (the CPU default, and the baseline)."""

from renderer.reference.renderer import STAGES, ReferenceRenderer, ReferenceSession

__all__ = ["STAGES", "ReferenceRenderer", "ReferenceSession"]
