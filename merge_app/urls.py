from django.urls import path

from merge_app.apis.sql import SqlApi

urlpatterns = [path("catalogs/<str:catalog>/sql", SqlApi.as_view())]
