//! The docs check (docs/development.md#the-docs-check): README.md and `docs/` may not point at
//! what does not exist. Offline and fast: it reads files only.
//!
//! - every relative link resolves to a file, and its `#anchor` to a heading of that file;
//! - every `docs/<file>.md#<anchor>` cited in the code, the Makefile and the scripts exists;
//! - every path (`crates/…`, `tests/…`) and every Rust name rooted in one of Ferry's crates
//!   (`ferry_worker::sink::SinkLoop`) named in the docs exists in the tree, and so does every
//!   `Type::member` of a type the tree declares; in architecture.md's map of Kafka Connect's
//!   classes, every name in Ferry's column must resolve, whatever its form.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use regex::Regex;

/// The section of architecture.md that maps Kafka Connect's classes to Ferry's code.
const MAP_SECTION: &str = "kafka-connects-classes-and-their-counterparts";
/// Top-level directories a path named in the docs may start with.
const TREE_ROOTS: &[&str] = &[
    "crates/",
    "tests/",
    "proto/",
    "scripts/",
    "docs/",
    "console/",
    "examples/",
];

/// GitHub's anchor of a heading: lower case, spaces as hyphens, other punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// What the check needs of one Markdown file.
#[derive(Default)]
struct Markdown {
    /// Its headings' anchors (a repeated heading gets `-1`, `-2`, … as on GitHub).
    anchors: BTreeSet<String>,
    /// Its link destinations, with the line each is on.
    links: Vec<(String, usize)>,
    /// Its inline code spans, with their line.
    code: Vec<(String, usize)>,
    /// The code spans of the second column of the map's tables, with their line.
    map: Vec<(String, usize)>,
}

fn markdown(text: &str) -> Markdown {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut doc = Markdown::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    let mut section = String::new();
    let mut cell = 0usize;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                let anchor = if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                *n += 1;
                section = base;
                doc.anchors.insert(anchor);
            }
            Event::Text(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Code(c) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&c);
                }
                let line = line_of(range.start);
                if section == MAP_SECTION && cell == 2 {
                    doc.map.push((c.to_string(), line));
                }
                doc.code.push((c.to_string(), line));
            }
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => {
                doc.links.push((dest_url.to_string(), line_of(range.start)));
            }
            Event::Start(Tag::TableRow) | Event::Start(Tag::TableHead) => cell = 0,
            Event::Start(Tag::TableCell) => cell += 1,
            Event::End(TagEnd::TableRow) | Event::End(TagEnd::TableHead) => cell = 0,
            _ => {}
        }
    }
    doc
}

/// The repository being checked: its root and what it holds.
struct Tree {
    root: PathBuf,
    /// Ferry's crates by the name code uses (`ferry_worker`, `ferryd`) → their `src`.
    crates: BTreeMap<String, PathBuf>,
    /// Every Rust file under `crates/` and `tests/`, with its text.
    rust: Vec<(PathBuf, String)>,
}

impl Tree {
    fn open(root: &Path) -> Tree {
        let mut crates = BTreeMap::new();
        for dir in entries(&root.join("crates")) {
            let Ok(manifest) = fs::read_to_string(dir.join("Cargo.toml")) else {
                continue;
            };
            let manifest: toml::Value = match toml::from_str(&manifest) {
                Ok(m) => m,
                Err(e) => panic!("{}: {e}", dir.join("Cargo.toml").display()),
            };
            let mut names = Vec::new();
            if let Some(name) = manifest
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
            {
                names.push(name.replace('-', "_"));
            }
            for bin in manifest
                .get("bin")
                .and_then(|b| b.as_array())
                .into_iter()
                .flatten()
            {
                if let Some(name) = bin.get("name").and_then(|n| n.as_str()) {
                    names.push(name.replace('-', "_"));
                }
            }
            for name in names {
                crates.insert(name, dir.join("src"));
            }
        }
        let mut rust = Vec::new();
        for top in ["crates", "tests"] {
            for file in files(&root.join(top)) {
                if file.extension().is_some_and(|e| e == "rs") {
                    let text = fs::read_to_string(&file).unwrap_or_default();
                    rust.push((file, text));
                }
            }
        }
        Tree {
            root: root.to_path_buf(),
            crates,
            rust,
        }
    }

