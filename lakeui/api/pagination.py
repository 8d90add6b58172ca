from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class PagePagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


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
