//! Where a record's file goes: the directory under `<topics.dir>/<topic>/` named the way
//! Confluent's partitioners name it (DefaultPartitioner `partition=N`, FieldPartitioner
//! `field=value`, TimeBasedPartitioner and its Hourly and Daily forms by `path.format`), and the
//! record time that time-based partitioning and `rotate.interval.ms` use. Pure: the wall clock
//! is passed in.

use std::sync::Arc;

use ferry_connect::datefmt::DatePattern;
use ferry_connect::task::Props;
use ferry_connect::{ConnectError, Result, SinkRecord, Value};
use jiff::tz::TimeZone;

/// The partitioner classes, by their simple names; both Confluent packages are accepted.
const PACKAGES: [&str; 2] = [
    "io.confluent.connect.storage.partitioner.",
    "io.confluent.connect.hdfs.partitioner.",
];

/// How a record's time is found (`timestamp.extractor`).
#[derive(Clone, Debug, PartialEq)]
pub enum Extractor {
    /// The worker's clock when the record is written (Confluent's default).
    Wallclock,
    /// The Kafka record's timestamp.
    Record,
    /// A field of the value (`timestamp.field`, dots for nested fields): epoch milliseconds, a
    /// Connect Timestamp, or ISO-8601 text.
    RecordField(Vec<String>),
}

/// Time-based partitioning: records fall into buckets of `duration_ms` in `zone`, named by
/// `path.format`.
#[derive(Clone, Debug)]
pub struct TimeBased {
    /// `partition.duration.ms`: the length of a bucket.
    pub duration_ms: i64,
    pattern: DatePattern,
    zone: TimeZone,
    /// Where a record's time comes from (`timestamp.extractor`).
    pub extractor: Extractor,
}

/// How a record's directory is chosen (`partitioner.class`).
#[derive(Clone, Debug)]
pub enum Partitioner {
    /// `partition=<kafka partition>`.
    Default,
    /// The values of `partition.field.name`'s fields, `field=value/…`.
    Field(Arc<[String]>),
    /// Time buckets (TimeBased, Hourly, Daily).
    Time(TimeBased),
}

/// A property of a config, or "" when absent.
fn prop<'a>(props: &'a Props, key: &str) -> &'a str {
    props.get(key).map_or("", |v| v.trim())
}

fn config_error(key: &str, message: impl std::fmt::Display) -> ConnectError {
    ConnectError::config(key, message.to_string())
}

/// The time zone named by `timezone`: an IANA name (`Asia/Seoul`), `UTC`, or a fixed offset
/// (`+09:00`). Empty means UTC (Confluent's connector refuses an empty one; validation warns).
pub fn time_zone(name: &str) -> Result<TimeZone> {
    if name.is_empty() || name.eq_ignore_ascii_case("UTC") || name == "Z" {
        return Ok(TimeZone::UTC);
    }
    if let Some(sign @ (b'+' | b'-')) = name.as_bytes().first().copied() {
        let digits: String = name[1..].chars().filter(|c| *c != ':').collect();
        let parsed = match digits.len() {
            2 => digits.parse::<i32>().ok().map(|h| h * 3600),
            4 => match (digits[..2].parse::<i32>(), digits[2..].parse::<i32>()) {
                (Ok(h), Ok(m)) if m < 60 => Some(h * 3600 + m * 60),
                _ => None,
            },
            _ => None,
        };
        let seconds = parsed.filter(|s| *s <= 18 * 3600).ok_or_else(|| {
            config_error(
                "timezone",
                format!("{name:?} is not an offset such as +09:00"),
            )
        })?;
        let seconds = if sign == b'-' { -seconds } else { seconds };
        let offset = jiff::tz::Offset::from_seconds(seconds)
            .map_err(|e| config_error("timezone", format!("{name:?}: {e}")))?;
        return Ok(TimeZone::fixed(offset));
    }
    TimeZone::get(name).map_err(|_| {
        config_error(
            "timezone",
            format!("unknown time zone {name:?}; use a name such as UTC or Asia/Seoul, or an offset such as +09:00"),
        )
    })
}

