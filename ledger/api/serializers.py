from rest_framework import serializers

from ledger.models import Event, StreamHead
from ledger.records import RecordedEvent


class EventSerializer(serializers.ModelSerializer):
    """An event as hashed: every field from the canonical body, plus the chain links."""

    payload = serializers.SerializerMethodField()
    origin = serializers.SerializerMethodField()
    canonical = serializers.CharField(source="body")

    class Meta:
        model = Event
        fields = [
            "position", "event_id", "stream", "version", "type", "schema_version", "payload",
            "actor", "recorded_at", "origin", "prev_hash", "hash", "canonical",
        ]

    def _record(self, event: Event) -> RecordedEvent:
        return RecordedEvent.from_body(event.body, event.prev_hash, event.hash)

    def get_payload(self, event: Event) -> dict:
        return self._record(event).payload

    def get_origin(self, event: Event) -> dict | None:
        return self._record(event).origin


class StreamSerializer(serializers.ModelSerializer):
    class Meta:
        model = StreamHead
        fields = ["stream", "version", "first_position", "last_position", "last_type", "last_recorded_at"]
