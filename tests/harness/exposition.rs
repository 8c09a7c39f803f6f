//! Reading the text a Prometheus scrape returns (OpenMetrics 1.0 or the older text format):
//! its samples with their labels and values, and the type of the family each belongs to.

use std::collections::BTreeMap;

/// One sample line: `name{label="value",…} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A scrape's samples and the types its `# TYPE` lines declare (family name → type).
#[derive(Clone, Debug, Default)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    pub types: BTreeMap<String, String>,
}

/// The suffixes a sample of a family of this type may add to the family's name.
fn suffixes(kind: &str) -> &'static [&'static str] {
    match kind {
        "counter" => &["_total", "_created", ""],
        "info" => &["_info"],
        "histogram" | "gaugehistogram" => {
            &["_bucket", "_count", "_sum", "_created", "_gcount", "_gsum"]
        }
        "summary" => &["", "_count", "_sum", "_created"],
        _ => &[""],
    }
}

impl Exposition {
    /// Parse a scrape; a line that is neither a comment nor a sample is an error naming it.
    pub fn parse(text: &str) -> Result<Exposition, String> {
        let mut parsed = Exposition::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix('#') {
                let mut words = comment.split_whitespace();
                if words.next() == Some("TYPE") {
                    if let (Some(family), Some(kind)) = (words.next(), words.next()) {
                        parsed.types.insert(family.to_string(), kind.to_string());
                    }
                }
                continue;
            }
            let sample =
                sample(line).ok_or_else(|| format!("line {}: not a sample: {line}", n + 1))?;
            parsed.samples.push(sample);
        }
        Ok(parsed)
    }

    /// The type of the family `sample` (a sample's name) belongs to: the longest declared
    /// family its name extends by a suffix of that family's type; `untyped` if none.
    pub fn type_of(&self, sample: &str) -> &str {
        self.types
            .iter()
            .filter(|(family, kind)| {
                sample
                    .strip_prefix(family.as_str())
                    .is_some_and(|rest| suffixes(kind).contains(&rest))
            })
            .max_by_key(|(family, _)| family.len())
            .map_or("untyped", |(_, kind)| kind.as_str())
    }

    /// The values of the samples named `name` whose labels include every one of `labels`.
    pub fn values<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = f64> + 'a {
        self.samples
            .iter()
            .filter(move |s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).is_some_and(|have| have == v))
            })
            .map(|s| s.value)
    }

    /// The value of the first sample named `name` whose labels include every one of `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.values(name, labels).next()
    }
}

/// `name{labels} value [timestamp]`.
fn sample(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => {
                    rest = &inner[i + 1..];
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                other => key.push(other),
            }
        }
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_carry_their_labels_values_and_family_types() {
        let text = "# TYPE a counter\n# HELP a x\na_total{c=\"x,\\\"y\\\"\",t=\"0\"} 3.0\n\
                    # TYPE a_b gauge\na_b NaN\n# TYPE i info\ni_info{v=\"1\"} 1\n# EOF\n";
        let parsed = Exposition::parse(text).expect("parses");
        assert_eq!(parsed.samples.len(), 3);
        assert_eq!(parsed.samples[0].labels["c"], "x,\"y\"");
        assert_eq!(parsed.value("a_total", &[("t", "0")]), Some(3.0));
        assert!(parsed.value("a_b", &[]).is_some_and(f64::is_nan));
        assert_eq!(parsed.type_of("a_total"), "counter");
        assert_eq!(parsed.type_of("a_b"), "gauge");
        assert_eq!(parsed.type_of("i_info"), "info");
        assert_eq!(parsed.type_of("zz"), "untyped");
        assert!(Exposition::parse("a{b=1} 2").is_err());
    }
}