impl Partitioner {
    /// The partitioner a connector config names (`partitioner.class` and its properties).
    pub fn from_config(props: &Props) -> Result<Partitioner> {
        let class = match prop(props, "partitioner.class") {
            "" => "DefaultPartitioner",
            class => class,
        };
        let simple = PACKAGES
            .iter()
            .find_map(|p| class.strip_prefix(p))
            .unwrap_or(class);
        let delim = match props.get("directory.delim") {
            Some(d) if !d.is_empty() => d.as_str(),
            _ => "/",
        };
        match simple {
            "DefaultPartitioner" => Ok(Partitioner::Default),
            "FieldPartitioner" => {
                let fields: Vec<String> = prop(props, "partition.field.name")
                    .split(',')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .map(str::to_string)
                    .collect();
                if fields.is_empty() {
                    return Err(config_error(
                        "partition.field.name",
                        "FieldPartitioner needs at least one field",
                    ));
                }
                Ok(Partitioner::Field(fields.into()))
            }
            "TimeBasedPartitioner" => {
                let duration = prop(props, "partition.duration.ms");
                let duration_ms: i64 = duration.parse().map_err(|_| {
                    config_error(
                        "partition.duration.ms",
                        format!("TimeBasedPartitioner needs a duration in ms, got {duration:?}"),
                    )
                })?;
                if duration_ms <= 0 {
                    return Err(config_error(
                        "partition.duration.ms",
                        format!("must be positive for TimeBasedPartitioner, got {duration_ms}"),
                    ));
                }
                let mut format = prop(props, "path.format");
                if format.is_empty() || format == delim {
                    return Err(config_error(
                        "path.format",
                        "TimeBasedPartitioner needs a path format such as 'year'=YYYY/'month'=MM",
                    ));
                }
                if let Some(trimmed) = format.strip_suffix(delim) {
                    format = trimmed;
                }
                Self::time(props, duration_ms, format)
            }
            "HourlyPartitioner" => {
                let format = ["'year'=YYYY", "'month'=MM", "'day'=dd", "'hour'=HH"].join(delim);
                Self::time(props, 3_600_000, &format)
            }
            "DailyPartitioner" => {
                let format = ["'year'=YYYY", "'month'=MM", "'day'=dd"].join(delim);
                Self::time(props, 86_400_000, &format)
            }
            _ => Err(config_error(
                "partitioner.class",
                format!(
                    "{class:?} is not supported; use DefaultPartitioner, FieldPartitioner, \
                     TimeBasedPartitioner, HourlyPartitioner or DailyPartitioner"
                ),
            )),
        }
    }

    fn time(props: &Props, duration_ms: i64, format: &str) -> Result<Partitioner> {
        let pattern = DatePattern::parse(format).map_err(|e| config_error("path.format", e))?;
        let zone = time_zone(prop(props, "timezone"))?;
        let extractor = match prop(props, "timestamp.extractor") {
            "" | "Wallclock" => Extractor::Wallclock,
            "Record" => Extractor::Record,
            "RecordField" => {
                let field = match prop(props, "timestamp.field") {
                    "" => "timestamp",
                    f => f,
                };
                Extractor::RecordField(field.split('.').map(str::to_string).collect())
            }
            other => {
                return Err(config_error(
                    "timestamp.extractor",
                    format!("{other:?} is not supported; use Wallclock, Record or RecordField"),
                ))
            }
        };
        Ok(Partitioner::Time(TimeBased {
            duration_ms,
            pattern,
            zone,
            extractor,
        }))
    }

    /// The directory (relative to the topic's) of a record; `now_ms` is the wall clock. A
    /// record the partitioner cannot place is a data error naming the record.
    pub fn encode(&self, record: &SinkRecord, now_ms: i64) -> Result<String> {
        match self {
            Partitioner::Default => Ok(format!("partition={}", record.partition)),
            Partitioner::Field(fields) => {
                let Value::Struct(s) = &record.value else {
                    return Err(bad(
                        record,
                        format!(
                            "FieldPartitioner needs a struct value, got {}",
                            record.value.kind()
                        ),
                    ));
                };
                let mut parts = Vec::with_capacity(fields.len());
                for field in fields.iter() {
                    let text = match s.get(field) {
                        Some(Value::Int8(v)) => v.to_string(),
                        Some(Value::Int16(v)) => v.to_string(),
                        Some(Value::Int32(v)) => v.to_string(),
                        Some(Value::Int64(v)) => v.to_string(),
                        Some(Value::String(v)) => v.clone(),
                        Some(Value::Boolean(v)) => v.to_string(),
                        Some(other) => {
                            return Err(bad(
                                record,
                                format!("partition field {field:?} is {}; only integers, strings and booleans name a partition", other.kind()),
                            ))
                        }
                        None => return Err(bad(record, format!("partition field {field:?} is not in the value"))),
                    };
                    parts.push(format!("{field}={text}"));
                }
                Ok(parts.join("/"))
            }
            Partitioner::Time(t) => {
                let time = t.record_time(record, now_ms)?;
                Ok(t.bucket_name(time))
            }
        }
    }

