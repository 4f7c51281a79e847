"""The project's jobs, declared on the scheduler that settings.ANARCHON describes."""

from anarchon import RunContext
from anarchon.contrib.django import scheduler


@scheduler.every("report", "5s", jitter=0)
def report(ctx: RunContext) -> None:
    """Stands in for a long job: about 3 s of work that stops early when told to."""
    print(f"report slot={ctx.slot} attempt={ctx.attempt} on {ctx.instance_id}", flush=True)
    if ctx.cancelled.wait_sync(3):
        print(f"report slot={ctx.slot} stopped: {ctx.cancelled.reason}", flush=True)
        ctx.cancelled.raise_if_set()  # not done: on stop, another instance takes the run over
