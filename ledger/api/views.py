"""Read-only REST views over the events and the ledger's projections."""
import django_filters
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger import selectors
from ledger.models import Event, StreamHead

from .serializers import EventSerializer, StreamSerializer


class PositionCursor(CursorPagination):
    ordering = "position"
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class EventFilter(django_filters.FilterSet):
    position_min = django_filters.NumberFilter(field_name="position", lookup_expr="gte")
    position_max = django_filters.NumberFilter(field_name="position", lookup_expr="lte")
    stream_prefix = django_filters.CharFilter(field_name="stream", lookup_expr="startswith")

    class Meta:
        model = Event
        fields = ["stream", "type", "actor", "position_min", "position_max", "stream_prefix"]


class EventList(generics.ListAPIView):
    queryset = Event.objects.all()
    serializer_class = EventSerializer
    pagination_class = PositionCursor
    filterset_class = EventFilter


class EventDetail(generics.RetrieveAPIView):
    queryset = Event.objects.all()
    serializer_class = EventSerializer
    lookup_field = "position"


class StreamList(generics.ListAPIView):
    queryset = StreamHead.objects.order_by("stream")
    serializer_class = StreamSerializer
    filterset_fields = {"stream": ["exact", "startswith"]}


class StreamEvents(generics.ListAPIView):
    """The events of one stream, in version order, behind the stream's head."""

    serializer_class = EventSerializer
    pagination_class = PositionCursor

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no stream
            return Event.objects.none()
        get_object_or_404(StreamHead, stream=self.kwargs["stream"])
        return Event.objects.filter(stream=self.kwargs["stream"])

    @extend_schema(operation_id="streams_events_list")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def list(self, request, *args, **kwargs):
        response = super().list(request, *args, **kwargs)
        head = StreamHead.objects.get(stream=self.kwargs["stream"])
        response.data["stream"] = StreamSerializer(head).data
        return response


class LedgerStatus(APIView):
    @extend_schema(responses={200: dict})
    def get(self, request):
        return Response(selectors.status())
