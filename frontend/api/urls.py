from django.urls import path

from . import views

urlpatterns = [
    path("tables/operator-cases/", views.OperatorCases.as_view(), name="api-operator-cases"),
    path("tables/applications/", views.Applications.as_view(), name="api-applications"),
    path("targets/", views.Targets.as_view(), name="api-targets"),
    path("provenance/<str:kind>/<path:id>/", views.Provenance.as_view(), name="api-provenance"),
    path("reruns/", views.Reruns.as_view(), name="api-reruns"),
    path("reruns/<str:rerun_id>/", views.RerunDetail.as_view(), name="api-rerun"),
    path("signoffs/", views.SignOffs.as_view(), name="api-signoffs"),
    path("retractions/", views.Retractions.as_view(), name="api-retractions"),
    path("freezes/", views.Freezes.as_view(), name="api-freezes"),
    path("freezes/<int:position>/check/", views.FreezeCheck.as_view(), name="api-freeze-check"),
    path("freezes/<int:position>/tables/<str:table>/", views.FrozenTable.as_view(), name="api-frozen-table"),
]
