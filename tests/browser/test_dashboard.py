"""The dashboard in headless Chromium against the real server: a parked run seen on the diagram,
signalled from the form and completed without a reload; a short real deadline counting down and
expiring; the settings editor's what-if and save; ids and keys holding markup shown as text."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import FLOW, QUICK_FLOW, TOKEN, Server, shot


def until_lifecycle(server: Server, run_id: str, lifecycle: str, patience: float = 20.0) -> None:
    end = time.monotonic() + patience
    while time.monotonic() < end:
        if server.call("GET", f"/api/runs/{run_id}")[1]["lifecycle"] == lifecycle:
            return
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never {lifecycle}")


def keep_token(page: Page, server: Server) -> None:
    page.goto(server.url + "/")
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#token-state")).to_have_text("token kept for this tab")


def test_parked_run_is_signalled_from_the_form_and_completes_live(
    page: Page, server: Server
) -> None:
    run_id = server.start(FLOW)
    keep_token(page, server)
    page.goto(f"{server.url}/#/runs/{quote(run_id, safe='')}")
    parked = page.locator('#run-diagram g.node[data-mark="parked"]')
    expect(parked).to_have_count(1)
    expect(parked).to_contain_text("review")
    # The park's key holds markup: it is shown as text, never made into elements.
    expect(page.locator("#deadlines")).to_contain_text("<b>review</b>")
    assert page.locator("#deadlines b, #signal-form b").count() == 0
    expect(page.locator("#deadlines .countdown").first).to_have_text(re.compile(r"^in (59m|1h)"))
    expect(page.locator("#explain")).to_contain_text("review")
    shot(page, "run-parked")
    page.evaluate("window.notReloaded = true")

    page.select_option("#signal-output", "approved")
    page.fill("#signal-payload", '{"note": "<script>alert(1)</script>"}')
    page.click("#signal-form button[type=submit]")

    expect(page.locator("#answer")).to_have_text("Signal accepted.")
    expect(page.locator(".run-head")).to_have_attribute("data-lifecycle", "completed")
    expect(page.locator("#outcome")).to_contain_text("done")
    expect(page.locator('#timeline li[data-kind="signalled"]')).to_have_count(1)
    expect(page.locator('#timeline li[data-kind="run_finished"]')).to_have_count(1)
    expect(page.locator('#run-diagram g.node[data-mark="parked"]')).to_have_count(0)
    expect(page.locator('#run-diagram g.node[data-mark="reached"]')).to_contain_text("done")
    assert page.evaluate("window.notReloaded") is True
    shot(page, "run-completed")


def test_a_short_deadline_counts_down_and_expires_on_the_page(page: Page, server: Server) -> None:
    run_id = server.start(QUICK_FLOW)
    page.goto(f"{server.url}/#/runs/{quote(run_id, safe='')}")
    countdown = page.locator("#deadlines .countdown").first
    expect(countdown).to_have_text(re.compile(r"^in [0-6]s$"))
    shot(page, "deadline-counting")
    expect(countdown).to_have_text(re.compile(r"^in [0-2]s$"), timeout=10_000)
    expect(page.locator(".run-head")).to_have_attribute(
        "data-lifecycle", "completed", timeout=10_000
    )
    expect(page.locator("#outcome")).to_contain_text("expired")
    expect(page.locator('#timeline li[data-kind="node_timed_out"]')).to_have_count(1)
    expect(page.locator("#explain")).to_contain_text("timed_out")
    shot(page, "deadline-expired")


def test_countdowns_keep_the_servers_time_when_the_browsers_clock_is_wrong(
    page: Page, server: Server
) -> None:
    run_id = server.start(FLOW)
    # The browser's clock runs three hours ahead: the page counts by the server's Date header.
    page.clock.install(time=datetime.now(UTC) + timedelta(hours=3))
    page.goto(f"{server.url}/#/runs/{quote(run_id, safe='')}")
    parked = page.locator("#deadlines li").first
    expect(parked.locator(".countdown")).to_have_text(re.compile(r"^in 59m [0-5]\ds$"))


def test_without_a_token_the_forms_are_disabled_and_say_why(page: Page, server: Server) -> None:
    run_id = server.start(FLOW)
    page.goto(f"{server.url}/#/runs/{quote(run_id, safe='')}")
    expect(page.locator("#signal-form .needs-token")).to_be_visible()
    expect(page.locator("#signal-form button[type=submit]")).to_be_disabled()
    expect(page.locator("#cancel-form button[type=submit]")).to_be_disabled()
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#signal-form button[type=submit]")).to_be_enabled()
    expect(page.locator("#signal-form .needs-token")).to_be_hidden()


def test_a_payload_that_is_not_a_json_object_is_refused_in_the_page(
    page: Page, server: Server
) -> None:
    run_id = server.start(FLOW)
    keep_token(page, server)
    page.goto(f"{server.url}/#/runs/{quote(run_id, safe='')}")
    page.fill("#signal-payload", "[1, 2]")
    page.click("#signal-form button[type=submit]")
    expect(page.locator("#answer")).to_contain_text("The payload is not a JSON object")
    expect(page.locator(".run-head")).to_have_attribute("data-lifecycle", "parked")


def test_a_run_is_cancelled_from_the_form_with_its_reason(page: Page, server: Server) -> None:
    run_id = server.start(FLOW)
    keep_token(page, server)
    page.goto(f"{server.url}/#/runs/{quote(run_id, safe='')}")
    expect(page.locator('#run-diagram g.node[data-mark="parked"]')).to_have_count(1)
    page.once("dialog", lambda dialog: dialog.accept())
    page.fill("#cancel-reason", "customer <left>")
    page.click("#cancel-form button[type=submit]")
    expect(page.locator(".run-head")).to_have_attribute("data-lifecycle", "cancelled")
    expect(page.locator("#answer")).to_have_text("Cancelled.")
    expect(page.locator('#timeline li[data-kind="run_finished"]')).to_contain_text("cancelled")


def test_runs_page_filters_by_flow_and_lifecycle_and_lists_new_runs_live(
    page: Page, server: Server
) -> None:
    page.goto(f"{server.url}/#/runs?lifecycle=parked&flow={quote(FLOW, safe='')}")
    expect(page.locator("table.runs tbody tr").first).to_be_visible()
    run_id = server.start(FLOW)
    row = page.locator(f'table.runs tr[data-run="{run_id}"]')
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(3)).to_have_text("review (parked)")
    for lifecycle in page.locator("table.runs tbody td:nth-child(3)").all_inner_texts():
        assert lifecycle.startswith("parked")
    shot(page, "runs")
    page.select_option("#filter-lifecycle", "completed")
    expect(page).to_have_url(re.compile(r"lifecycle=completed"))
    expect(page.locator(f'table.runs tr[data-run="{run_id}"]')).to_have_count(0)


def test_flow_page_draws_the_flow_and_its_settings(page: Page, server: Server) -> None:
    page.goto(f"{server.url}/#/flows")
    card = page.locator(f'.flow-card[data-flow="{FLOW}"]')
    expect(card.locator("svg g.node")).not_to_have_count(0)
    expect(card.locator(".settings-list")).to_contain_text("review timeout PT1H")
    shot(page, "flows")
    card.get_by_role("link", name=FLOW, exact=True).click()
    expect(page).to_have_url(re.compile(re.escape(quote(FLOW, safe=""))))
    expect(page.locator("#flow-diagram svg g.node")).not_to_have_count(0)
    expect(page.locator("#placement-settings")).to_contain_text("PT1H")
    expect(page.locator("#settings-form")).to_be_visible()
    shot(page, "flow")


def test_settings_editor_is_made_from_the_node_settings_schema(page: Page, server: Server) -> None:
    keep_token(page, server)
    page.goto(f"{server.url}/#/flows/{quote(FLOW, safe='')}")
    form = page.locator("#settings-form")
    expect(form.locator("#edit-placement")).to_have_value("review")
    expect(form.locator('[data-setting="timeout"]')).to_have_value("PT1H")
    anchors = form.locator('[data-setting="timeout_anchor"] option').all_inner_texts()
    assert {"park", "instance", "node"} <= set(anchors)
    expect(form.locator('[data-setting="release_on"]')).to_be_visible()
    form.get_by_role("button", name="Add timer").click()
    expect(form.locator('[data-setting^="timers-0."]')).not_to_have_count(0)
    form.get_by_role("button", name="Remove").click()
    _, api = server.call("GET", "/openapi.json")
    if "/api/whatif" in api["paths"]:
        page.click("#whatif-button")
        expect(page.locator("#whatif-report")).to_have_text("Nothing is changed yet.")
    else:  # said on the page, the buttons disabled even with a token
        expect(form.locator(".unavailable").first).to_contain_text("does not offer what-if")
        expect(page.locator("#whatif-button")).to_be_disabled()
        expect(page.locator("#save-button")).to_be_disabled()
    expect(form.locator('[data-setting="timeout"]')).to_be_enabled()


def test_whatif_figures_then_save_makes_a_new_version(page: Page, server: Server) -> None:
    _, api = server.call("GET", "/openapi.json")
    if "/api/whatif" not in api.get("paths", {}):
        pytest.skip("the server has no POST /api/whatif yet")
    for _ in range(2):  # (two recorded runs for what-if to play again)
        run_id = server.start(FLOW)
        until_lifecycle(server, run_id, "parked")
        signal = {"placement": "review", "output": "approved"}
        assert server.call("POST", f"/api/runs/{run_id}/signals", signal)[0] == 200
        until_lifecycle(server, run_id, "completed")
    keep_token(page, server)
    page.goto(f"{server.url}/#/flows/{quote(FLOW, safe='')}")
    expect(page.locator("#flow-version")).to_contain_text("version 1")
    page.fill('#settings-form [data-setting="timeout"]', "PT30M")
    page.click("#whatif-button")
    expect(page.locator("#whatif-report .summary li").first).to_be_visible()
    shot(page, "whatif")
    page.click("#save-button")
    expect(page.locator("#flow-version")).not_to_contain_text("version 1")
    expect(page.locator('#settings-form [data-setting="timeout"]')).to_have_value("PT30M")
    shot(page, "saved")
