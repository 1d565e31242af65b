"""Errors the append service raises; each message says what to do differently."""


class LedgerError(Exception):
    pass


class UnknownEventType(LedgerError):
    pass


class InvalidPayload(LedgerError):
    pass


class ConcurrencyError(LedgerError):
    """The stream moved on since the writer read it: re-read and decide again."""


class IdempotencyConflict(LedgerError):
    """An event id was reused for different content."""


class LedgerNotInitialised(LedgerError):
    pass
