from django.db.models import QuerySet
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class PagePagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def paginate_queryset(self, queryset, request, view=None):
        """The first page is read first (one more row than it holds): a list that fits in it costs that one query,
        and a longer one only a COUNT more, not a COUNT and then the page."""
        sliced = isinstance(queryset, QuerySet) or (hasattr(queryset, "count") and hasattr(queryset, "__getitem__"))
        if sliced and not isinstance(queryset, list) and request.query_params.get(self.page_query_param, "1") == "1":
            size = self.get_page_size(request)
            if size:
                head = list(queryset[: size + 1])
                queryset = head if len(head) <= size else _Headed(head[:size], queryset)
        return super().paginate_queryset(queryset, request, view)


class _Headed:
    """A queryset whose first rows are read already: the paginator counts it (a COUNT) and slices the page from
    them."""

    def __init__(self, head: list, queryset: QuerySet) -> None:
        self.head, self.queryset = head, queryset

    def count(self) -> int:
        return self.queryset.count()

    def __getitem__(self, key):
        if isinstance(key, slice) and (key.start or 0) == 0 and key.stop is not None and key.stop <= len(self.head):
            return self.head[: key.stop]
        return self.queryset[key]


def paginated(request: Request, view, items, serializer_class: type[serializers.Serializer] | None = None) -> Response:
    """The page of `items` (a queryset or a list) the request asks for, serialized with `serializer_class` (items
    that are already plain values without)."""
    paginator = PagePagination()
    page = paginator.paginate_queryset(items, request, view=view)
    return paginator.get_paginated_response(
        page if serializer_class is None else serializer_class(page, many=True).data
    )


# Not a docstring: drf-spectacular would give it to every subclass's operations as their description.
class PagedApi(APIView):
    pagination_class = PagePagination  # its list is answered a page at a time (and so documented)
