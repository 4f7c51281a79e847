"""Throw-away test servers of the anarchon workspace (development only, never published).

Each module starts one kind of server on 127.0.0.1 and free ports, in a temp
directory it removes when stopped; the binaries are provisioned on first use
into a cache outside the repository (:mod:`anarchon_testservers.cache`):

- :mod:`anarchon_testservers.redis`: redis-server, Redis >= 8.6, valkey-server, a Redis Cluster;
- :mod:`anarchon_testservers.nats`: nats-server with JetStream, alone or a cluster;
- :mod:`anarchon_testservers.postgres`: PostgreSQL;
- :mod:`anarchon_testservers.chromium`: headless Chromium and its driver (browser tests).

A server that cannot be provisioned raises ``RuntimeError``: the tests fail
loudly, they are never skipped.
"""
