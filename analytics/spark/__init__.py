"""The PySpark side of analytics: segment decoding, the DataFrame, the reports.

Modules here never import Django; the Celery task hands them plain parameters.
"""
