"""suite."""
