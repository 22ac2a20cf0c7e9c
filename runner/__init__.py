"""soak: steady, scheduled HTTP load tests with slow_cooker-style output."""

__version__ = "0.1.0"
