"""Experiments API: create (a sweep over a job template), list, get one (with its best trial), its trials sorted
by the metric or a param, and kill. Every answer is the owner's own: another user's experiment is a 404."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import NotFound
from experiments import services, tasks
from experiments.models import Experiment, Trial

MAX_BODY_KEYS = 16


class TrialSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    job = serializers.CharField(
        source="job.uid", default=None, allow_null=True, help_text="Its job's uid; null until it is submitted."
    )

    class Meta:
        model = Trial
        fields = ["index", "params", "job", "state", "message", "best", "last", "steps", "checkpoints_pruned"]


class ExperimentSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    owner = serializers.CharField(source="owner.username")
    datacenter = serializers.CharField(source="datacenter.name")
    trials = serializers.SerializerMethodField(help_text="How many trials are in each state.")
    best_trial = serializers.SerializerMethodField(help_text="The trial with the best metric so far; else null.")
    then_job = serializers.CharField(source="then_job.uid", default=None, allow_null=True,
                                     help_text="The sweep's `then` job's uid, once submitted; else null.")  # fmt: skip

    class Meta:
        model = Experiment
        fields = ["name", "uid", "owner", "datacenter", "state", "message", "created_at", "finished_at", "sweep",
                  "template", "trials", "best_trial", "then_job"]  # fmt: skip

    def get_trials(self, experiment: Experiment) -> dict[str, int]:
        counts = {row["state"]: row["n"] for row in experiment.trials.values("state").annotate(n=Count("id"))}
        return {"total": sum(counts.values()), **counts}

    def get_best_trial(self, experiment: Experiment) -> dict[str, Any] | None:
        best = experiment.trials_by_metric().exclude(best=None).select_related("job").first()
        return dict(TrialSerializer(best).data) if best is not None else None


def experiment_of(request: Request, ref: str) -> Experiment:
    """The owner's experiment `ref` (a uid, or a name: the newest of that name); a 404 for anyone else's."""
    found = Experiment.objects.named(request.user.pk, ref)
    if found is None:
        raise NotFound(f"no experiment {ref[:60]!r}", "name")
    return found


class ExperimentListCreate(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = ExperimentSerializer

    def get_queryset(self) -> QuerySet[Experiment]:
        mine = Experiment.objects.filter(owner_id=self.request.user.pk)
        return mine.select_related("owner", "datacenter", "then_job")

    @extend_schema(request=None, responses={201: ExperimentSerializer})
    def post(self, request: Request) -> Response:
        """A sweep (name, params, search, max_trials, parallel, seed, metric) and `template`, the job spec every
        trial is made from; trials are submitted as `parallel` allows, once the experiment is stored."""
        if not isinstance(request.data, dict) or len(request.data) > MAX_BODY_KEYS:
            raise exceptions.ValidationError({"sweep": ["must be an object of the sweep's keys and `template`"]})
        try:
            experiment = services.create(request.user, dict(request.data))  # type: ignore[arg-type]
        except services.InvalidTemplate as exc:
            raise exceptions.ValidationError(exc.problems) from None  # each template.<field>'s messages
        tasks.advance_soon(experiment.pk)
        return Response(ExperimentSerializer(experiment).data, status=status.HTTP_201_CREATED)


class ExperimentDetail(generics.RetrieveAPIView):  # type: ignore[type-arg]
    serializer_class = ExperimentSerializer

    def get_object(self) -> Experiment:
        return experiment_of(self.request, self.kwargs["name"])


ORDERINGS = ("index", "-index", "best", "-best", "last", "-last", "steps", "-steps", "metric")


class ExperimentTrials(generics.ListAPIView):  # type: ignore[type-arg]
    """Its trials: by the metric, the best first (`ordering=metric`, the default), or by index, best, last or
    steps (a `-` first: descending); `state=` keeps one state."""

    serializer_class = TrialSerializer

    @extend_schema(parameters=[OpenApiParameter("ordering", str, enum=ORDERINGS), OpenApiParameter("state", str)])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Trial]:
        experiment = experiment_of(self.request, self.kwargs["name"])
        ordering = self.request.query_params.get("ordering", "metric")
        if ordering not in ORDERINGS:
            raise exceptions.ValidationError({"ordering": [f"must be one of {', '.join(ORDERINGS)}"]})
        by_metric = ordering == "metric"
        trials = experiment.trials_by_metric() if by_metric else experiment.trials.order_by(ordering, "index")
        state = self.request.query_params.get("state")
        if state:
            trials = trials.filter(state=state[:20])
        return trials.select_related("job")


class ExperimentKill(APIView):
    @extend_schema(request=None, responses={200: ExperimentSerializer})
    def post(self, request: Request, name: str) -> Response:
        """Kill it: no trial is submitted any more, and every trial's job that still waits or runs is killed."""
        return Response(ExperimentSerializer(services.kill(experiment_of(request, name))).data)
