from catalog_app.models.jobs import Job

__all__ = ["Job"]
