// Throughput from counters scraped now and then from every node: what each series gained
// since the last scrape, summed per connector, as Prometheus' increase() counts it (a series
// that went down restarted from zero: a task that moved or restarted).

export class Increases {
  constructor() {
    this.last = new Map();
  }

  /**
   * `series`: [{ key, connector, value }] of one scrape of every node; answers what each
   * connector's series gained since the previous call (a series seen first gains nothing).
   */
  observe(series) {
    const gained = new Map();
    const seen = new Map();
    for (const { key, connector, value } of series) {
      seen.set(key, value);
      const before = this.last.get(key);
      if (before === undefined) continue;
      const gain = value >= before ? value - before : value;
      gained.set(connector, (gained.get(connector) ?? 0) + gain);
    }
    this.last = seen;
    return gained;
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
