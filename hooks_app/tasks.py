"""The delivery task: an interface like a view (an id in, a service called), and the owner of the retry policy.

A plain Celery task, not a job kind (lakeui/jobs): a delivery is not work a user asked for and watches in the job
list; it has a log of its own (`Delivery`, with every attempt); it needs no Spark, no heartbeat and no claim; and
its retries are timed back-offs (LAKEUI_WEBHOOK_RETRY_DELAYS), which Celery's `retry(countdown=...)` gives, where a
job is re-run only when its worker is lost.
"""

from celery import shared_task

from hooks_app.services.deliveries import DELIVER_TASK, delivery_attempt


@shared_task(name=DELIVER_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def webhook_deliver(self, delivery_id: str) -> None:
    attempted = delivery_attempt(delivery_id=delivery_id)
    if attempted.retry_in is not None:
        # The attempts are counted on the delivery, which ends them: Celery's own count is not needed.
        raise self.retry(countdown=attempted.retry_in)
