"""The merge queue of a branch (docs/merge-queue.md): a request's place in it ("merge when ready", taking it out)
and the branch's line. Reading the queue starts nothing: the workers' upkeep wakes a queue whose heads moved
(services/queue.py `queues_follow_heads`)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import request_catalog
from catalog_app.selectors.refs import branch_get
from merge_app.selectors.merge_requests import merge_request_get
from merge_app.selectors.queue import queue_entry_dict, queue_entry_of, queue_position, queue_show
from merge_app.services.queue import queue_enqueue, queue_leave


class QueueEntryOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    position = serializers.IntegerField(allow_null=True, help_text="1 for the first in line; null once it left")
    state = serializers.ChoiceField(choices=["queued", "prepared", "merged", "removed"])
    merge_request = serializers.DictField(help_text="number, title, source")
    target = serializers.CharField()
    queued_by = serializers.CharField(allow_null=True)
    source_head = serializers.CharField(allow_null=True, help_text="the source head its result was prepared with")
    onto = serializers.CharField(allow_null=True, help_text="the commit its result was prepared on")
    result = serializers.CharField(allow_null=True, help_text="its checked result, a commit no branch points to")
    checked_with = serializers.ListField(child=serializers.IntegerField(), help_text="the requests ahead in it")
    rebuilds = serializers.IntegerField()
    merge = serializers.CharField(allow_null=True, help_text="the merge's audit log, once merged")
    reason = serializers.CharField(allow_null=True, help_text="why it left the queue: a code")
    message = serializers.CharField(allow_null=True)
    details = serializers.DictField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class QueueOutputSerializer(serializers.Serializer):
    target = serializers.CharField()
    entries = QueueEntryOutputSerializer(many=True)
    recent = QueueEntryOutputSerializer(many=True, help_text="entries that recently left the queue")


def _entry(entry) -> dict:
    return QueueEntryOutputSerializer(queue_entry_dict(entry, queue_position(entry))).data


class MergeRequestQueueApi(APIView):
    """POST: merge when ready (the request joins its target's queue); DELETE: take it out (its author or an admin);
    GET: its newest entry, with its position."""

    @extend_schema(responses=QueueEntryOutputSerializer)
    def get(self, request, catalog, number):
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        entry = queue_entry_of(found)
        if entry is None:
            return Response({"code": "not_queued", "message": f"Merge request {number} was never queued."},
                            status=status.HTTP_404_NOT_FOUND)  # fmt: skip
        return Response(_entry(entry))

    @extend_schema(request=None, responses={201: QueueEntryOutputSerializer})
    def post(self, request, catalog, number):
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        entry = queue_enqueue(merge_request=found, user=request.user)
        return Response(_entry(entry), status=status.HTTP_201_CREATED)

    @extend_schema(responses=QueueEntryOutputSerializer)
    def delete(self, request, catalog, number):
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        return Response(_entry(queue_leave(merge_request=found, user=request.user)))


class BranchQueueApi(APIView):
    """A branch's merge queue: each entry in line with its position, state and reason, then those that left."""

    @extend_schema(responses=QueueOutputSerializer)
    def get(self, request, catalog, branch):
        found = request_catalog(request, catalog)
        branch_get(catalog=found, name=branch)  # 404 for a branch that does not exist
        return Response(QueueOutputSerializer(queue_show(catalog=found, target=branch)).data)
