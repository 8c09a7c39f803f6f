// Ferry's web console: the cluster and its connectors, read from the REST API of the node that
// serves it (/ferry/cluster, /ferry/connectors, /ferry/nodes/{id}/metrics), read again when
// /ui/events says something changed; writes through Kafka Connect's endpoints, always as JSON.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import "./console.css";
import { parseExposition } from "./exposition.js";
import { History, Increases, Totals } from "./rates.js";
import { h, replace } from "./dom.js";

/** How often every node's metrics are read, and how much of them the charts show. */
const SCRAPE_SECONDS = 2;
const WINDOW_SECONDS = 300;

/** The series the console sums per connector (a task's labels name its connector). */
const RECORDS = [
  "kafka_connect_sink_task_sink_record_read_total",
  "kafka_connect_source_task_source_record_poll_total",
];
const DEAD_LETTERED = "kafka_connect_task_error_deadletterqueue_produce_requests";
const ERRORS = "kafka_connect_task_error_total_record_errors";
const LAG = "ferry_sink_partition_lag";

const view = {
  cluster: null,
  connectors: [],
  /** node id -> { ok, message } of its last scrape. */
  nodes: new Map(),
  /** connector -> { rate, deadLettered, errors, lag }: the rate of the last interval, the
   * totals since the page opened (with what the runs it found had counted), the lag now. */
  flow: new Map(),
};
/** The counters summed per connector across the runs of its tasks. */
const counters = { records: new Increases(), deadLettered: new Totals(), errors: new Totals() };
const history = new History(WINDOW_SECONDS);
/** connector name -> its card's elements. */
const cards = new Map();

// ---- the REST API

async function problem(response) {
  try {
    const body = await response.json();
    return body.message ?? `${response.status} ${response.statusText}`;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`GET ${path}: ${await problem(response)}`);
  return response.json();
}

/** A write, as JSON (the node refuses a browser's write that is not). */
async function write(method, path, what) {
  try {
    const response = await fetch(path, {
      method,
      headers: { "Content-Type": "application/json", Accept: "application/json" },
    });
    if (response.ok) notice(`${what}: accepted`);
    else notice(`${what}: ${await problem(response)}`, true);
  } catch (e) {
    notice(`${what}: ${e.message}`, true);
  }
  refresh();
}

function notice(text, error = false) {
  const p = document.getElementById("notice");
  p.textContent = text;
  p.hidden = false;
  p.className = error ? "error" : "";
}

// ---- reading: the connectors on events and after writes; the cluster also with every scrape

let reading = null;
let readAgain = false;

/** Read the cluster and the connectors again (one read at a time; a request meanwhile waits). */
function refresh() {
  if (reading) {
    readAgain = true;
    return;
  }
  reading = (async () => {
    do {
      readAgain = false;
      try {
        const [cluster, connectors] = await Promise.all([
          getJson("/ferry/cluster"),
          getJson("/ferry/connectors"),
        ]);
        view.cluster = cluster;
        view.connectors = connectors;
        render();
      } catch (e) {
        notice(e.message, true);
      }
    } while (readAgain);
    reading = null;
  })();
}

/** The cluster again (its indexes and replication move without an event). */
async function readCluster() {
  try {
    view.cluster = await getJson("/ferry/cluster");
    renderCluster();
  } catch (e) {
    notice(e.message, true);
  }
}

