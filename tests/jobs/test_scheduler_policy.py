"""The scheduling policy (jobs/scheduling/policy.py), pure: order, gang fit, fairness, priorities, reservations."""

from __future__ import annotations

import itertools

from jobs.scheduling.policy import plan, victims
from jobs.scheduling.shapes import Amount, Bound, Candidate, Running, Team, World

_ids = itertools.count(1)


def job(owner: int, cpu: float = 1.0, priority: int = 100, created: float | None = None, **kw: object) -> Candidate:
    job_id = next(_ids)
    return Candidate(job_id, owner, priority, float(job_id if created is None else created), Amount(cpu, 0, 0), **kw)  # type: ignore[arg-type]


def world(cpu: float, **kw: object) -> World:
    return World(capacity=Bound(cpu, None, None), scale=Amount(cpu, 1, 1), **kw)  # type: ignore[arg-type]


def test_admits_only_what_fits_the_capacity_and_says_what_is_short() -> None:
    jobs = [job(1, 1.0), job(1, 1.0), job(1, 1.0)]
    result = plan(jobs, world(2.0))
    assert result.admit == [jobs[0].job_id, jobs[1].job_id]
    assert result.waiting == {jobs[2].job_id: ("WaitingForCapacity", ["cpu"])}


def test_a_job_starts_whole_or_not_at_all() -> None:
    """Gang: a 4-core job (2 pservers + 2 trainers of 1 core) never starts on the 3 cores left; a 1-core one does."""
    big, small = job(1, 4.0), job(2, 1.0)
    result = plan([big, small], world(4.0, in_use=Amount(1.0, 0, 0)))
    assert result.admit == [small.job_id]
    assert result.waiting[big.job_id][0] == "WaitingForCapacity"


def test_the_quota_holds_back_only_its_owner() -> None:
    alice, bob = job(1, 1.0), job(2, 1.0)
    state = world(8.0, owner_limits={1: Bound(1.0, None, None)}, owner_in_use={1: Amount(1.0, 0, 0)})
    result = plan([alice, bob], state)
    assert result.admit == [bob.job_id]
    assert result.waiting[alice.job_id] == ("QuotaExhausted", ["cpu"])


def test_the_running_jobs_quota_counts_jobs() -> None:
    first, second = job(1), job(1)
    result = plan([first, second], world(8.0, owner_limits={1: Bound(jobs=1)}))
    assert result.admit == [first.job_id]
    assert result.waiting[second.job_id] == ("QuotaExhausted", ["jobs"])


def test_a_burst_interleaves_with_another_users_job() -> None:
    """alice submits 6, bob then 1: with room for 3, bob's starts before alice's third."""
    alices = [job(1, created=t) for t in range(6)]
    bobs = job(2, created=10.0)
    result = plan([*alices, bobs], world(3.0))
    assert result.admit == [alices[0].job_id, bobs.job_id, alices[1].job_id]


def test_past_usage_and_weights_decide_between_equals() -> None:
    alice, bob = job(1, created=1.0), job(2, created=2.0)
    assert plan([alice, bob], world(1.0, past_share={1: 0.5})).admit == [bob.job_id]
    # Twice the weight: alice's past half share counts as a quarter, below bob's 0.3.
    alice, bob = job(1, created=1.0), job(2, created=2.0)
    heavy = world(1.0, past_share={1: 0.5, 2: 0.3}, weights={1: 2.0})
    assert plan([alice, bob], heavy).admit == [alice.job_id]


def test_higher_priority_goes_first_and_holds_its_room_against_lower() -> None:
    """A high job that does not fit yet keeps lower-priority jobs from taking what it waits for."""
    low_early = job(1, 1.0, priority=0, created=0.0)
    high = job(2, 2.0, priority=1000, created=5.0)
    result = plan([low_early, high], world(2.0, in_use=Amount(1.0, 0, 0)))
    assert result.admit == []
    assert result.order == [high.job_id, low_early.job_id]


def test_without_a_reservation_small_jobs_backfill_then_an_aged_job_holds_its_room() -> None:
    big = job(1, 2.0, created=0.0, waited=10.0)
    small = job(2, 1.0, created=1.0)
    young = world(2.0, in_use=Amount(1.0, 0, 0), reserve_after=600.0)
    assert plan([big, small], young).admit == [small.job_id]  # backfill: the big one cannot start yet anyway
    aged = job(1, 2.0, created=0.0, waited=900.0)
    other = job(2, 1.0, created=1.0)
    old = world(2.0, in_use=Amount(1.0, 0, 0), reserve_after=600.0)
    assert plan([aged, other], old).admit == []  # the big one waited past the bound: it is not passed


