"""Generated protobuf and gRPC modules of the wire protocol (see scripts/gen_proto.py)."""