async function scrape() {
  const members = view.cluster?.members ?? [];
  const now = Date.now() / 1000;
  const answers = await Promise.all(
    members.map(async (member) => {
      try {
        const response = await fetch(`/ferry/nodes/${member.id}/metrics`);
        if (!response.ok) return { id: member.id, ok: false, message: await problem(response) };
        return { id: member.id, ok: true, text: await response.text() };
      } catch (e) {
        return { id: member.id, ok: false, message: e.message };
      }
    }),
  );
  // Each measure's series of this scrape, keyed by node, series and task.
  const series = { records: [], deadLettered: [], errors: [] };
  const lags = new Map();
  const connectors = new Set();
  view.nodes = new Map();
  for (const answer of answers) {
    view.nodes.set(answer.id, answer.ok ? { ok: true } : { ok: false, message: answer.message });
    if (!answer.ok) continue;
    for (const { name, labels, value } of parseExposition(answer.text)) {
      const connector = labels.connector;
      if (connector === undefined) continue;
      const sample = { key: `${answer.id}|${name}|${connector}|${labels.task}`, connector, value };
      if (RECORDS.includes(name)) {
        series.records.push(sample);
        connectors.add(connector);
      } else if (name === DEAD_LETTERED || name === `${DEAD_LETTERED}_total`) {
        series.deadLettered.push(sample);
      } else if (name === ERRORS || name === `${ERRORS}_total`) {
        series.errors.push(sample);
      } else if (name === LAG) {
        lags.set(connector, (lags.get(connector) ?? 0) + value);
      }
    }
  }
  // A node that did not answer still has the series it had.
  const silent = new Set(answers.filter((a) => !a.ok).map((a) => `${a.id}|`));
  const kept = (key) => silent.has(key.slice(0, key.indexOf("|") + 1));
  const { grown } = counters.records.observe(series.records, kept);
  const deadLettered = counters.deadLettered.observe(series.deadLettered, kept);
  const errors = counters.errors.observe(series.errors, kept);
  const seconds = scrape.last ? now - scrape.last : null;
  scrape.last = now;
  const flow = new Map();
  for (const connector of connectors) {
    const f = {
      rate: seconds ? (grown.get(connector) ?? 0) / seconds : null,
      deadLettered: deadLettered.get(connector) ?? 0,
      errors: errors.get(connector) ?? 0,
      lag: lags.get(connector) ?? null,
    };
    if (f.rate !== null) history.add(connector, now, { rate: f.rate, lag: f.lag });
    flow.set(connector, f);
  }
  view.flow = flow;
  render();
  // How many scrapes the page made: what a test waits on to see a newer one.
  document.body.dataset.scrapes = String(Number(document.body.dataset.scrapes ?? 0) + 1);
}

// ---- showing

function render() {
  renderCluster();
  renderConnectors();
}

function renderCluster() {
  const cluster = view.cluster;
  if (!cluster) return;
  document.getElementById("cluster-id").textContent = cluster.cluster_id
    ? `cluster ${cluster.cluster_id}`
    : "";
  const leader = cluster.leader_id ?? null;
  replace(
    document.getElementById("cluster-facts"),
    `Served by node ${cluster.node_id} (${cluster.state}). `,
    leader === null ? h("strong", { class: "bad" }, "No leader. ") : `Leader: node ${leader}. `,
    `Term ${cluster.term}, committed index ${cluster.committed_index ?? "–"}, ` +
      `applied index ${cluster.applied_index ?? "–"}.`,
  );
  const rows = cluster.members.map((m) => {
    const scraped = view.nodes.get(m.id);
    const health = !scraped
      ? h("span", {}, "…")
      : scraped.ok
        ? h("span", { class: "good" }, "answering")
        : h("span", { class: "bad", title: scraped.message }, scraped.message);
    return h(
      "tr",
      { "data-node": m.id, class: m.id === leader ? "leader" : "" },
      h("td", {}, `${m.id}${m.id === cluster.node_id ? " (this node)" : ""}`),
      h("td", { class: "raft-state" }, m.raft_state),
      h("td", {}, m.role),
      h("td", {}, m.api_addr),
      h("td", {}, m.rest_addr || "–"),
      h("td", {}, `${m.matched_index ?? "–"}`),
      h("td", { class: "health" }, health),
    );
  });
  replace(document.querySelector("#nodes tbody"), ...rows);
}

function renderConnectors() {
  const list = document.getElementById("connector-list");
  const names = new Set(view.connectors.map((c) => c.name));
  for (const [name, card] of cards) {
    if (!names.has(name)) {
      card.chart.destroy();
      card.root.remove();
      cards.delete(name);
    }
  }
  document.getElementById("no-connectors").hidden = view.connectors.length > 0;
  for (const status of view.connectors) {
    let card = cards.get(status.name);
    if (!card) {
      card = newCard(status.name);
      cards.set(status.name, card);
    }
    list.appendChild(card.root);
    fillCard(card, status);
  }
}

