"""The HPC scheduling-decision service."""

from app.kernel_cache import use_versioned_folder

# before any module compiles a loop: see app/kernel_cache.py
use_versioned_folder()
