"""REST views of the audit: tables (JSON and CSV), the targets scorecard, provenance chains,
re-runs, sign-offs, retractions and publication freezes. Thin: the work is in frontend.tables /
targets / provenance / reruns / publication and ledger.review.

Reads follow ledger.api.permissions.ReadableLedger; every write needs a logged-in user with
the view's permission (groups Reviewer and Maintainer, frontend/apps.py) and is recorded as
an event whose actor is "user:<username>".
"""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from frontend import publication, reruns, signoffs
from frontend.targets import scorecards
from frontend.provenance import UnknownResult, application_chain, operator_chain
from frontend.tables import (APP_STATES, APPLICATION_COLUMNS, OPERATOR_COLUMNS, TableQueryError, application_rows, operator_rows,
                             result_exists)
from ledger.api.permissions import ReadableLedger
from ledger.models import SignOff
from ledger.review import ReviewError, retract, signoff_state

from . import serializers as s
from .renderers import CSVRenderer

ERRORS = {
    400: OpenApiResponse(s.ErrorSerializer, description="bad input: the body says what is wrong"),
    403: OpenApiResponse(s.ErrorSerializer, description="not logged in, or without the permission"),
    404: OpenApiResponse(s.ErrorSerializer, description="no such result, re-run or freeze"),
}


def errors(*codes: int) -> dict:
    return {code: ERRORS[code] for code in codes}


class ReadOrPermitted(BasePermission):
    """Reads as the ledger API; writes need login and `frontend.<view.write_permission>`."""

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return ReadableLedger().has_permission(request, view)
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm(f"frontend.{view.write_permission}"))


def actor(request) -> str:
    return f"user:{request.user.get_username()}"


def known_result(result: str) -> str:
    if not result_exists(result):
        raise NotFound(f"no result {result!r}: results are operator/<backend>/<case> or app/<architecture>/<name>")
    return result


class AuditView(APIView):
    permission_classes = [ReadOrPermitted]
    write_permission = ""

    def handle_exception(self, exc):
        """Error bodies are JSON even where CSV was asked for."""
        response = super().handle_exception(exc)
        self._render_json()
        return response

    def options(self, request, *args, **kwargs):
        """The metadata is JSON even on a CSV-only view (the CSV renderer has no table to render)."""
        response = super().options(request, *args, **kwargs)
        self._render_json()
        return response

    def _render_json(self) -> None:
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type


# ---- tables ------------------------------------------------------------------------------


class TableView(AuditView):
    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, CSVRenderer]
    csv_name = ""
    csv_columns: list[str] = []
    query_params: tuple[str, ...] = ()

    def rows(self, **query) -> list[dict]:
        raise NotImplementedError

    def get(self, request):
        query = {name: request.query_params.get(name) or None for name in self.query_params}
        try:
            rows = self.rows(**query)
        except TableQueryError as error:
            raise ValidationError({"detail": str(error)}) from None
        return Response([absolute_links(request, row) for row in rows])


LINKS = ("provenance_url", "api_provenance_url")


def absolute_links(request, row: dict) -> dict:
    """An exported row's links with scheme and host: a CSV opened elsewhere still leads to its
    provenance. (The pages link within the site; a frozen table keeps site-relative links, so its
    hash does not depend on the host name that served it.)"""
    return {**row, **{key: request.build_absolute_uri(row[key]) for key in LINKS if row[key]}}


FORMAT = OpenApiParameter("format", str, enum=["json", "csv"], description="csv: the same rows as CSV (header = columns)")
SORT = OpenApiParameter("sort", str, description="a column; prefix '-' for descending (empty values last)")
SEARCH = OpenApiParameter("search", str, description="case-insensitive substring")


class OperatorCases(TableView):
    """Every case of the defined matrices on its backend, with its admitted kernel and status."""

    csv_name = "operator-cases"
    csv_columns = OPERATOR_COLUMNS
    query_params = ("backend", "matrix", "status", "search", "sort")

    def rows(self, **query) -> list[dict]:
        return operator_rows(**query)

    @extend_schema(
        parameters=[OpenApiParameter("backend", str), OpenApiParameter("matrix", str),
                    OpenApiParameter("status", str, enum=["admitted", "downgraded", "retracted", "none"]),
                    SEARCH, SORT, FORMAT],
        responses={200: s.OperatorRowSerializer(many=True), **errors(400, 403)})
    def get(self, request):
        return super().get(request)


class Applications(TableView):
    """Every registered application: suite and upstream, state with its reason code and reason,
    milestone, headline, REAL flag, Amdahl ceiling, the triage's hotspot, baseline quality."""

    csv_name = "applications"
    csv_columns = APPLICATION_COLUMNS
    query_params = ("state", "reason", "suite", "architecture", "search", "sort")

    def rows(self, **query) -> list[dict]:
        return application_rows(**query)

    @extend_schema(
        parameters=[OpenApiParameter("state", str, enum=list(APP_STATES)),
                    OpenApiParameter("reason", str, description="a reason code some row carries ('none': no code); "
                                                                "an unknown one is a 400 listing them"),
                    OpenApiParameter("suite", str, description="a suite some row carries (a checkout root, or 'bundled')"),
                    OpenApiParameter("architecture", str, enum=["cpu", "cuda"]), SEARCH, SORT, FORMAT],
        responses={200: s.ApplicationRowSerializer(many=True), **errors(400, 403)})
    def get(self, request):
        return super().get(request)


class Targets(AuditView):
    @extend_schema(responses={200: s.ScorecardSerializer(many=True), **errors(403)},
                   description="Issue 16's targets over the matrix of each backend (edge shapes left out): each "
                               "measured, the cases it counts, and met or not, as the generated operator tables "
                               "state them.")
    def get(self, request):
        return Response(scorecards())


