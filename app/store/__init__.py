"""Stores: they keep and return what the service hands them, and decide nothing."""
