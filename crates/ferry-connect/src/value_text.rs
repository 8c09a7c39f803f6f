//! Kafka Connect's `Values`: any value as text, and text parsed back into a typed value with
//! an inferred schema (booleans, the smallest integer type that holds a number, floats,
//! ISO-8601 dates, times and timestamps, arrays and maps, else the text itself). The
//! SimpleHeaderConverter and InsertHeader use it.

use std::sync::Arc;

use base64::Engine;

use crate::converter::json::{java_double, java_float};
use crate::data::{Schema, SchemaAndValue, SchemaType, Value};
use crate::datefmt::DatePattern;
use crate::logical::{
    date_schema, days_from_civil, time_schema, timestamp_schema, Decimal, MILLIS_PER_DAY,
};

/// A value as Kafka Connect's `Values.convertToString` writes it.
pub fn to_text(value: &Value) -> String {
    let mut out = String::new();
    append(&mut out, value, false);
    out
}

fn append(out: &mut String, value: &Value, embedded: bool) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Int8(v) => out.push_str(&v.to_string()),
        Value::Int16(v) => out.push_str(&v.to_string()),
        Value::Int32(v) => out.push_str(&v.to_string()),
        Value::Int64(v) => out.push_str(&v.to_string()),
        Value::Float32(v) => out.push_str(&java_float(*v)),
        Value::Float64(v) => out.push_str(&java_double(*v)),
        Value::Boolean(v) => out.push_str(&v.to_string()),
        Value::Decimal(d) => out.push_str(&d.to_string()),
        Value::String(s) if embedded => {
            out.push('"');
            out.push_str(&s.replace('\\', "\\\\").replace('"', "\\\""));
            out.push('"');
        }
        Value::String(s) => out.push_str(s),
        Value::Bytes(b) => {
            let text = base64::engine::general_purpose::STANDARD.encode(b);
            if embedded {
                out.push('"');
                out.push_str(&text);
                out.push('"');
            } else {
                out.push_str(&text);
            }
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, item, true);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, k, true);
                out.push(':');
                append(out, v, true);
            }
            out.push('}');
        }
        Value::Struct(s) => {
            out.push('{');
            for (i, f) in s.schema.fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, &Value::String(f.name.clone()), true);
                out.push(':');
                append(out, s.get(&f.name).unwrap_or(&Value::Null), true);
            }
            out.push('}');
        }
        Value::Date(days) => out.push_str(&date_text(i64::from(*days) * MILLIS_PER_DAY)),
        Value::Time(ms) => out.push_str(&date_text(i64::from(*ms))),
        Value::Timestamp(ms) => out.push_str(&date_text(*ms)),
    }
}

/// `Values.dateFormatFor`: a time within the first day, a date at midnight, else a timestamp.
fn date_text(millis: i64) -> String {
    let pattern = if (0..MILLIS_PER_DAY).contains(&millis) {
        "HH:mm:ss.SSS'Z'"
    } else if millis % MILLIS_PER_DAY == 0 {
        "yyyy-MM-dd"
    } else {
        "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    };
    DatePattern::parse(pattern)
        .map(|p| p.format(millis))
        .unwrap_or_default()
}

/// Text parsed as Kafka Connect's `Values.parseString` does; what is nothing else is a string.
pub fn parse_text(text: &str) -> SchemaAndValue {
    let trimmed = text.trim();
    if text.is_empty() {
        return typed(SchemaType::String, Value::String(String::new()));
    }
    if trimmed == "null" {
        return SchemaAndValue::null();
    }
    if let Some(parsed) = scalar(trimmed) {
        return parsed;
    }
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        let mut p = Parser {
            chars: trimmed.chars().collect(),
            at: 0,
        };
        if let Some(parsed) = p.structured() {
            p.skip_spaces();
            if p.at == p.chars.len() {
                return parsed;
            }
        }
    }
    typed(SchemaType::String, Value::String(text.to_string()))
}

fn typed(ty: SchemaType, value: Value) -> SchemaAndValue {
    SchemaAndValue {
        schema: Some(Arc::new(Schema::of(ty))),
        value,
    }
}

/// A boolean, a temporal value or a number.
fn scalar(token: &str) -> Option<SchemaAndValue> {
    match token {
        "true" => return Some(typed(SchemaType::Boolean, Value::Boolean(true))),
        "false" => return Some(typed(SchemaType::Boolean, Value::Boolean(false))),
        _ => {}
    }
    let first = token.chars().next()?;
    if first.is_ascii_digit() {
        if let Some(temporal) = temporal(token) {
            return Some(temporal);
        }
    }
    if first.is_ascii_digit() || first == '+' || first == '-' || first == '.' {
        return number(token);
    }
    None
}

