"""kccm.cloudprovider."""
