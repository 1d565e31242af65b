from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("ledger.api.urls")),
    path("api/", include("frontend.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script as a file: the CSP allows no inline script.
    # GET only: its HTML renderer has no template for OPTIONS metadata (a 500).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema", http_method_names=["get", "head"]),
         name="api-docs"),
    path("", include("frontend.urls")),
]
