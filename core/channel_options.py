"""gRPC channel and server options every process shares (plain lists: importing them
loads no gRPC): message-size limits, keepalives, and the data streams' receive window."""

from __future__ import annotations

# A fixed 8 MiB receive window per stream. With gRPC's default bandwidth probing the window
# grew without bound when the reader was slower than the datanode (a `get` onto a slow
# disk held hundreds of MiB); fixed, a reader's memory stays bounded and `cat` is as
# fast (io_bench, BENCHMARKS.md).
RECEIVE_WINDOW = [
    ("grpc.http2.bdp_probe", 0),
    ("grpc.http2.lookahead_bytes", 8 * 1024 * 1024),
]
_NAMENODE_MESSAGES = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]
_DATA_MESSAGES = [  # up to 64 MiB of blocks per message, and its framing
    ("grpc.max_receive_message_length", 80 * 1024 * 1024),
    ("grpc.max_send_message_length", 80 * 1024 * 1024),
]

# A client pings its namenode every 3 s and gives the connection up 2 s after an
# unanswered ping: a namenode whose host was cut off (no reset ever comes) is noticed
# within 5 s, and the client fails over (client/failover.py). The namenode accepts
# pings that often even on an idle session (NAMENODE_SERVER).
NAMENODE_CHANNEL = [
    *_NAMENODE_MESSAGES,
    ("grpc.keepalive_time_ms", 3_000),
    ("grpc.keepalive_timeout_ms", 2_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.enable_retries", 0),
]
NAMENODE_SERVER = [
    *_NAMENODE_MESSAGES,
    # A namenode that binds its address owns it on this host (no second listener):
    # proof that the one before it there is gone (namenode/leadership.py).
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 2_000),
    ("grpc.keepalive_permit_without_calls", 1),
]
DATA_CHANNEL = [
    *_DATA_MESSAGES,
    ("grpc.enable_retries", 0),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    *RECEIVE_WINDOW,
]
DATANODE_SERVER = [
    *_DATA_MESSAGES,
    *RECEIVE_WINDOW,  # what a put may buffer at the datanode while its disk lags
    # Clients keep idle data channels alive with a ping every 10 s (DATA_CHANNEL); by
    # gRPC's default a server counts those as abuse and sends GOAWAY "too_many_pings"
    # after the third, which broke the next write of a long-lived client (the mount).
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
]
