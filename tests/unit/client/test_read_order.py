"""The order a reader tries an extent's replicas in (client/file_reader.read_order)."""

from __future__ import annotations

from collections import Counter

from plasmafs.client.file_reader import read_order
from plasmafs.core.attributes import Replica, ReplicaState


def replica(datanode: int, host: str, state: ReplicaState = ReplicaState.LIVE) -> Replica:
    return Replica(datanode, f"{host}:7000", 0, b"", host=host, state=state)


def near_this_host(r: Replica) -> bool:
    return r.host == "here"


def test_replicas_on_this_host_come_first_and_those_not_live_last() -> None:
    replicas = [
        replica(1, "far"),
        replica(2, "here", ReplicaState.SUSPECT),
        replica(3, "other"),
        replica(4, "here"),
    ]
    for turn in range(6):
        order = [r.datanode_id for r in read_order(replicas, near_this_host, turn)]
        assert order[0] == 4
        assert sorted(order[1:3]) == [1, 3]
        assert order[3] == 2


def test_readers_starting_at_random_turns_spread_over_the_replicas() -> None:
    replicas = [replica(1, "a"), replica(2, "b"), replica(3, "c")]
    first = Counter(
        read_order(replicas, near_this_host, turn)[0].datanode_id for turn in range(300)
    )
    assert first == {1: 100, 2: 100, 3: 100}
    # A reader's next extent goes to the next replica.
    assert read_order(replicas, near_this_host, 7)[0] != read_order(replicas, near_this_host, 8)[0]


def test_nothing_live_keeps_the_given_order() -> None:
    replicas = [replica(1, "a", ReplicaState.SUSPECT), replica(2, "here", ReplicaState.LOST)]
    assert [r.datanode_id for r in read_order(replicas, near_this_host, 5)] == [1, 2]