fn number(token: &str) -> Option<SchemaAndValue> {
    let d = Decimal::parse(token).ok()?;
    if d.scale <= 0 {
        if let Ok(integral) = d.rescale(0) {
            let v = integral.unscaled;
            return Some(if let Ok(v) = i8::try_from(v) {
                typed(SchemaType::Int8, Value::Int8(v))
            } else if let Ok(v) = i16::try_from(v) {
                typed(SchemaType::Int16, Value::Int16(v))
            } else if let Ok(v) = i32::try_from(v) {
                typed(SchemaType::Int32, Value::Int32(v))
            } else if let Ok(v) = i64::try_from(v) {
                typed(SchemaType::Int64, Value::Int64(v))
            } else {
                SchemaAndValue {
                    schema: Some(Arc::new(crate::logical::decimal_schema(0))),
                    value: Value::Decimal(integral),
                }
            });
        }
    }
    // Kafka Connect prefers float32 for any decimal a float can hold.
    let f = token.parse::<f32>().ok()?;
    if f.is_finite() {
        return Some(typed(SchemaType::Float32, Value::Float32(f)));
    }
    let f = token.parse::<f64>().ok()?;
    f.is_finite()
        .then(|| typed(SchemaType::Float64, Value::Float64(f)))
}

/// `yyyy-MM-dd`, `HH:mm:ss.SSS'Z'` or `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`.
fn temporal(token: &str) -> Option<SchemaAndValue> {
    let token = token.replace("\\:", ":");
    let b = token.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = token.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let date = |at: usize| -> Option<i64> {
        if b.get(at + 4) != Some(&b'-') || b.get(at + 7) != Some(&b'-') {
            return None;
        }
        let (y, m, d) = (
            digits(at..at + 4)?,
            digits(at + 5..at + 7)?,
            digits(at + 8..at + 10)?,
        );
        ((1..=12).contains(&m) && (1..=31).contains(&d))
            .then(|| days_from_civil(y, m as u32, d as u32))
    };
    let time = |at: usize| -> Option<i64> {
        if b.get(at + 2) != Some(&b':')
            || b.get(at + 5) != Some(&b':')
            || b.get(at + 8) != Some(&b'.')
            || b.get(at + 12) != Some(&b'Z')
        {
            return None;
        }
        let (h, m, s, ms) = (
            digits(at..at + 2)?,
            digits(at + 3..at + 5)?,
            digits(at + 6..at + 8)?,
            digits(at + 9..at + 12)?,
        );
        (h < 24 && m < 60 && s < 60).then_some(((h * 60 + m) * 60 + s) * 1000 + ms)
    };
    match b.len() {
        10 => date(0).map(|days| SchemaAndValue {
            schema: Some(Arc::new(date_schema())),
            value: Value::Date(days as i32),
        }),
        13 => time(0).map(|ms| SchemaAndValue {
            schema: Some(Arc::new(time_schema())),
            value: Value::Time(ms as i32),
        }),
        24 if b[10] == b'T' => {
            let (days, ms) = (date(0)?, time(11)?);
            Some(SchemaAndValue {
                schema: Some(Arc::new(timestamp_schema())),
                value: Value::Timestamp(days * MILLIS_PER_DAY + ms),
            })
        }
        _ => None,
    }
}

/// Arrays and maps of embedded values: quoted strings, scalars, `null`, and nested ones.
struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn skip_spaces(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_spaces();
        if self.chars.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn structured(&mut self) -> Option<SchemaAndValue> {
        if self.eat('[') {
            let mut items = Vec::new();
            if !self.eat(']') {
                loop {
                    items.push(self.embedded()?);
                    if self.eat(']') {
                        break;
                    }
                    if !self.eat(',') {
                        return None;
                    }
                }
            }
            let element = common(items.iter().map(|i| i.schema.as_deref()));
            return Some(SchemaAndValue {
                schema: element.map(|e| Arc::new(Schema::array(e))),
                value: Value::Array(items.into_iter().map(|i| i.value).collect()),
            });
        }
        if self.eat('{') {
            let mut entries = Vec::new();
            if !self.eat('}') {
                loop {
                    let key = self.embedded()?;
                    if key.value.is_null() || !self.eat(':') {
                        return None;
                    }
                    entries.push((key, self.embedded()?));
                    if self.eat('}') {
                        break;
                    }
                    if !self.eat(',') {
                        return None;
                    }
                }
            }
            let keys = common(entries.iter().map(|(k, _)| k.schema.as_deref()));
            let values = common(entries.iter().map(|(_, v)| v.schema.as_deref()));
            return Some(SchemaAndValue {
                schema: keys.zip(values).map(|(k, v)| Arc::new(Schema::map(k, v))),
                value: Value::Map(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.value, v.value))
                        .collect(),
                ),
            });
        }
        None
    }

    fn embedded(&mut self) -> Option<SchemaAndValue> {
        self.skip_spaces();
        match self.chars.get(self.at)? {
            '[' | '{' => self.structured(),
            '"' => {
                self.at += 1;
                let mut s = String::new();
                loop {
                    match self.chars.get(self.at)? {
                        '"' => {
                            self.at += 1;
                            break;
                        }
                        '\\' => {
                            s.push(*self.chars.get(self.at + 1)?);
                            self.at += 2;
                        }
                        c => {
                            s.push(*c);
                            self.at += 1;
                        }
                    }
                }
                // A quoted temporal literal keeps its type; other quoted text is a string.
                Some(match temporal(&s) {
                    Some(t) => t,
                    None => typed(SchemaType::String, Value::String(s)),
                })
            }
            _ => {
                let start = self.at;
                // A time or timestamp has colons of its own; any other token ends at one.
                let token = self.token(start, true);
                if token.contains(':') {
                    if let Some(t) = temporal(token.trim()) {
                        return Some(t);
                    }
                    self.at = start;
                }
                let token = self.token(start, false);
                let token = token.trim();
                if token == "null" {
                    return Some(SchemaAndValue::null());
                }
                scalar(token)
            }
        }
    }

    /// The text from `start` to the next delimiter (`:` among them unless `colons`).
    fn token(&mut self, start: usize, colons: bool) -> String {
        self.at = start;
        while self
            .chars
            .get(self.at)
            .is_some_and(|c| !matches!(c, ',' | ']' | '}') && (colons || *c != ':'))
        {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }
}

