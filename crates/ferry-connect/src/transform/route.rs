//! Transforms that change a record's topic: RegexRouter and TimestampRouter.

use crate::config::{non_empty, ConfigType};
use crate::datefmt::DatePattern;
use crate::error::{ConnectError, Result};

use super::{key, prop, Applied, ConnectRecord, Props, TransformClass, Transformation};

pub fn classes() -> Vec<TransformClass> {
    vec![
        TransformClass {
            class: "org.apache.kafka.connect.transforms.RegexRouter",
            config: || {
                vec![
                    key(
                        "regex",
                        ConfigType::String,
                        "Regular expression the whole topic must match.",
                    )
                    .required()
                    .validator(valid_regex),
                    key(
                        "replacement",
                        ConfigType::String,
                        "The new topic; $1, $2 name the groups.",
                    )
                    .required(),
                ]
            },
            build: RegexRouter::build,
        },
        TransformClass {
            class: "org.apache.kafka.connect.transforms.TimestampRouter",
            config: || {
                vec![
                    key(
                        "topic.format",
                        ConfigType::String,
                        "The new topic, from ${topic} and ${timestamp}.",
                    )
                    .default("${topic}-${timestamp}")
                    .validator(non_empty),
                    key(
                        "timestamp.format",
                        ConfigType::String,
                        "SimpleDateFormat pattern of ${timestamp}, in UTC.",
                    )
                    .default("yyyyMMdd")
                    .validator(valid_pattern),
                ]
            },
            build: TimestampRouter::build,
        },
    ]
}

fn valid_regex(value: &str) -> std::result::Result<(), String> {
    regex::Regex::new(value)
        .map(|_| ())
        .map_err(|e| format!("not a valid regular expression: {e}"))
}

fn valid_pattern(value: &str) -> std::result::Result<(), String> {
    DatePattern::parse(value).map(|_| ()).map_err(|e| e.message)
}

/// Java's replacement syntax (`$1`, `\$`) in the regex crate's (`${1}`, `$$`).
fn java_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// `RegexRouter`: a topic the regex matches as a whole becomes the replacement.
struct RegexRouter {
    regex: regex::Regex,
    replacement: String,
}

impl RegexRouter {
    fn build(props: &Props) -> Result<Box<dyn Transformation>> {
        let pattern = prop(props, "regex", "");
        // Java's Matcher.matches(): the whole topic.
        let regex = regex::Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| ConnectError::config("regex", e.to_string()))?;
        Ok(Box::new(RegexRouter {
            regex,
            replacement: java_replacement(prop(props, "replacement", "")),
        }))
    }
}

impl Transformation for RegexRouter {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        if self.regex.is_match(record.topic()) {
            let topic = self
                .regex
                .replace(record.topic(), self.replacement.as_str())
                .into_owned();
            record.set_topic(topic);
        }
        Ok(Applied::Keep)
    }
}

/// `TimestampRouter`: the topic becomes `topic.format` with the record's topic and its
/// timestamp in `timestamp.format`.
struct TimestampRouter {
    topic_format: String,
    timestamp_format: DatePattern,
}

impl TimestampRouter {
    fn build(props: &Props) -> Result<Box<dyn Transformation>> {
        Ok(Box::new(TimestampRouter {
            topic_format: prop(props, "topic.format", "${topic}-${timestamp}").to_string(),
            timestamp_format: DatePattern::parse(prop(props, "timestamp.format", "yyyyMMdd"))
                .map_err(|e| ConnectError::config("timestamp.format", e.message))?,
        }))
    }
}

impl Transformation for TimestampRouter {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let timestamp = record.timestamp().ok_or_else(|| {
            ConnectError::data(format!(
                "timestamp missing on a record of topic {}",
                record.topic()
            ))
        })?;
        let topic = self
            .topic_format
            .replace("${topic}", record.topic())
            .replace("${timestamp}", &self.timestamp_format.format(timestamp));
        record.set_topic(topic);
        Ok(Applied::Keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_replacements_become_the_regex_crates() {
        assert_eq!(java_replacement("$1"), "${1}");
        assert_eq!(java_replacement("x-$1a-$22"), "x-${1}a-${22}");
        assert_eq!(java_replacement(r"cost\$"), "cost$$");
        assert_eq!(java_replacement("plain"), "plain");
    }
}
