"""kccm.controllers."""
