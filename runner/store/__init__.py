"""Run records that outlive the pod: written to a store (a directory, or an S3 bucket) and read back.

The layer after readback: it writes what the reporters made (the JSON summary, the verdict)
and reads it back with what readback and the merge already do. A run without a resultsStore
never imports it (tests/integration/test_startup.py).
"""
