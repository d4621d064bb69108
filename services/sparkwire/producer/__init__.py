"""Raw metric events into Kafka (``sparkwire produce``)."""

from __future__ import annotations
