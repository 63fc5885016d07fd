"""kccm.providers."""
