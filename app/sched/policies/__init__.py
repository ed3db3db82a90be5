"""The scheduling policies, one file each."""
