"""Ground floor of faithbench: everything tasks, metrics and submissions import."""
