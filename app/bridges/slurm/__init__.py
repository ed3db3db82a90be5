"""The Slurm bridge: read Slurm's state, ask the service, apply its answer (see docs/slurm.md)."""
