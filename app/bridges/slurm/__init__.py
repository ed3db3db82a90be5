"""The Slurm bridge: read Slurm's state, ask the service, apply its answer (see README, "Slurm")."""
