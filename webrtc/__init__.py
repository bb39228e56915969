"""WebRTC for the studio, on aiortc: the paced session video track, per-session encoders (bitrate, keyframe
interval, codec preference), the frame-index stamp, the data-channel protocol, and a Python viewer client."""
