"""A DSN naming several PostgreSQL hosts is split into one DSN per host, each tried
at once with its own deadline (pg_connect)."""

from __future__ import annotations

from plasmafs.namenode.pg_connect import hosts_of


def test_a_dsn_of_several_hosts_becomes_one_per_host() -> None:
    dsn = "postgresql://u:p@10.0.0.1:5432,10.0.0.2:5433/db?target_session_attrs=read-write"
    assert hosts_of(dsn) == [
        "postgresql://u:p@10.0.0.1:5432/db?target_session_attrs=read-write",
        "postgresql://u:p@10.0.0.2:5433/db?target_session_attrs=read-write",
    ]


def test_a_dsn_of_one_host_or_in_key_value_form_is_left_alone_and_users_kept() -> None:
    assert hosts_of("postgres://h/db") == ["postgres://h/db"]
    assert hosts_of("postgresql://u@h:5432/db") == ["postgresql://u@h:5432/db"]
    assert hosts_of("host=a,b dbname=db") == ["host=a,b dbname=db"]
    assert hosts_of("postgresql://u:p%40x@h1,h2/db") == [
        "postgresql://u:p%40x@h1/db",
        "postgresql://u:p%40x@h2/db",
    ]
