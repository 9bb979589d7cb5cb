"""Django's message storage (a cookie, then the session), its backends made only when a
request has messages to read or to keep.

MessageMiddleware gives every request a storage, and Django's FallbackStorage makes its two
backends as it is made: the cookie's builds a signer (its backend imported by name, its key
derived), which every API call and every streamed chat paid for messages only the pages
use. Here they are made at the first read or write; for a request that neither reads nor
adds a message, update() does nothing, as before, and they are never made.
"""

from django.contrib.messages.storage.base import BaseStorage
from django.contrib.messages.storage.fallback import FallbackStorage
from django.utils.functional import cached_property


class LazyFallbackStorage(FallbackStorage):
    """FallbackStorage, its cookie and session backends made where first needed."""

    def __init__(self, request, *args, **kwargs):
        BaseStorage.__init__(self, request, *args, **kwargs)
        self._used_storages = set()

    @cached_property
    def storages(self):
        return [made(self.request) for made in self.storage_classes]
