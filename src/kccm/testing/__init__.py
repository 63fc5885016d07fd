"""kccm.testing."""
