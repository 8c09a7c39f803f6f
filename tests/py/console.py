"""Drives Ferry's web console in headless Chromium (Debian's) with Playwright, as a person would:
the console of one node must list the cluster's nodes with the leader, the connector and its
tasks RUNNING with the records it dead-lettered, and records per second above zero while more
flow; a task's state must change on screen after the CLI pauses the connector (the command
given); the console's own buttons must work: Resume, Restart (every task a later generation),
Stop, Pause. Saves a screenshot of the page; then a node is killed, and its row must say it does
not answer. Every wait is on what the page shows (Playwright's expect), bounded by --timeout.
Exits non-zero, saying what was not seen, on any failure.
"""

import argparse
import json
import re
import subprocess
import sys

from confluent_kafka import Producer
from playwright.sync_api import expect, sync_playwright


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True, help="the console, http://host:port/ui/")
    p.add_argument("--browser", required=True, help="Chromium's executable")
    p.add_argument("--connector", required=True)
    p.add_argument("--tasks", type=int, required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--leader", type=int, required=True)
    p.add_argument("--dead-lettered", type=int, required=True)
    p.add_argument("--bootstrap", required=True, help="Kafka, for more records")
    p.add_argument("--topic", required=True, help="the topic the connector reads")
    p.add_argument("--more", type=int, default=300, help="valid records to produce")
    p.add_argument("--pause", required=True, help="the command that pauses it, a JSON array")
    p.add_argument("--screenshot", required=True)
    p.add_argument("--kill", required=True, help="the command that kills a node, a JSON array")
    p.add_argument("--killed", type=int, required=True, help="the node it kills")
    p.add_argument("--screenshot-down", required=True)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per wait")
    args = p.parse_args()
    expect.set_options(timeout=args.timeout * 1000)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=args.browser, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = []
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on(
            "console",
            lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
        )
        page.goto(args.url)

        # The cluster: every node, the leader marked, every node's metrics read.
        nodes = page.locator("#nodes tbody tr")
        expect(nodes).to_have_count(args.nodes)
        expect(page.locator("#nodes tbody tr.leader")).to_have_attribute(
            "data-node", str(args.leader)
        )
        expect(page.locator("#nodes .health .good")).to_have_count(args.nodes)
        expect(page.locator("#live")).to_have_attribute("data-live", "live")
        say("the cluster shows: %d nodes, leader %d, live" % (args.nodes, args.leader))

        card = page.locator(f'[data-connector="{args.connector}"]')
        expect(card).to_be_visible()
        states = [
            page.locator(f'[data-task="{args.connector}/{t}"] .state') for t in range(args.tasks)
        ]
        for state in states:
            expect(state).to_have_text("RUNNING")
        workers = card.locator(".tasks tbody .worker")
        expect(workers).to_have_count(args.tasks)
        for t in range(args.tasks):
            expect(workers.nth(t)).to_have_text(re.compile(r"^node [0-9]+ \("))
        expect(card.locator('[data-fact="dead-lettered"]')).to_have_text(
            str(args.dead_lettered)
        )
        say(
            "%s shows %d RUNNING tasks, %d dead-lettered"
            % (args.connector, args.tasks, args.dead_lettered)
        )

        # Records flowing: the page shows a rate above zero (from two scrapes of the nodes).
        producer = Producer({"bootstrap.servers": args.bootstrap})
        for i in range(args.more):
            producer.produce(args.topic, value=json.dumps({"id": i}).encode(), partition=i % 3)
        if producer.flush(30) != 0:
            sys.exit("the records were not all produced")
        rate = card.locator('[data-fact="rate"]')
        expect(rate).to_have_text(re.compile(r"^(?!0\.0$)[0-9]"))
        say("%d more records: %s records/s" % (args.more, rate.inner_text()))
        # Every partition read to its end: the lag the nodes' series sum to is 0.
        expect(card.locator('[data-fact="lag"]')).to_have_text("0")
        say("lag 0")

        # Paused from outside the console: the page follows.
        pause = json.loads(args.pause)
        done = subprocess.run(pause, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{pause} failed: {done.stdout}{done.stderr}")
        for state in states:
            expect(state).to_have_text("PAUSED")
        expect(card.locator(".head .state")).to_have_text("PAUSED")
        say("after the CLI paused it, the page shows every task PAUSED")

        # The console's own buttons.
        card.locator('button[data-action="resume"]').click()
        for state in states:
            expect(state).to_have_text("RUNNING")
        say("the Resume button made every task RUNNING")
        generations = [
            page.locator(f'[data-task="{args.connector}/{t}"] .generation')
            for t in range(args.tasks)
        ]
        before = [int(g.inner_text()) for g in generations]
        card.locator('button[data-action="restart"]').click()
        for generation, was in zip(generations, before):
            expect(generation).not_to_have_text(str(was))
        for state in states:
            expect(state).to_have_text("RUNNING")
        after = [int(g.inner_text()) for g in generations]
        if not all(a > b for a, b in zip(after, before)):
            sys.exit(f"a restart gives every task a later generation: {before} -> {after}")
        say("the Restart button restarted every task: generations %s -> %s" % (before, after))
        card.locator('button[data-action="stop"]').click()
        expect(card.locator(".head .state")).to_have_text("STOPPED")
        expect(card.locator('button[data-action="stop"]')).to_be_disabled()
        running = card.locator(".tasks tbody .state", has_text="RUNNING")
        expect(running).to_have_count(0)
        say("the Stop button stopped it: no task RUNNING")
        card.locator('button[data-action="resume"]').click()
        for state in states:
            expect(state).to_have_text("RUNNING")
        say("the Resume button started it again")
        card.locator('button[data-action="pause"]').click()
        for state in states:
            expect(state).to_have_text("PAUSED")
        expect(card.locator('button[data-action="pause"]')).to_be_disabled()
        say("the Pause button made every task PAUSED")

        # The restart began new runs, whose counters start from zero; the page's count of
        # dead-lettered records is of the connector, not of its tasks' current runs. Seen after
        # a scrape of the nodes that began after the restart.
        scrapes = int(page.locator("body").get_attribute("data-scrapes") or 0)
        page.wait_for_function(
            "n => Number(document.body.dataset.scrapes) >= n",
            arg=scrapes + 2,
            timeout=args.timeout * 1000,
        )
        expect(card.locator('[data-fact="dead-lettered"]')).to_have_text(
            str(args.dead_lettered)
        )
        # Two reads of every node's metrics make a rate: the chart has its first point.
        expect(card.locator('[data-fact="rate"]')).to_have_text(re.compile(r"^[0-9]"))
        page.screenshot(path=args.screenshot, full_page=True)
        say("screenshot: " + args.screenshot)
        if problems:
            sys.exit("the page reported errors:\n" + "\n".join(problems))

        # A node killed: its row says it does not answer, the others still do.
        kill = json.loads(args.kill)
        subprocess.run(kill, check=True)
        down = page.locator(f'#nodes tbody tr[data-node="{args.killed}"] .health .bad')
        expect(down).to_be_visible()
        expect(page.locator("#nodes .health .good")).to_have_count(args.nodes - 1)
        say("node %d, killed, shows: %s" % (args.killed, down.inner_text()))
        page.screenshot(path=args.screenshot_down, full_page=True)
        browser.close()


def say(text):
    print("console: " + text, flush=True)


if __name__ == "__main__":
    main()
