// Throughput and totals from counters of several nodes (node's test runner: `make unit` runs it).
import assert from "node:assert/strict";
import { test } from "node:test";
import { History, Increases, Totals } from "../src/rates.js";

test("known series grow; series seen first are found, not grown", () => {
  const increases = new Increases();
  const first = increases.observe([{ key: "1|a|0", connector: "a", value: 10 }]);
  assert.deepEqual(first, { grown: new Map(), found: new Map([["a", 10]]) });
  const next = increases.observe([
    { key: "1|a|0", connector: "a", value: 25 },
    { key: "2|a|1", connector: "a", value: 7 },
  ]);
  assert.deepEqual(next, { grown: new Map([["a", 15]]), found: new Map([["a", 7]]) });
});

test("a series that went down started again from zero (a restarted task)", () => {
  const increases = new Increases();
  increases.observe([
    { key: "1|a|0", connector: "a", value: 100 },
    { key: "1|b|0", connector: "b", value: 5 },
  ]);
  const { grown } = increases.observe([
    { key: "1|a|0", connector: "a", value: 4 },
    { key: "1|b|0", connector: "b", value: 9 },
  ]);
  assert.deepEqual(grown, new Map([["a", 4], ["b", 4]]));
});

test("totals survive moved tasks and nodes that miss a scrape", () => {
  const totals = new Totals();
  const onNode2 = (key) => key.startsWith("2|");
  assert.deepEqual(
    totals.observe([
      { key: "1|a|0", connector: "a", value: 3 },
      { key: "2|a|1", connector: "a", value: 2 },
    ]),
    new Map([["a", 5]]),
  );
  // Node 2 does not answer: its series is kept, and not counted again when it is back.
  assert.deepEqual(totals.observe([{ key: "1|a|0", connector: "a", value: 4 }], onNode2), new Map([["a", 6]]));
  assert.deepEqual(
    totals.observe([
      { key: "1|a|0", connector: "a", value: 4 },
      { key: "2|a|1", connector: "a", value: 2 },
    ]),
    new Map([["a", 6]]),
  );
  // Task 0 moved to node 3: its new run's count is new.
  assert.deepEqual(
    totals.observe([
      { key: "3|a|0", connector: "a", value: 1 },
      { key: "2|a|1", connector: "a", value: 2 },
    ]),
    new Map([["a", 7]]),
  );
});

test("the history keeps the last seconds of each connector", () => {
  const history = new History(60);
  history.add("a", 0, { rate: 1 });
  history.add("a", 30, { rate: 2 });
  history.add("a", 61, { rate: 3 });
  assert.deepEqual(history.of("a").map((p) => p.rate), [2, 3]);
  assert.deepEqual(history.of("b"), []);
});