    /// The record's time as `rotate.interval.ms` sees it: the time-based partitioner's, else
    /// the wall clock.
    pub fn record_time(&self, record: &SinkRecord, now_ms: i64) -> Result<i64> {
        match self {
            Partitioner::Time(t) => t.record_time(record, now_ms),
            _ => Ok(now_ms),
        }
    }

    /// The time zone of time-based partitioning (UTC for the others), which
    /// `rotate.schedule.interval.ms` aligns to.
    pub fn zone(&self) -> TimeZone {
        match self {
            Partitioner::Time(t) => t.zone.clone(),
            _ => TimeZone::UTC,
        }
    }
}

fn bad(record: &SinkRecord, message: String) -> ConnectError {
    ConnectError::data(format!(
        "cannot partition the record at {}-{} offset {}: {message}",
        record.topic, record.partition, record.offset
    ))
}

/// Milliseconds `zone` is ahead of UTC at `millis`.
pub fn offset_ms(zone: &TimeZone, millis: i64) -> i64 {
    match jiff::Timestamp::from_millisecond(millis) {
        Ok(ts) => i64::from(zone.to_offset(ts).seconds()) * 1000,
        Err(_) => 0,
    }
}

impl TimeBased {
    /// The record's time by the configured extractor.
    pub fn record_time(&self, record: &SinkRecord, now_ms: i64) -> Result<i64> {
        match &self.extractor {
            Extractor::Wallclock => Ok(now_ms),
            Extractor::Record => record.timestamp.ok_or_else(|| {
                bad(
                    record,
                    "the record has no timestamp (timestamp.extractor=Record)".into(),
                )
            }),
            Extractor::RecordField(path) => field_time(&record.value, path).map_err(|why| {
                bad(
                    record,
                    format!("timestamp.field {:?}: {why}", path.join(".")),
                )
            }),
        }
    }

    /// The directory of the bucket holding `time`: the start of its bucket in the zone,
    /// formatted by `path.format`.
    pub fn bucket_name(&self, time: i64) -> String {
        let local = time + offset_ms(&self.zone, time);
        let floored = local.div_euclid(self.duration_ms) * self.duration_ms;
        // Back to an instant, with the offset in force at the bucket's start.
        let start = floored - offset_ms(&self.zone, floored - offset_ms(&self.zone, time));
        let offset = offset_ms(&self.zone, start);
        let name = jiff::Timestamp::from_millisecond(start)
            .map(|ts| self.zone.to_offset_info(ts).abbreviation().to_string())
            .unwrap_or_default();
        self.pattern.format_in(start, offset, &name)
    }
}

/// A timestamp field of a struct or map value, by its path.
fn field_time(value: &Value, path: &[String]) -> std::result::Result<i64, String> {
    let mut current = value;
    for name in path {
        current = match current {
            Value::Struct(s) => s.get(name).ok_or("not in the value")?,
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Value::String(s) if s == name))
                .map(|(_, v)| v)
                .ok_or("not in the value")?,
            Value::Null => return Err("not in the value (a parent is null)".into()),
            other => return Err(format!("a parent is {}, not a struct or map", other.kind())),
        };
    }
    match current {
        Value::Int32(v) => Ok(i64::from(*v)),
        Value::Int64(v) | Value::Timestamp(v) => Ok(*v),
        Value::String(s) => parse_iso(s).ok_or_else(|| format!("{s:?} is not an ISO-8601 time")),
        Value::Null => Err("null".into()),
        other => Err(format!(
            "{} is not a time (use epoch ms, a Timestamp or ISO-8601 text)",
            other.kind()
        )),
    }
}

/// ISO-8601 text: an instant with its offset, or a date / date-time without one (in UTC).
fn parse_iso(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond());
    }
    let civil = text.parse::<jiff::civil::DateTime>().ok().or_else(|| {
        text.parse::<jiff::civil::Date>()
            .ok()
            .map(|d| d.to_datetime(jiff::civil::Time::midnight()))
    })?;
    civil
        .to_zoned(TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp().as_millisecond())
}

#[cfg(test)]
mod tests;
