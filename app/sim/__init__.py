"""Trace-driven simulation: replay a job trace through the same scheduling core POST /schedule uses."""
