"""The namenode's ordered, forward-only SQL migrations (NNNN_verb_object.sql).

A landed migration is never edited: the migrator records each file's checksum and
refuses to start against a database whose recorded checksum differs.
"""