    /// Whether `name` is declared (fn, struct, enum, trait, type, const, static, mod, macro) in
    /// one of `files`.
    fn declares<'a>(&'a self, name: &str, mut within: impl FnMut(&Path) -> bool) -> Vec<&'a str> {
        let declared = Regex::new(&format!(
            r"\b(fn|struct|enum|trait|type|const|static|mod|union)\s+{0}\b|macro_rules!\s*{0}\b",
            regex::escape(name)
        ))
        .expect("a valid pattern");
        self.rust
            .iter()
            .filter(|(path, text)| within(path) && declared.is_match(text))
            .map(|(_, text)| text.as_str())
            .collect()
    }

    /// Why `name` (a code span of the docs) does not resolve, if it does not; `strict`: the
    /// name must be one of the forms checked.
    fn missing(&self, name: &str, strict: bool) -> Option<String> {
        let name = name.trim().trim_end_matches("()");
        if TREE_ROOTS.iter().any(|r| name.starts_with(r)) {
            // A pattern (`docs/<file>.md`, `…`) names no one path.
            if name.contains(['<', '…', '*', '{']) {
                return None;
            }
            let path = name.split_whitespace().next().unwrap_or(name);
            let path = path.split_once('#').map_or(path, |(p, _)| p);
            return (!self.root.join(path).exists()).then(|| format!("no path {path}"));
        }
        let segments: Vec<&str> = name.split("::").collect();
        if segments.len() >= 2 && segments.iter().all(|s| is_ident(s)) {
            if let Some(src) = self.crates.get(segments[0]) {
                return self.missing_item(src, &segments[1..], name);
            }
            if segments.len() == 2 && segments[0].starts_with(char::is_uppercase) {
                return self.missing_member(segments[0], segments[1], strict);
            }
        }
        strict.then(|| format!("`{name}` is not a path, a Rust name of Ferry's or a Type::member"))
    }

    fn missing_item(&self, src: &Path, path: &[&str], name: &str) -> Option<String> {
        let mut dir = src.to_path_buf();
        for (i, segment) in path.iter().enumerate() {
            let file = dir.join(format!("{segment}.rs"));
            let module = dir.join(segment).join("mod.rs");
            if file.exists() || module.exists() {
                dir = dir.join(segment);
                continue;
            }
            let last = i + 1 == path.len();
            if !last {
                return Some(format!(
                    "`{name}`: no module {segment} in {}",
                    self.shown(&dir)
                ));
            }
            // An item: declared in the module's file or in a file below it.
            let parent = dir.clone();
            let module_file = if dir == src {
                None
            } else {
                Some(dir.with_extension("rs"))
            };
            let found = self.declares(segment, |p| {
                p.starts_with(&parent) || Some(p) == module_file.as_deref()
            });
            return found.is_empty().then(|| {
                format!(
                    "`{name}`: {segment} is declared nowhere in {}",
                    self.shown(&dir)
                )
            });
        }
        None
    }

    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    fn missing_member(&self, ty: &str, member: &str, strict: bool) -> Option<String> {
        // The files that declare the type or implement something for it.
        let declares_type = Regex::new(&format!(
            r"\b(struct|enum|trait|type)\s+{0}\b|\bimpl\b[^{{;]*\b{0}\b[^{{;]*\{{",
            regex::escape(ty)
        ))
        .expect("a valid pattern");
        let word = Regex::new(&format!(r"\b{}\b", regex::escape(member))).expect("a valid pattern");
        let files: Vec<&String> = self
            .rust
            .iter()
            .filter(|(_, t)| declares_type.is_match(t))
            .map(|(_, t)| t)
            .collect();
        if files.is_empty() {
            return strict.then(|| format!("`{ty}::{member}`: no type {ty} in the tree"));
        }
        (!files.iter().any(|t| word.is_match(t)))
            .then(|| format!("`{ty}::{member}`: {ty} has no {member}"))
    }
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    all.sort();
    all
}

/// Every file below `dir`, build output and dependencies left out.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in entries(dir) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(name, "target" | "node_modules" | ".git") {
                out.extend(files(&path));
            }
        } else {
            out.push(path);
        }
    }
    out
}

