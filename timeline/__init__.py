"""The timeline: schedules (prompt timelines per frame) and the rollout that plays one through a renderer.
Sits below the studio: imports gbuffer and prompt_presets, never studio or webrtc."""
