"""Settings: the typed sections, their values, config files and a run's whole config."""
