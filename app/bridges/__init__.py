"""Resource-manager bridges: clients of the service that drive a real resource manager."""
