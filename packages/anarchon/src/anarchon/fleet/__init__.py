"""The fleet: what instances declare and the fleet-wide controls, for the CLI, the web page and backends.

- :mod:`anarchon.fleet.types`: :class:`~anarchon.fleet.types.Declaration` and
  :class:`~anarchon.fleet.types.JobControl`, the records a backend stores;
- :mod:`anarchon.fleet.fingerprints`: the fingerprint of a declared schedule;
- :mod:`anarchon.fleet.controls`: pause, resume and skip, written to the store;
- :mod:`anarchon.fleet.roster`: the roster digest of a membership record and the
  candidates of a job;
- :mod:`anarchon.fleet.status`: :func:`~anarchon.fleet.status.fleet_status`, the
  state of every job across the fleet, and
  :func:`~anarchon.fleet.status.fleet_members`, its live members.

The package imports none of them itself: the backend interface needs the types
without the controls, which need the backend interface.
"""
