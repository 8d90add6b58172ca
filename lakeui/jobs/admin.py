from django.contrib import admin

from lakeui.jobs.models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "status", "progress", "requested_by", "created_at", "finished_at"]
    list_filter = ["status", "kind"]
    readonly_fields = [field.name for field in Job._meta.fields]
