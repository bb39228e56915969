"""The engine feed over gRPC: its contract (engine_feed.proto), the committed stubs, the messages to and from the
feed's own types, and an engine-side Python client.

It lives beside the WebSocket feed because it is the same feed on another transport: the studio's servicer
(studio/server/grpc_service.py) and an engine's client both import it, and it imports nothing above gbuffer.
Needs the `engines` extra (grpcio, protobuf); `gbuffer.feed` itself never imports it.
"""
