"""The checks every store must pass, by topic; :data:`CHECKS` lists them in the order they run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from flowtide.store.base import Store
from flowtide.testing.storechecks.commits import (
    a_commit_applies_every_part,
    a_refused_commit_applies_nothing,
    compare_and_set_conflicts,
    create_run_is_all_or_nothing,
    duplicate_signal_keys,
    history_is_numbered_per_run,
    run_lifecycle_conflicts,
    runs_are_listed_by_lifecycle,
    state_keys_are_set_and_deleted,
    unknown_runs,
)
from flowtide.testing.storechecks.due import (
    a_commit_wakes_another_run,
    an_ended_run_keeps_no_due_entries,
    due_entries_are_one_per_token_and_purpose,
    due_entries_are_read_earliest_first,
    fired_entries_are_removed_only_as_they_were,
)
from flowtide.testing.storechecks.flows import (
    flows_are_listed_by_id_in_the_order_stored,
    stored_flows_count_their_runs,
)
from flowtide.testing.storechecks.inbox import (
    a_deadline_waits_for_the_requests_recorded_before_it,
    pending_requests_are_listed_oldest_first,
    signal_requests_are_answered_once,
    signal_requests_wake_the_runs_holder,
)
from flowtide.testing.storechecks.leases import (
    a_commit_takes_the_lease_of_a_run_nobody_holds,
    acquiring_a_run,
    claims_never_hand_a_run_to_two_owners,
    claims_take_runs_whose_wake_has_come,
    commits_are_fenced_by_their_lease,
    leases_are_renewed_and_given_back,
    leases_say_whom_a_run_was_taken_from,
    runs_wake_when_they_need_a_worker,
)
from flowtide.testing.storechecks.loading import a_run_is_loaded_whole_in_one_read
from flowtide.testing.storechecks.parking import (
    node_anchors_are_stored_and_released,
    parks_are_found_by_filters_in_order,
)
from flowtide.testing.storechecks.pruning import (
    pruning_deletes_ended_runs_and_everything_of_theirs,
    pruning_goes_in_batches,
    pruning_keeps_live_runs_and_the_children_of_live_parents,
    runs_are_found_by_the_start_of_their_id,
)
from flowtide.testing.storechecks.records import (
    checkpoints_round_trip,
    flows_are_stored_by_digest,
    json_values_round_trip,
    records_are_copies,
    scatter_items_are_kept_by_index,
    tokens_are_filtered_by_status,
    values_that_are_not_json_are_refused,
)
from flowtide.testing.storechecks.workers import (
    worker_heartbeats_are_copies,
    worker_heartbeats_are_kept_and_forgotten,
)

__all__ = ["CHECKS", "StoreCheck"]

StoreCheck = Callable[[Store], Awaitable[None]]
"""One check: given a fresh, empty store, it returns, or raises ``AssertionError`` saying why."""

CHECKS: tuple[StoreCheck, ...] = (
    a_commit_applies_every_part,
    a_refused_commit_applies_nothing,
    create_run_is_all_or_nothing,
    compare_and_set_conflicts,
    run_lifecycle_conflicts,
    duplicate_signal_keys,
    unknown_runs,
    state_keys_are_set_and_deleted,
    history_is_numbered_per_run,
    runs_are_listed_by_lifecycle,
    due_entries_are_read_earliest_first,
    due_entries_are_one_per_token_and_purpose,
    fired_entries_are_removed_only_as_they_were,
    an_ended_run_keeps_no_due_entries,
    a_commit_wakes_another_run,
    runs_wake_when_they_need_a_worker,
    claims_take_runs_whose_wake_has_come,
    claims_never_hand_a_run_to_two_owners,
    commits_are_fenced_by_their_lease,
    a_commit_takes_the_lease_of_a_run_nobody_holds,
    acquiring_a_run,
    leases_say_whom_a_run_was_taken_from,
    leases_are_renewed_and_given_back,
    signal_requests_wake_the_runs_holder,
    signal_requests_are_answered_once,
    pending_requests_are_listed_oldest_first,
    a_deadline_waits_for_the_requests_recorded_before_it,
    flows_are_stored_by_digest,
    flows_are_listed_by_id_in_the_order_stored,
    stored_flows_count_their_runs,
    node_anchors_are_stored_and_released,
    parks_are_found_by_filters_in_order,
    a_run_is_loaded_whole_in_one_read,
    tokens_are_filtered_by_status,
    scatter_items_are_kept_by_index,
    checkpoints_round_trip,
    json_values_round_trip,
    values_that_are_not_json_are_refused,
    records_are_copies,
    worker_heartbeats_are_kept_and_forgotten,
    worker_heartbeats_are_copies,
    runs_are_found_by_the_start_of_their_id,
    pruning_deletes_ended_runs_and_everything_of_theirs,
    pruning_keeps_live_runs_and_the_children_of_live_parents,
    pruning_goes_in_batches,
)
