// The console's reading of the nodes' series (node's test runner: `make unit` runs it).
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseExposition } from "../src/exposition.js";

test("samples with and without labels; comments and blank lines skipped", () => {
  const text = [
    "# TYPE kafka_connect_sink_task_sink_record_read counter",
    'kafka_connect_sink_task_sink_record_read_total{connector="orders",task="0"} 300',
    "",
    "ferry_raft_leader_id 2",
    "# EOF",
  ].join("\n");
  assert.deepEqual(parseExposition(text), [
    {
      name: "kafka_connect_sink_task_sink_record_read_total",
      labels: { connector: "orders", task: "0" },
      value: 300,
    },
    { name: "ferry_raft_leader_id", labels: {}, value: 2 },
  ]);
});

test("escaped label values, a timestamp, and lines that are not samples", () => {
  const text = [
    'x{connector="a \\"quoted\\", name\\\\",task="1"} 1.5 1700000000',
    "not_a_sample",
    "y NaN-ish",
  ].join("\n");
  assert.deepEqual(parseExposition(text), [
    { name: "x", labels: { connector: 'a "quoted", name\\', task: "1" }, value: 1.5 },
  ]);
});
