"""Metric history (W16): the cluster sampled on a schedule into the console's database, rolled up
and kept for bounded periods, read back as series for charts and top-N lists."""
