"""One view: a job's recent runs on every instance, read through the sync facade."""

from anarchon.contrib.django import get_scheduler
from django.http import HttpRequest, JsonResponse
from django.urls import path


def job_runs(request: HttpRequest, name: str) -> JsonResponse:
    """``GET /jobs/<name>``: the newest runs of a job, from every instance."""
    records = get_scheduler().history(name, int(request.GET.get("limit", "10")))
    runs = [
        {"slot": r.slot, "instance": r.instance_id, "status": r.status, "attempt": r.attempt}
        for r in records
    ]
    return JsonResponse({"job": name, "runs": runs})


urlpatterns = [path("jobs/<str:name>", job_runs)]
