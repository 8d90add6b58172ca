from catalog_app.services.jobs import JobOutcome, job_cancel, job_create, job_execute, job_recover

__all__ = ["JobOutcome", "job_cancel", "job_create", "job_execute", "job_recover"]