/// The one schema all these elements share, ignoring nulls; none if they differ.
fn common<'a>(schemas: impl Iterator<Item = Option<&'a Schema>>) -> Option<Schema> {
    let mut found: Option<&Schema> = None;
    for s in schemas.flatten() {
        match found {
            None => found = Some(s),
            Some(f) if f == s => {}
            Some(_) => return None,
        }
    }
    found.map(|s| s.clone().optional())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (Option<SchemaType>, Value) {
        let sv = parse_text(text);
        (sv.schema.map(|s| s.ty), sv.value)
    }

    #[test]
    fn text_is_parsed_to_the_narrowest_type() {
        use SchemaType::*;
        let cases = [
            ("true", Some(Boolean), Value::Boolean(true)),
            ("42", Some(Int8), Value::Int8(42)),
            ("300", Some(Int16), Value::Int16(300)),
            ("70000", Some(Int32), Value::Int32(70_000)),
            ("-5000000000", Some(Int64), Value::Int64(-5_000_000_000)),
            ("1.5", Some(Float32), Value::Float32(1.5)),
            ("hello", Some(String), Value::String("hello".into())),
            ("", Some(String), Value::String(std::string::String::new())),
            ("null", None, Value::Null),
            ("2023-11-14", Some(Int32), Value::Date(19_675)),
            ("22:13:20.042Z", Some(Int32), Value::Time(80_000_042)),
            (
                "2023-11-14T22:13:20.042Z",
                Some(Int64),
                Value::Timestamp(1_700_000_000_042),
            ),
            ("true}", Some(String), Value::String("true}".into())),
        ];
        for (text, ty, value) in cases {
            assert_eq!(parsed(text), (ty, value), "{text:?}");
        }
    }

    #[test]
    fn arrays_and_maps_are_parsed_with_common_schemas() {
        let sv = parse_text("[1, 2, 3]");
        assert_eq!(
            sv.value,
            Value::Array(vec![Value::Int8(1), Value::Int8(2), Value::Int8(3)])
        );
        assert_eq!(
            sv.schema.and_then(|s| s.value_schema.clone()).map(|e| e.ty),
            Some(SchemaType::Int8)
        );
        let sv = parse_text(r#"{"a":1,"b":"x"}"#);
        assert_eq!(
            sv.value,
            Value::Map(vec![
                (Value::String("a".into()), Value::Int8(1)),
                (Value::String("b".into()), Value::String("x".into())),
            ])
        );
        assert!(sv.schema.is_none(), "mixed value types: no common schema");
        assert_eq!(
            parsed("[1, 2").0,
            Some(SchemaType::String),
            "unclosed: a string"
        );
        assert_eq!(
            parse_text("{12:5}").value,
            Value::Map(vec![(Value::Int8(12), Value::Int8(5))])
        );
        assert_eq!(
            parse_text("[2023-11-14T22:13:20.042Z,22:13:20.042Z]").value,
            Value::Array(vec![
                Value::Timestamp(1_700_000_000_042),
                Value::Time(80_000_042)
            ])
        );
    }

    #[test]
    fn values_write_as_kafka_connect_writes_them() {
        assert_eq!(to_text(&Value::Float64(2.0)), "2.0");
        assert_eq!(
            to_text(&Value::Timestamp(1_700_000_000_042)),
            "2023-11-14T22:13:20.042Z"
        );
        assert_eq!(to_text(&Value::Date(19_675)), "2023-11-14");
        assert_eq!(
            to_text(&Value::Map(vec![(
                Value::String("k".into()),
                Value::Array(vec![Value::String("a\"b".into()), Value::Null])
            )])),
            r#"{"k":["a\"b",null]}"#
        );
        for text in ["[1,2,3]", "true", "hello", "2023-11-14T22:13:20.042Z"] {
            assert_eq!(to_text(&parse_text(text).value), text);
        }
    }
}
