"""Style presets (data files) and prompt → conditioning helpers. Knows nothing of servers."""

from prompt_presets.conditioning import BlendMode, Conditioning, ConditioningError, WeightedPrompt

__all__ = ["BlendMode", "Conditioning", "ConditioningError", "WeightedPrompt"]
