//! How records become file bytes, by Confluent's `format.class`: AvroFormat (`avro`),
//! StringFormat (each value's text, one per line) and JsonFormat (each value as schemaless
//! JSON, one per line). A record that cannot be written is a data error naming it; the task
//! reports it.

pub mod avro;
pub mod parquet;

use ferry_connect::config::props;
use ferry_connect::converter::JsonConverter;
use ferry_connect::{ConnectError, Converter, Result, SinkRecord};

use crate::config::{FormatKind, HdfsSinkConfig};

/// The writer of one file's records.
pub trait RecordWriter: Send {
    /// Encode one record.
    fn write(&mut self, record: &SinkRecord) -> Result<()>;
    /// The bytes encoded so far and not yet taken, for the file.
    fn take(&mut self) -> Vec<u8>;
    /// The file's last bytes (a footer, if the format has one).
    fn finish(self: Box<Self>) -> Result<Vec<u8>>;
}

/// A writer for a new file of the configured format.
pub fn writer(config: &HdfsSinkConfig) -> Result<Box<dyn RecordWriter>> {
    match config.format {
        FormatKind::Avro => Ok(Box::new(avro::AvroWriter::new(config.avro_codec))),
        FormatKind::String => Ok(Box::new(Lines {
            json: None,
            buf: Vec::new(),
        })),
        FormatKind::Json => {
            let json = JsonConverter::configure(&props(&[("schemas.enable", "false")]))?;
            Ok(Box::new(Lines {
                json: Some(json),
                buf: Vec::new(),
            }))
        }
        FormatKind::Parquet => Ok(Box::new(parquet::ParquetWriter::new(config.parquet_codec))),
    }
}

/// One line per record: the value's text, or its schemaless JSON.
struct Lines {
    json: Option<JsonConverter>,
    buf: Vec<u8>,
}

impl RecordWriter for Lines {
    fn write(&mut self, record: &SinkRecord) -> Result<()> {
        match &self.json {
            None => self
                .buf
                .extend_from_slice(record.value.to_string().as_bytes()),
            Some(json) => {
                let bytes = json
                    .encode(&record.topic, record.value_schema.as_ref(), &record.value)
                    .map_err(|e| {
                        ConnectError::data(format!(
                            "cannot write the record at {}-{} offset {} as JSON: {}",
                            record.topic, record.partition, record.offset, e.message
                        ))
                    })?;
                self.buf
                    .extend_from_slice(bytes.as_deref().unwrap_or(b"null"));
            }
        }
        self.buf.push(b'\n');
        Ok(())
    }

    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>> {
        Ok(self.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_connect::{Schema, SchemaType, Value};
    use std::sync::Arc;

    pub(crate) fn config(format: &str) -> HdfsSinkConfig {
        HdfsSinkConfig::parse(&props(&[
            ("store.url", "/tmp"),
            ("flush.size", "3"),
            (
                "format.class",
                &format!(
                    "io.confluent.connect.hdfs.{}.{format}",
                    format.trim_end_matches("Format").to_lowercase()
                ),
            ),
        ]))
        .expect("config")
    }

    fn record(schema: Option<Arc<Schema>>, value: Value) -> SinkRecord {
        SinkRecord {
            topic: "irene-shopping-log".into(),
            partition: 0,
            offset: 5,
            timestamp: None,
            key_schema: None,
            key: Value::Null,
            value_schema: schema,
            value,
            headers: Vec::new(),
        }
    }

    #[test]
    fn lines_of_text_and_of_json() {
        let decoded = JsonConverter::default()
            .decode(
                "t",
                Some(br#"{"schema":{"type":"struct","fields":[{"type":"string","field":"user"},{"type":"int64","field":"timestamp"}]},"payload":{"user":"irene","timestamp":1552581432345}}"#),
            )
            .expect("decodes");
        let order = record(decoded.schema, decoded.value);
        let mut text = writer(&config("StringFormat")).expect("writer");
        text.write(&order).expect("write");
        text.write(&record(None, Value::Null))
            .expect("a tombstone is written too");
        assert_eq!(
            String::from_utf8(text.finish().expect("finish")).expect("utf-8"),
            "Struct{user=irene,timestamp=1552581432345}\nnull\n"
        );
        let mut json = writer(&config("JsonFormat")).expect("writer");
        json.write(&order).expect("write");
        assert_eq!(
            json.take(),
            b"{\"user\":\"irene\",\"timestamp\":1552581432345}\n"
        );
        json.write(&record(None, Value::Null)).expect("null");
        assert_eq!(json.finish().expect("finish"), b"null\n");
    }

    #[test]
    fn a_value_that_does_not_fit_its_schema_is_a_data_error_naming_the_record() {
        let mut json = writer(&config("JsonFormat")).expect("writer");
        let schema = Arc::new(Schema::of(SchemaType::Int32));
        let err = json
            .write(&record(Some(schema), Value::String("x".into())))
            .expect_err("does not fit");
        assert!(!err.is_retriable());
        assert!(
            err.message.contains("irene-shopping-log-0 offset 5"),
            "{err}"
        );
    }
}