function newCard(name) {
  const path = `/connectors/${encodeURIComponent(name)}`;
  const button = (action, label, method, endpoint) =>
    h(
      "button",
      {
        "data-action": action,
        onclick: () => write(method, `${path}${endpoint}`, `${label} ${name}`),
      },
      label,
    );
  const buttons = {
    pause: button("pause", "Pause", "PUT", "/pause"),
    resume: button("resume", "Resume", "PUT", "/resume"),
    restart: button("restart", "Restart", "POST", "/restart?includeTasks=true&onlyFailed=false"),
    stop: button("stop", "Stop", "PUT", "/stop"),
  };
  const title = h("h3", {}, name);
  const kind = h("span", { class: "kind" });
  const state = h("span", { class: "state" });
  const target = h("span", { class: "target" });
  const facts = h("dl", { class: "facts" });
  const chartBox = h("div", { class: "chart" });
  const tasks = h("tbody");
  const root = h(
    "section",
    { class: "connector", "data-connector": name },
    h("div", { class: "head" }, title, kind, state, target),
    h("div", { class: "actions" }, ...Object.values(buttons)),
    h("div", { class: "flow" }, facts, chartBox),
    h(
      "table",
      { class: "tasks" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["task", "state", "worker", "generation", "fenced commits", "trace", ""].map((t) =>
            h("th", {}, t),
          ),
        ),
      ),
      tasks,
    ),
  );
  const chart = new uPlot(
    {
      width: 420,
      height: 130,
      legend: { live: false },
      scales: {
        // Always the last WINDOW_SECONDS, however few points there are yet.
        x: {
          time: true,
          range: () => {
            const now = Date.now() / 1000;
            return [now - WINDOW_SECONDS, now];
          },
        },
        lag: { auto: true },
      },
      axes: [{}, { label: "records/s", size: 56 }, { scale: "lag", side: 1, label: "lag", size: 56 }],
      series: [
        {},
        { label: "records/s", stroke: "#2a6fdb", width: 2 },
        { label: "lag", scale: "lag", stroke: "#d9822b", width: 2 },
      ],
    },
    [[], [], []],
    chartBox,
  );
  return { root, buttons, kind, state, target, facts, tasks, chart, name };
}

function fillCard(card, status) {
  card.kind.textContent = status.type;
  card.state.textContent = status.state;
  card.state.dataset.state = status.state;
  card.target.textContent = `target ${status.target_state}`;
  card.buttons.pause.disabled = status.target_state === "PAUSED";
  card.buttons.resume.disabled = status.target_state === "RUNNING";
  card.buttons.stop.disabled = status.target_state === "STOPPED";

  const flow = view.flow.get(card.name);
  const fact = (term, value, attrs = {}) => [h("dt", {}, term), h("dd", attrs, value)];
  const number = (n, digits = 0) => (n === null || n === undefined ? "–" : n.toFixed(digits));
  replace(
    card.facts,
    ...fact("records/s", number(flow?.rate, 1), { "data-fact": "rate" }),
    ...fact("dead-lettered", number(flow?.deadLettered), {
      "data-fact": "dead-lettered",
      title: "since this page opened, with what the task runs it found had counted",
    }),
    ...fact("record errors", number(flow?.errors), {
      "data-fact": "errors",
      title: "since this page opened, with what the task runs it found had counted",
    }),
    ...fact("lag", flow?.lag === null || !flow ? "off" : number(flow.lag), {
      "data-fact": "lag",
      title: "the sum of its partitions' lag; [metrics] partition_lag = true shows it",
    }),
  );
  const points = history.of(card.name);
  card.chart.setData([
    points.map((p) => p.time),
    points.map((p) => p.rate),
    points.map((p) => p.lag),
  ]);

  const rows = status.tasks.flatMap((task) => {
    const path = `/connectors/${encodeURIComponent(card.name)}/tasks/${task.id}/restart`;
    const row = h(
      "tr",
      { "data-task": `${card.name}/${task.id}` },
      h("td", {}, `${task.id}`),
      h("td", { class: "state", "data-state": task.state }, task.state),
      h("td", { class: "worker" }, worker(task.worker_id)),
      h("td", { class: "generation" }, `${task.generation}`),
      h("td", { class: "fenced" }, `${task.fenced_commits}`),
      h(
        "td",
        { class: "trace" },
        task.trace ? h("details", {}, h("summary", {}, firstLine(task.trace)), h("pre", {}, task.trace)) : "",
      ),
      h(
        "td",
        {},
        h(
          "button",
          {
            "data-action": "restart-task",
            onclick: () => write("POST", path, `Restart task ${task.id} of ${card.name}`),
          },
          "Restart",
        ),
      ),
    );
    return [row];
  });
  replace(card.tasks, ...rows);
}

/** A worker id (its management address in Ferry's status) with the node it is. */
function worker(id) {
  if (!id) return "–";
  const member = view.cluster?.members.find((m) => m.api_addr === id || m.rest_addr === id);
  return member ? `node ${member.id} (${id})` : id;
}

function firstLine(text) {
  const line = text.split("\n")[0];
  return line.length > 120 ? `${line.slice(0, 117)}…` : line;
}

// ---- following the cluster

function follow() {
  const live = document.getElementById("live");
  const events = new EventSource("/ui/events");
  events.addEventListener("open", () => {
    live.textContent = "live";
    live.dataset.live = "live";
  });
  events.addEventListener("change", () => refresh());
  events.addEventListener("error", () => {
    live.textContent = "reconnecting";
    live.dataset.live = "reconnecting";
  });
}

follow();
refresh();
const tick = async () => {
  await readCluster();
  await scrape();
  setTimeout(tick, SCRAPE_SECONDS * 1000);
};
reading.then(tick);
