import numpy as np
import pytest

from gbuffer import CHANNELS, GBufferError, GBufferFrame
from prompt_presets import Conditioning, ConditioningError, WeightedPrompt


def test_channel_order_is_the_official_one():
    assert CHANNELS == ("albedo", "depth", "metallic", "normal", "roughness")


def test_frame_accessors_and_from_channels(rng):
    chans = {c: rng.integers(0, 256, (4, 6, 3), dtype=np.uint8) for c in CHANNELS}
    f = GBufferFrame.from_channels(3, 0.1, chans)
    assert (f.height, f.width) == (4, 6)
    assert np.array_equal(f.channel("normal"), chans["normal"])
    assert np.array_equal(f.data[1], chans["depth"])


@pytest.mark.parametrize("bad, msg", [
    (np.zeros((5, 4, 4, 3), np.float32), "dtype"),
    (np.zeros((4, 4, 4, 3), np.uint8), "shape"),
    (np.zeros((5, 4, 4, 4), np.uint8), "shape"),
    (np.zeros((5, 0, 4, 3), np.uint8), "empty"),
])
def test_bad_frame_arrays_are_rejected_with_a_reason(bad, msg):
    with pytest.raises(GBufferError, match=msg):
        GBufferFrame(0, 0.0, bad)


def test_missing_channel_is_named(rng):
    chans = {c: np.zeros((2, 2, 3), np.uint8) for c in CHANNELS if c != "metallic"}
    with pytest.raises(GBufferError, match="metallic"):
        GBufferFrame.from_channels(0, 0.0, chans)


def test_conditioning_normalises_weights_and_rejects_bad_prompts():
    c = Conditioning((WeightedPrompt("a", 3.0), WeightedPrompt("b", 1.0)))
    assert [p.weight for p in c.prompts] == [0.75, 0.25]
    assert c.dominant.text == "a"
    with pytest.raises(ConditioningError, match="empty"):
        Conditioning.single("   ")
    with pytest.raises(ConditioningError, match="negative"):
        Conditioning((WeightedPrompt("a", -1.0),))
    with pytest.raises(ConditioningError, match="zero"):
        Conditioning((WeightedPrompt("a", 0.0),))
