"""Publishing policy: jobs, the one lifecycle, push and promotion by digest, records, workflow rows."""
