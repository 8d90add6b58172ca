from catalog_app.selectors.jobs import job_get, job_list

__all__ = ["job_get", "job_list"]
