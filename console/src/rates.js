// Counters scraped now and then from every node, as Prometheus' increase() reads them: what
// each series grew since the last scrape, summed per connector; a series that went down
// started again from zero (its task restarted on the same node). A series seen first is a
// task's run found for the first time — when the page opened, or a task that moved or
// restarted since: its whole value is new to the page, but not growth over the last interval.

export class Increases {
  constructor() {
    this.last = new Map();
  }

  /**
   * `series`: [{ key, connector, value }] of one scrape; `kept(key)`: whether a series absent
   * from it is still there, on a node that did not answer this time (so that its value is not
   * counted again when the node answers again). Answers per connector what the known series
   * grew (`grown`) and the values of the series seen first (`found`).
   */
  observe(series, kept = () => false) {
    const grown = new Map();
    const found = new Map();
    const add = (map, connector, value) => map.set(connector, (map.get(connector) ?? 0) + value);
    const seen = new Map();
    for (const { key, connector, value } of series) {
      seen.set(key, value);
      const before = this.last.get(key);
      if (before === undefined) add(found, connector, value);
      else add(grown, connector, value >= before ? value - before : value);
    }
    for (const [key, value] of this.last) {
      if (!seen.has(key) && kept(key)) seen.set(key, value);
    }
    this.last = seen;
    return { grown, found };
  }
}

/** Running totals per connector of counters whose series come and go (runs of tasks). */
export class Totals {
  constructor() {
    this.increases = new Increases();
    this.totals = new Map();
  }

  /** Add one scrape (as `Increases.observe` takes it); answers the totals. */
  observe(series, kept) {
    const { grown, found } = this.increases.observe(series, kept);
    for (const map of [grown, found]) {
      for (const [connector, value] of map) {
        this.totals.set(connector, (this.totals.get(connector) ?? 0) + value);
      }
    }
    return this.totals;
  }
}

/** Points of the last `seconds`, per connector, for the charts. */
export class History {
  constructor(seconds) {
    this.seconds = seconds;
    this.byConnector = new Map();
  }

  add(connector, time, point) {
    let points = this.byConnector.get(connector);
    if (!points) {
      points = [];
      this.byConnector.set(connector, points);
    }
    points.push({ time, ...point });
    while (points.length > 0 && points[0].time < time - this.seconds) points.shift();
  }

  of(connector) {
    return this.byConnector.get(connector) ?? [];
  }
}
