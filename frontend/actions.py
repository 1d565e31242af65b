"""The reviewer's POST actions and the login page.

Every write needs a login (else the login page), the action's permission (else 403), POST (else
405) and a CSRF token (checked by the middleware); the writes go through frontend.signoffs,
ledger.review, frontend.reruns and frontend.publication, which append the events.
"""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from ledger import review
from ledger.review import ReviewError

from . import login_throttle, provenance, publication, reruns, selectors, signoffs, tables


# ---- login -------------------------------------------------------------------------------


class LoginView(auth_views.LoginView):
    """Django's login view; while the username or address is throttled (frontend.login_throttle)
    the page says so with status 429 instead of "did not match"."""

    template_name = "frontend/login.html"
    next_page = "dashboard"

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if login_throttle.locked(form.data.get("username", ""), self.request):
            response.status_code = 429
            response.context_data["locked"] = True
        return response


# ---- reviewer actions --------------------------------------------------------------------


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


def _back(request: HttpRequest, fallback: str) -> HttpResponse:
    """Back to the page the form was on (a local URL only), else to `fallback`."""
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        target = fallback
    return redirect(target or fallback)


def reviewer_action(permission: str):
    """Login (else the login page), the permission (else 403), POST only (else 405); CSRF is
    checked by the middleware before the view runs."""
    def decorate(view):
        return login_required(permission_required(permission, raise_exception=True)(require_POST(view)), login_url="login")
    return decorate


def _require_result(result: str) -> None:
    if not tables.result_exists(result):
        raise ReviewError(f"no result {result!r} exists")


@reviewer_action("frontend.sign_off")
def sign_off(request: HttpRequest) -> HttpResponse:
    result = request.POST.get("result", "")
    try:
        _require_result(result)
        event = signoffs.sign_off(result, _actor(request), request.POST.get("comment", "").strip())
    except signoffs.AlreadySignedOff as exc:
        messages.warning(request, f"Not recorded again: {exc}.")
    except ReviewError as exc:
        messages.error(request, f"Sign-off refused: {exc}")
    else:
        messages.success(request, f"Signed off {result} version {event.data['result_version']} (event #{event.position}).")
    return _back(request, reverse("dashboard"))


@reviewer_action("frontend.retract_result")
def retract(request: HttpRequest) -> HttpResponse:
    result = request.POST.get("result", "")
    try:
        _require_result(result)
        event = review.retract(result, request.POST.get("reason", ""), _actor(request))
    except ReviewError as exc:
        messages.error(request, f"Retraction refused: {exc}")
    else:
        messages.success(request, f"Retracted {result} (event #{event.position}).")
    return _back(request, reverse("dashboard"))


@reviewer_action("frontend.request_rerun")
def request_rerun(request: HttpRequest) -> HttpResponse:
    """Two steps: the form's POST shows what a re-run does and asks to confirm (a re-run measures
    for minutes and may revise a published number); only the confirming POST records it."""
    kind, target, backend = (request.POST.get(k, "").strip() for k in ("kind", "target", "backend"))
    try:
        if request.POST.get("confirmed") != "1":
            result, backend, status = reruns.rerun_target(kind, target, backend or "cpu")
            return render(request, "frontend/rerun_confirm.html", {
                "kind": kind, "target": target, "backend": backend, "result": result, "status": status,
                "result_url": selectors.target_page(kind, backend, target)})
        rerun_id = reruns.request_rerun(kind, target, _actor(request), backend or "cpu")
    except (reruns.RerunError, provenance.UnknownResult) as exc:
        messages.error(request, f"Re-run refused: {exc}")
        return _back(request, reverse("dashboard"))
    return redirect("rerun", rerun_id=rerun_id)


@reviewer_action("frontend.freeze_publication")
def freeze(request: HttpRequest) -> HttpResponse:
    event = publication.freeze(_actor(request))
    messages.success(request, f"Froze the published tables at event #{event.position}.")
    return redirect("freeze_check", position=event.position)
