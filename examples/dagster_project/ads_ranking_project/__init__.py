"""ads_ranking as a dg project: the assets and check in defs.yaml, the automation in Python."""