/// Every problem of the docs of the repository at `root`, each naming its file and line.
fn check(root: &Path) -> Vec<String> {
    let tree = Tree::open(root);
    let mut pages: Vec<PathBuf> = vec![root.join("README.md")];
    pages.extend(
        entries(&root.join("docs"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    let parsed: BTreeMap<PathBuf, Markdown> = pages
        .iter()
        .filter_map(|p| Some((p.clone(), markdown(&fs::read_to_string(p).ok()?))))
        .collect();
    let anchors_of = |file: &Path| -> Option<BTreeSet<String>> {
        parsed
            .get(file)
            .map(|m| m.anchors.clone())
            .or_else(|| Some(markdown(&fs::read_to_string(file).ok()?).anchors))
    };
    let shown = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let mut problems = Vec::new();
    for (page, doc) in &parsed {
        for (dest, line) in &doc.links {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match dest.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (dest.as_str(), None),
            };
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap_or(root).join(file)
            };
            if !target.exists() {
                problems.push(format!(
                    "{}:{line}: link to {dest}: no file {file}",
                    shown(page)
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                if target.extension().is_some_and(|e| e == "md")
                    && !anchors_of(&target).is_some_and(|a| a.contains(anchor))
                {
                    problems.push(format!(
                        "{}:{line}: link to {dest}: {} has no heading #{anchor}",
                        shown(page),
                        shown(&target)
                    ));
                }
            }
        }
        let map: BTreeSet<(String, usize)> = doc.map.iter().cloned().collect();
        for (name, line) in &doc.code {
            let strict = map.contains(&(name.clone(), *line));
            if let Some(why) = tree.missing(name, strict) {
                problems.push(format!("{}:{line}: {why}", shown(page)));
            }
        }
    }
    let cited =
        Regex::new(r"docs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?").expect("a valid pattern");
    let mut citing: Vec<(PathBuf, String)> = tree.rust.clone();
    for other in [root.join("Makefile"), root.join("cluster.toml.example")]
        .into_iter()
        .chain(files(&root.join("scripts")))
    {
        if let Ok(text) = fs::read_to_string(&other) {
            citing.push((other, text));
        }
    }
    // This file's fixtures cite what does not exist, on purpose.
    for (file, text) in citing.iter().filter(|(f, _)| !f.ends_with(file!())) {
        for (n, line) in text.lines().enumerate() {
            for c in cited.captures_iter(line) {
                let target = root.join("docs").join(&c[1]);
                let at = format!("{}:{}", shown(file), n + 1);
                match (anchors_of(&target), c.get(2)) {
                    (None, _) => problems.push(format!("{at}: cites {}: no such file", &c[0])),
                    (Some(anchors), Some(a)) if !anchors.contains(a.as_str()) => {
                        problems.push(format!(
                            "{at}: cites {}: docs/{} has no heading #{}",
                            &c[0],
                            &c[1],
                            a.as_str()
                        ))
                    }
                    _ => {}
                }
            }
        }
    }
    problems
}

#[test]
fn every_link_anchor_citation_and_named_module_of_the_docs_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let problems = check(&root);
    assert!(
        problems.is_empty(),
        "the docs point at what does not exist:\n{}",
        problems.join("\n")
    );
}

/// A small repository with docs, a crate and a test, as the fixtures below change it.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let put = |path: &str, text: &str| {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        fs::write(path, text).expect("a file");
    };
    put(
        "README.md",
        "# Demo\n\nSee [the design](docs/design.md#the-rule).\n",
    );
    put(
        "docs/design.md",
        "# Design\n\n## The rule\n\nText.\n\n## Kafka Connect's classes and their counterparts\n\n\
         | Kafka Connect | Ferry |\n|---|---|\n| `Worker` | `ferry_demo::runtime::Runtime`, `crates/ferry-demo/src/runtime.rs` |\n",
    );
    put(
        "crates/ferry-demo/Cargo.toml",
        "[package]\nname = \"ferry-demo\"\n",
    );
    put(
        "crates/ferry-demo/src/lib.rs",
        "//! Demo (docs/design.md#the-rule).\npub mod runtime;\n",
    );
    put("crates/ferry-demo/src/runtime.rs", "pub struct Runtime;\n");
    dir
}

#[test]
fn the_fixture_passes_and_each_kind_of_break_is_named() {
    let repo = fixture();
    let root = repo.path();
    assert_eq!(check(root), Vec::<String>::new());

    // A broken link: its page, line and target.
    fs::write(
        root.join("README.md"),
        "# Demo\n\nSee [the design](docs/designs.md).\n",
    )
    .expect("write");
    assert_eq!(
        check(root),
        vec!["README.md:3: link to docs/designs.md: no file docs/designs.md"]
    );
    fs::write(
        root.join("README.md"),
        "# Demo\n\nSee [the design](docs/design.md#the-rules).\n",
    )
    .expect("write");
    assert_eq!(
        check(root),
        vec!["README.md:3: link to docs/design.md#the-rules: docs/design.md has no heading #the-rules"]
    );
    fs::write(root.join("README.md"), "# Demo\n").expect("write");

    // An anchor cited from code that is not there.
    fs::write(
        root.join("crates/ferry-demo/src/lib.rs"),
        "//! Demo (docs/design.md#the-rules).\npub mod runtime;\n",
    )
    .expect("write");
    assert_eq!(
        check(root),
        vec!["crates/ferry-demo/src/lib.rs:1: cites docs/design.md#the-rules: docs/design.md has no heading #the-rules"]
    );
    fs::write(
        root.join("crates/ferry-demo/src/lib.rs"),
        "pub mod runtime;\n",
    )
    .expect("write");

    // A module renamed under the map.
    fs::rename(
        root.join("crates/ferry-demo/src/runtime.rs"),
        root.join("crates/ferry-demo/src/worker.rs"),
    )
    .expect("rename");
    fs::write(
        root.join("crates/ferry-demo/src/lib.rs"),
        "pub mod worker;\n",
    )
    .expect("write");
    let problems = check(root);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert_eq!(
        problems[0],
        "docs/design.md:11: `ferry_demo::runtime::Runtime`: no module runtime in crates/ferry-demo/src"
    );
    assert_eq!(
        problems[1],
        "docs/design.md:11: no path crates/ferry-demo/src/runtime.rs"
    );
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        slug("Kafka Connect's classes and their counterparts"),
        MAP_SECTION
    );
    assert_eq!(
        slug("Errors: one retry layer, nothing dropped"),
        "errors-one-retry-layer-nothing-dropped"
    );
    assert_eq!(
        slug("The control plane at 10,000 tasks"),
        "the-control-plane-at-10000-tasks"
    );
    let doc = markdown("# A\n## `cluster.toml`\n## Same\n## Same\n");
    assert!(doc.anchors.contains("clustertoml"));
    assert!(doc.anchors.contains("same") && doc.anchors.contains("same-1"));
}
