from django.urls import path

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("events/", views.event_browser, name="events"),
    path("events/<int:position>/", views.event_detail, name="event"),
    path("operators/", views.operator_table, name="operators"),
]
