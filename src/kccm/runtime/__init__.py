"""kccm.runtime."""
