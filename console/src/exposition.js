// Reads Prometheus' text exposition (and OpenMetrics, which the nodes write): one sample per
// line, `name{label="value",...} value`, comments and blank lines skipped.

/** The samples of `text`, as { name, labels, value }. */
export function parseExposition(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const sample = parseLine(line);
    if (sample) samples.push(sample);
  }
  return samples;
}

function parseLine(line) {
  const brace = line.indexOf("{");
  const space = line.indexOf(" ");
  const labels = {};
  let rest;
  let name;
  if (brace !== -1 && (space === -1 || brace < space)) {
    name = line.slice(0, brace);
    let i = brace + 1;
    while (i < line.length && line[i] !== "}") {
      const eq = line.indexOf("=", i);
      if (eq === -1 || line[eq + 1] !== '"') return null;
      const key = line.slice(i, eq).trim();
      let value = "";
      let j = eq + 2;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === "\\" && j + 1 < line.length) {
          j++;
          value += line[j] === "n" ? "\n" : line[j];
        } else {
          value += line[j];
        }
      }
      labels[key] = value;
      i = j + 1;
      if (line[i] === ",") i++;
    }
    rest = line.slice(i + 1).trim();
  } else {
    if (space === -1) return null;
    name = line.slice(0, space);
    rest = line.slice(space + 1).trim();
  }
  const value = Number(rest.split(" ")[0]);
  return Number.isNaN(value) ? null : { name, labels, value };
}
