"""Which sections each report computes (no Spark import: the web process reads this too)."""

# Report a user can choose → the sections it computes ("inputs" is always computed).
REPORT_SECTIONS: dict[str, tuple[str, ...]] = {
    "throughput": ("throughput",),
    "sizes": ("size", "size_histogram"),
    "latency": ("latency", "latency_histogram"),
    "retry_dlq": ("retry_dlq",),
    "delay": ("delay_levels",),
    "transactions": ("transactions",),
    "top": ("top_keys", "top_tags"),
}
REPORT_SECTIONS = {
    "all": tuple(s for sections in REPORT_SECTIONS.values() for s in sections),
    **REPORT_SECTIONS,
}

# The throughput section's bucket, and the hour the chart of it ticks by.
HOUR_MS = 3_600_000
