"""The scheduler's private parts; :mod:`anarchon.scheduler` is the public class that wires them.

- the wake-up loop over the timetable (:mod:`.wakeup`), claims in batches
  (:mod:`.claims`), overlap re-checks (:mod:`.overlap_wait`) and releases
  (:mod:`.releases`);
- running handlers (:mod:`.executor`), retries (:mod:`.retry_step`), the
  catch-up after a resume (:mod:`.resume_catch_up`) and storing how runs ended
  (:mod:`.results`);
- leases (:mod:`.leases`) and the lease thread (:mod:`.lease_thread`);
- the store policy (:mod:`.store_retry`), batches (:mod:`.store_batches`) and
  store time (:mod:`.store_time`);
- the fleet registry and controls (:mod:`.fleet_sync`), the skip log
  (:mod:`.skip_log`), gc tuning (:mod:`.gc_tuning`), the state of one run
  (:mod:`.run_state`), task sets (:mod:`.tasks`), the job decorators shared with
  the sync facade (:mod:`.declaring`) and ``run_due()`` (:mod:`.due`);
- the assembly of the parts (:mod:`.assembly`) and ``stop()``'s drain (:mod:`.drain`).

Nothing here is public API: names and signatures change without notice.
"""
