"""The alibabacloud load balancers (CLB and NLB): so far the Service annotation table
(:mod:`.annotations`); the ensure itself is not written yet."""
