"""Analytics: Celery-triggered PySpark reports over archived commit-log segments (A1-A3, W12).

Kept free of Django imports so ``analytics.spark.segment_rows`` ships to Spark executors in a zip.
"""