def test_a_job_that_could_never_fit_holds_nothing() -> None:
    huge, small = job(1, 100.0, priority=1000), job(2, 1.0, priority=0)
    assert plan([huge, small], world(2.0)).admit == [small.job_id]


def test_an_operators_front_move_wins_within_its_priority() -> None:
    first, boosted = job(1, created=0.0), job(1, created=9.0, boosted=True)
    assert plan([first, boosted], world(1.0)).admit == [boosted.job_id]


def test_the_dry_order_lists_everyone_fairly() -> None:
    jobs = [job(1, created=t) for t in range(3)] + [job(2, created=5.0)]
    order = plan(jobs, world(0.5), dry=True).order
    assert order[:2] == [jobs[0].job_id, jobs[3].job_id]
    assert sorted(order) == sorted(j.job_id for j in jobs)


def test_unbounded_capacity_admits_everything_within_quota() -> None:
    unbounded = World(capacity=Bound(), scale=Amount(16, 1, 1))
    jobs = [job(1, 8.0) for _ in range(5)]
    assert plan(jobs, unbounded).admit == [j.job_id for j in jobs]


def test_amounts_and_bounds() -> None:
    assert Amount(1, 2, 3) + Amount(1, 1, 1) == Amount(2, 3, 4)
    assert Bound(cpu=2.0, gpu=1).over(Amount(2.0, 10**12, 2)) == ["gpu"]
    assert Bound(jobs=2).over(Amount(), jobs=3) == ["jobs"]


def teams_world(cpu: float, **teams: Team) -> World:
    state = world(cpu)
    state.teams = {int(name[1:]): team for name, team in teams.items()}
    return state


def test_a_team_runs_within_its_quota_and_borrows_what_others_leave_idle() -> None:
    state = teams_world(4.0, t1=Team(Bound(2.0, None, None)), t2=Team(Bound(2.0, None, None)))
    jobs = [job(1, 1.0, created=t, team=1) for t in range(4)]
    result = plan(jobs, state)
    assert result.admit == [j.job_id for j in jobs]
    assert result.borrowing == {jobs[2].job_id, jobs[3].job_id}  # past team 1's 2 cores: team 2's idle room


def test_a_team_that_may_not_borrow_waits_at_its_quota() -> None:
    state = teams_world(4.0, t1=Team(Bound(1.0, None, None), may_borrow=False))
    first, second = job(1, 1.0, team=1), job(1, 1.0, team=1)
    result = plan([first, second], state)
    assert result.admit == [first.job_id]
    assert result.waiting[second.job_id] == ("QuotaExhausted", ["team cpu"])


def test_a_job_that_opted_out_of_preemption_does_not_borrow() -> None:
    state = teams_world(4.0, t1=Team(Bound(1.0, None, None)))
    first, second = job(1, 1.0, team=1), job(1, 1.0, team=1, preemptible=False)
    assert plan([first, second], state).admit == [first.job_id]


def test_a_lender_takes_back_what_was_borrowed_whatever_the_priority() -> None:
    state = teams_world(4.0, t1=Team(Bound(2.0, None, None), in_use=Amount(4.0, 0, 0)), t2=Team(Bound(2.0, None, None)))
    state.in_use = Amount(4.0, 0, 0)
    running = [
        Running(1, 100, admitted=1.0, request=Amount(2.0, 0, 0), preemptible=True, team=1),
        Running(2, 100, admitted=2.0, request=Amount(1.0, 0, 0), preemptible=True, team=1, borrowing=True),
        Running(3, 100, admitted=3.0, request=Amount(1.0, 0, 0), preemptible=True, team=1, borrowing=True),
    ]
    lender = Candidate(9, 2, 0, 0.0, Amount(2.0, 0, 0), team=2)  # a low-priority job, within its team's 2 cores
    assert victims(lender, running, state) == [3, 2]  # only the borrowed room, newest first
    greedy = Candidate(8, 2, 0, 0.0, Amount(3.0, 0, 0), team=2)  # past its own quota: it reclaims nothing
    assert victims(greedy, running, state) == []


def test_teams_share_before_their_members() -> None:
    """Team 1's two users against team 2's one: team 2's job goes second, not third."""
    state = teams_world(8.0, t1=Team(Bound(0.0, None, None)), t2=Team(Bound(0.0, None, None)))
    a, b, c = job(1, 1.0, created=0.0, team=1), job(2, 1.0, created=1.0, team=1), job(3, 1.0, created=2.0, team=2)
    assert plan([a, b, c], state).admit == [a.job_id, c.job_id, b.job_id]
