from django.urls import path

from . import views

urlpatterns = [
    path("events/", views.EventList.as_view(), name="api-events"),
    path("events/<int:position>/", views.EventDetail.as_view(), name="api-event"),
    path("streams/", views.StreamList.as_view(), name="api-streams"),
    path("streams/<path:stream>/", views.StreamEvents.as_view(), name="api-stream"),
    path("ledger/status/", views.LedgerStatus.as_view(), name="api-ledger-status"),
]
