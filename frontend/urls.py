from django.contrib.auth import views as auth_views
from django.urls import path

from . import actions, views

# The history path comes before the detail path: <path:case> would swallow "/history".
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("operators/", views.operator_table, name="operators"),
    path("operators/figures/", views.operator_figures, name="operator_figures"),
    path("cases/<str:backend>/<path:case>/history/", views.case_history, name="case_history"),
    path("cases/<str:backend>/<path:case>/", views.case_detail, name="case_detail"),
    path("campaigns/", views.campaign_list, name="campaigns"),
    path("campaigns/<str:campaign>/", views.campaign_detail, name="campaign"),
    path("apps/", views.application_table, name="applications"),
    path("apps/<str:app>/", views.app_detail, name="app_detail"),
    path("ablations/", views.ablations, name="ablations"),
    path("events/", views.event_browser, name="events"),
    path("events/<int:position>/", views.event_detail, name="event"),
    path("actions/sign-off/", actions.sign_off, name="sign_off"),
    path("actions/retract/", actions.retract, name="retract"),
    path("actions/rerun/", actions.request_rerun, name="request_rerun"),
    path("actions/freeze/", actions.freeze, name="freeze"),
    path("reruns/", views.rerun_list, name="reruns"),
    path("reruns/<str:rerun_id>/", views.rerun_page, name="rerun"),
    path("reruns/<str:rerun_id>/status/", views.rerun_status, name="rerun_status"),
    path("freezes/<int:position>/", views.freeze_check, name="freeze_check"),
    path("accounts/login/", actions.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="dashboard"), name="logout"),
    path("assets/plotly.min.js", views.plotly_js, name="plotly_js"),
]
