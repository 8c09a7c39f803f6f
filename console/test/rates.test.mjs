// Throughput from counters of several nodes (node's test runner: `make unit` runs it).
import assert from "node:assert/strict";
import { test } from "node:test";
import { History, Increases } from "../src/rates.js";

test("a series gains what it grew; a series seen first gains nothing", () => {
  const increases = new Increases();
  assert.deepEqual(increases.observe([{ key: "1|a|0", connector: "a", value: 10 }]), new Map());
  const gained = increases.observe([
    { key: "1|a|0", connector: "a", value: 25 },
    { key: "2|a|1", connector: "a", value: 7 },
  ]);
  assert.deepEqual(gained, new Map([["a", 15]]));
});

test("a series that went down started again from zero (a moved or restarted task)", () => {
  const increases = new Increases();
  increases.observe([
    { key: "1|a|0", connector: "a", value: 100 },
    { key: "1|b|0", connector: "b", value: 5 },
  ]);
  const gained = increases.observe([
    { key: "1|a|0", connector: "a", value: 4 },
    { key: "1|b|0", connector: "b", value: 9 },
  ]);
  assert.deepEqual(gained, new Map([["a", 4], ["b", 4]]));
});

test("the history keeps the last seconds of each connector", () => {
  const history = new History(60);
  history.add("a", 0, { rate: 1 });
  history.add("a", 30, { rate: 2 });
  history.add("a", 61, { rate: 3 });
  assert.deepEqual(history.of("a").map((p) => p.rate), [2, 3]);
  assert.deepEqual(history.of("b"), []);
});
