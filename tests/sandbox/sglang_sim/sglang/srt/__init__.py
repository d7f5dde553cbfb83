"""Simulator internals laid out like the real package so tracebacks name the same files."""
