from drf_spectacular import openapi


class AutoSchema(openapi.AutoSchema):
    """Names nested serializers after the API class that owns them (`BranchListApi.InputSerializer` becomes
    `BranchListInput`), so the house style of nested Input/Output serializers gives unique schema components."""

    def get_serializer_name(self, serializer, direction):
        name = super().get_serializer_name(serializer, direction)
        owner, *nested = type(serializer).__qualname__.split(".")
        return owner.removesuffix("Api") + name if nested else name
