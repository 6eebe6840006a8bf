"""Ledger adapters: the SQL ledger (PostgreSQL and SQLite) and the in-memory one."""