# ---- provenance --------------------------------------------------------------------------


class Provenance(AuditView):
    @extend_schema(
        parameters=[OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=["case", "app"]),
                    OpenApiParameter("id", str, OpenApiParameter.PATH,
                                     description="case: <backend>/<case id>, e.g. cpu/star_1/64x64x64/f32; app: its name")],
        responses={200: s.ProvenanceSerializer, **errors(403, 404)})
    def get(self, request, kind: str, id: str):
        try:
            if kind == "case":
                backend, _, case = id.partition("/")
                return Response(operator_chain(backend, case))
            if kind == "app":
                return Response(application_chain(id))
        except UnknownResult as error:
            raise NotFound(str(error)) from None
        raise NotFound(f"unknown kind {kind!r}: case or app")


# ---- re-runs -----------------------------------------------------------------------------


class Reruns(AuditView):
    write_permission = "request_rerun"

    @extend_schema(parameters=[OpenApiParameter("result", str, description="only re-runs of this result"),
                               OpenApiParameter("state", str, enum=list(reruns.STATES)),
                               OpenApiParameter("backend", str, enum=list(reruns.BACKENDS)),
                               OpenApiParameter("kind", str, enum=list(reruns.KINDS))],
                   responses={200: s.RerunSerializer(many=True), **errors(400, 403)})
    def get(self, request):
        """Newest first (50); filters as the re-runs page: values matched ignoring case, an unknown one a 400."""
        try:
            return Response(reruns.listed(request.query_params))
        except TableQueryError as error:
            raise ValidationError({"detail": str(error)}) from None

    @extend_schema(request=s.RerunRequestSerializer, responses={202: s.RerunSerializer, **errors(400, 403, 404)},
                   description="Queue a gate re-run; poll /api/reruns/<id>/ for its progress and outcome.")
    def post(self, request):
        body = s.RerunRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            rerun_id = reruns.request_rerun(body.validated_data["kind"], body.validated_data["target"], actor(request),
                                            backend=body.validated_data["backend"])
        except UnknownResult as error:
            raise NotFound(str(error)) from None
        except reruns.RerunError as error:
            raise ValidationError({"detail": str(error)}) from None
        return Response(reruns.rerun_status(rerun_id), status=status.HTTP_202_ACCEPTED)


class RerunDetail(AuditView):
    @extend_schema(responses={200: s.RerunSerializer, **errors(403, 404)})
    def get(self, request, rerun_id: str):
        try:
            return Response(reruns.rerun_status(rerun_id))
        except reruns.UnknownRerun as error:
            raise NotFound(str(error)) from None


# ---- sign-offs and retractions -----------------------------------------------------------


class SignOffs(AuditView):
    write_permission = "sign_off"

    @extend_schema(parameters=[OpenApiParameter("result", str, description="only sign-offs of this result")],
                   responses={200: s.SignOffRecordSerializer(many=True), **errors(403)})
    def get(self, request):
        records = SignOff.objects.order_by("-position")
        if request.query_params.get("result"):
            records = records.filter(result=request.query_params["result"])
        return Response(s.SignOffRecordSerializer(records[:500], many=True).data)

    @extend_schema(request=s.SignOffRequestSerializer, responses={201: s.SignOffResponseSerializer, **errors(400, 403, 404)},
                   description="Sign off the result's current version; two different reviewers make it publishable.")
    def post(self, request):
        body = s.SignOffRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = known_result(body.validated_data["result"])
        try:
            event = signoffs.sign_off(result, actor(request), body.validated_data["comment"])
        except ReviewError as error:
            raise ValidationError({"detail": str(error)}) from None
        return Response({"position": event.position, "result": result, "state": signoff_state(result)},
                        status=status.HTTP_201_CREATED)


class Retractions(AuditView):
    write_permission = "retract_result"

    @extend_schema(request=s.RetractionRequestSerializer, responses={201: s.RetractionResponseSerializer, **errors(400, 403, 404)})
    def post(self, request):
        body = s.RetractionRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = known_result(body.validated_data["result"])
        try:
            event = retract(result, body.validated_data["reason"], actor(request))
        except ReviewError as error:
            raise ValidationError({"detail": str(error)}) from None
        return Response({"position": event.position, "result": result, "reason": event.data["reason"]},
                        status=status.HTTP_201_CREATED)


# ---- publication freezes -----------------------------------------------------------------


class Freezes(AuditView):
    write_permission = "freeze_publication"

    @extend_schema(responses={200: s.FreezeSerializer(many=True), **errors(403)})
    def get(self, request):
        return Response(publication.freezes())

    @extend_schema(request=None, responses={201: s.FreezeSerializer, **errors(403)},
                   description="Record a PublicationFrozen event: each table's publishable rows as CSV, with its sha256.")
    def post(self, request):
        event = publication.freeze(actor(request))
        frozen = next(f for f in publication.freezes() if f["position"] == event.position)
        return Response(frozen, status=status.HTTP_201_CREATED)


class FreezeCheck(AuditView):
    @extend_schema(responses={200: s.FreezeCheckSerializer, **errors(403, 404)},
                   description="Compare each frozen table's hash with the hash of the same table now.")
    def get(self, request, position: int):
        try:
            return Response(publication.check_freeze(position))
        except ReviewError as error:
            raise NotFound(str(error)) from None


class FrozenTable(AuditView):
    renderer_classes = [CSVRenderer]

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR, **errors(403, 404)},
                   description="A table exactly as frozen; its sha256 is the one recorded in the freeze.")
    def get(self, request, position: int, table: str):
        try:
            text = publication.frozen_csv(position, table)
        except ReviewError as error:
            raise NotFound(str(error)) from None
        return Response(text, content_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{table}-frozen-{position}.csv"'})
