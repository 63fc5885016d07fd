"""Foundation helpers shared by every layer (imports nothing else from kccm)."""
