"""volary.serve: the simulator as a service (see DESIGN.md)."""
