"""kccm.app."""
