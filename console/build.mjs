// Builds the web console into crates/ferry-server/console/, which ferryd embeds: app.js (the
// script and uPlot, bundled and minified by esbuild), app.css, index.html, and SOURCES, the
// sha256 of every file the build read, which a unit test of ferry-server compares with the
// sources so that a change not rebuilt with `make console` fails `make test`.
import { createHash } from "node:crypto";
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = fileURLToPath(new URL(".", import.meta.url));
const out = join(here, "../crates/ferry-server/console");

await esbuild.build({
  entryPoints: [join(here, "src/main.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["chrome110", "firefox110", "safari16"],
  outdir: out,
  entryNames: "app",
  legalComments: "eof",
  logLevel: "warning",
});
copyFileSync(join(here, "src/index.html"), join(out, "index.html"));

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? files(path) : [path];
  });
}
const sources = ["build.mjs", "package.json", "package-lock.json"]
  .map((name) => join(here, name))
  .concat(files(join(here, "src")))
  .map((path) => relative(here, path).split("\\").join("/"))
  .sort();
const lines = sources.map((name) => {
  const digest = createHash("sha256").update(readFileSync(join(here, name))).digest("hex");
  return `${digest}  ${name}\n`;
});
writeFileSync(join(out, "SOURCES"), lines.join(""));
