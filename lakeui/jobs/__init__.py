"""The job platform: the Job model, the registry of job kinds, running a job once however often its message is
delivered, recovery of jobs whose worker died, the Celery task, the job APIs and the health report.

It knows no job kind of its own: the apps register theirs (catalog_app/job_kinds.py, merge_app/job_kinds.py)."""
