from django.contrib.auth import views as auth_views
from django.urls import path

from frontend.views import (
    blame,
    browser,
    catalogs,
    checks,
    diff,
    jobs,
    queue,
    requests,
    retention,
    review,
    sql,
    webhooks,
)

app_name = "frontend"

CAT = "catalogs/<str:catalog>"
TABLE = f"{CAT}/browse/<str:database>/<str:table>"
MR = f"{CAT}/merge-requests/<int:number>"
HOOK = f"{CAT}/webhooks/<int:webhook_id>"
CHECK = f"{CAT}/checks/<int:check_id>"

urlpatterns = [
    path("", catalogs.catalog_index, name="catalogs"),
    path("login/", auth_views.LoginView.as_view(template_name="frontend/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(CAT, catalogs.catalog_detail, name="catalog"),
    path(f"{CAT}/branches/new", catalogs.branch_new, name="branch-new"),
    path(f"{CAT}/tags/new", catalogs.tag_new, name="tag-new"),
    path(f"{CAT}/log", catalogs.commit_log_page, name="log"),
    path(f"{CAT}/commits/<str:commit_id>", review.commit_page, name="commit"),
    path(f"{CAT}/commits/<str:commit_id>/pick", review.commit_pick, name="commit-pick"),
    path(f"{CAT}/compare", review.compare_page, name="compare"),
    path(f"{CAT}/diff/rows", review.diff_rows, name="diff-rows"),
    path(f"{CAT}/browse", browser.browse, name="browse"),
    path(TABLE, browser.table_detail, name="table"),
    path(f"{TABLE}/rows", browser.table_rows, name="table-rows"),
    path(f"{TABLE}/blame", blame.table_blame_page, name="table-blame"),
    path(f"{TABLE}/key-history", blame.table_key_history_page, name="table-key-history"),
    path(f"{TABLE}/data-diff", browser.table_data_diff, name="table-data-diff"),
    path(f"{TABLE}/restore", browser.table_restore, name="table-restore"),
    path(f"{TABLE}/load", browser.table_load, name="table-load"),
    path(f"{CAT}/diff", diff.diff_page, name="diff"),
    path(f"{CAT}/diff/jobs/<uuid:job_id>.json", diff.diff_job_status, name="diff-job-status"),
    path(f"{CAT}/merge", diff.merge_new, name="merge-new"),
    path(f"{CAT}/merges", jobs.merge_index, name="merges"),
    path(f"{CAT}/merges/<uuid:merge_id>", jobs.merge_detail, name="merge"),
    path(f"{CAT}/restores", jobs.restore_index, name="restores"),
    path(f"{CAT}/restores/<uuid:restore_id>", jobs.restore_detail, name="restore"),
    path(f"{CAT}/sql", sql.sql_console, name="sql"),
    path(f"{CAT}/merge-requests", requests.merge_request_index, name="merge-requests"),
    path(f"{MR}", requests.merge_request_detail, name="merge-request"),
    path(f"{MR}/reviews", requests.merge_request_review_view, name="merge-request-review"),
    path(f"{MR}/resolutions", requests.merge_request_resolve, name="merge-request-resolve"),
    path(f"{MR}/state", requests.merge_request_state, name="merge-request-state"),
    path(f"{MR}/merge", requests.merge_request_merge_view, name="merge-request-merge"),
    path(f"{MR}/queue", queue.merge_request_queue_view, name="merge-request-queue"),
    path(f"{CAT}/queue/<path:branch>", queue.branch_queue_page, name="branch-queue"),
    path(f"{CAT}/webhooks", webhooks.webhook_index, name="webhooks"),
    path(HOOK, webhooks.webhook_detail, name="webhook"),
    path(f"{HOOK}/delete", webhooks.webhook_delete_view, name="webhook-delete"),
    path(
        f"{HOOK}/deliveries/<uuid:delivery_id>/redeliver", webhooks.delivery_redeliver_view, name="delivery-redeliver"
    ),
    path(f"{CAT}/checks", checks.check_index, name="checks"),
    path(CHECK, checks.check_detail, name="check"),
    path(f"{CHECK}/delete", checks.check_delete_view, name="check-delete"),
    path(f"{CHECK}/runs", checks.check_run_view, name="check-run"),
    path(f"{CAT}/retention", retention.retention_page, name="retention"),
    path(f"{CAT}/subscriptions/<str:name>", catalogs.subscription_page, name="subscription"),
    path("jobs/", jobs.job_index, name="jobs"),
    path("jobs/<uuid:job_id>", jobs.job_detail, name="job"),
    path("jobs/<uuid:job_id>.json", jobs.job_status, name="job-status"),
    path("jobs/<uuid:job_id>/cancel", jobs.job_cancel_view, name="job-cancel"),
]
