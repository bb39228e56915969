"""Regenerate the committed Python stubs from engine_feed.proto: `python -m gbuffer.feed.grpc.generate`.

The stubs are committed so that neither CI nor an engine needs a generation step; tests/test_grpc_contract.py
checks that what is committed is what grpcio-tools makes of the .proto now.
"""

from __future__ import annotations

import sys
import tempfile
from importlib.resources import files
from pathlib import Path

PROTO = "gbuffer/feed/grpc/engine_feed.proto"      # relative to the repository root: the stubs' import path
STUBS = ("engine_feed_pb2.py", "engine_feed_pb2.pyi", "engine_feed_pb2_grpc.py")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def generate() -> dict[str, str]:
    """The stubs grpcio-tools generates from the .proto, by file name."""
    from grpc_tools import protoc

    include = files("grpc_tools").joinpath("_proto")      # google/protobuf/*.proto, as protoc's own -I
    with tempfile.TemporaryDirectory() as out:
        status = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"-I{include}", f"--python_out={out}",
                              f"--pyi_out={out}", f"--grpc_python_out={out}", str(ROOT / PROTO)])
        if status != 0:
            raise RuntimeError(f"protoc failed on {PROTO} (exit {status})")
        generated = Path(out) / Path(PROTO).parent
        return {name: (generated / name).read_text() for name in STUBS}


def main() -> int:
    for name, text in generate().items():
        (HERE / name).write_text(text)
        print(f"wrote {Path(PROTO).parent / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
