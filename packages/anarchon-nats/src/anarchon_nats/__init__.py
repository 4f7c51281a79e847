"""anarchon-nats: the NATS JetStream backend of anarchon.

``NatsBackend`` decides which instance runs each ``(job, slot)`` with a
de-duplicated publish (``Nats-Msg-Id: <job>:<slot>``): JetStream stores only
the first message with an id inside the stream's duplicate window, so exactly
one publisher is acknowledged as the original. Registered under the URL
scheme ``nats://`` (``pip install "anarchon[nats]"``).
"""

from __future__ import annotations

from anarchon_nats.backend import NatsBackend

__version__ = "0.1.0"

__all__ = ["NatsBackend", "__version__"]
