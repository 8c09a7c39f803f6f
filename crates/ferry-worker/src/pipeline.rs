//! The record pipeline of a task, the same for sinks and sources: the key, value and header
//! converters, the transform chain, and error handling (the reporter, with its dead letter
//! queue). A sink decodes consumed messages into records and transforms them; a source
//! transforms its records and encodes them for the producer.

use std::sync::Arc;

use ferry_connect::converter::HeaderConverter;
use ferry_connect::error_handling::ErrorSettings;
use ferry_connect::task::Props;
use ferry_connect::transform::{Applied, Chain};
use ferry_connect::{ConnectError, Converter, Header, SinkRecord, SourceRecord, Stage, Value};
use rdkafka::message::{Headers, Message};

use crate::dlq::Original;
use crate::report::Reporter;

/// Where a record failed: the stage, the class at fault, the error.
pub type Failed = (Stage, String, ConnectError);

pub struct Pipeline {
    key: Box<dyn Converter>,
    value: Box<dyn Converter>,
    headers: Box<dyn HeaderConverter>,
    transforms: Chain,
    pub errors: ErrorSettings,
    pub reporter: Arc<Reporter>,
    /// The converter classes, for error reports: key, value, header.
    classes: [String; 3],
}

impl Pipeline {
    /// The pipeline a connector config declares, the worker's converters filling in what it
    /// does not name, with `reporter` for the records that fail.
    pub fn new(
        connector_config: &Props,
        worker_converters: &Props,
        reporter: Reporter,
    ) -> Result<Pipeline, ConnectError> {
        let (key, value) =
            ferry_connect::converter::key_value(connector_config, worker_converters)?;
        let headers = ferry_connect::converter::headers(connector_config, worker_converters)?;
        let transforms = Chain::from_config(connector_config)?;
        let classes = ["key.converter", "value.converter", "header.converter"].map(|prefix| {
            ferry_connect::converter::class_of(prefix, connector_config, worker_converters)
        });
        Ok(Pipeline {
            key,
            value,
            headers,
            transforms,
            errors: reporter.settings().clone(),
            reporter: Arc::new(reporter),
            classes,
        })
    }

    /// A unit's pipeline. A unit that will see no record (a sink task that owns no partition)
    /// opens no dead letter queue producer.
    pub async fn of_unit(
        ctx: &crate::unit::UnitCtx,
        kafka: &crate::kafka::KafkaSettings,
        sees_records: bool,
    ) -> Result<Pipeline, ConnectError> {
        let reporter = Reporter::of_unit(ctx, kafka, sees_records).await?;
        Pipeline::new(&ctx.connector_config, &ctx.settings.converters, reporter)
    }

    /// The task's counts.
    pub fn metrics(&self) -> &crate::metrics::TaskMetrics {
        self.reporter.metrics()
    }

    /// A consumed message as a record, transformed: `None` if a transform dropped it.
    pub fn sink_record(&self, msg: &impl Message) -> Result<Option<SinkRecord>, Failed> {
        let mut record = self.decode(msg)?;
        match self.transforms.run(&mut record) {
            Ok(Applied::Keep) => Ok(Some(record)),
            Ok(Applied::Drop) => Ok(None),
            Err((class, e)) => Err((Stage::Transformation, class.to_string(), e)),
        }
    }

    /// A consumed message as a record.
    fn decode(&self, msg: &impl Message) -> Result<SinkRecord, Failed> {
        let topic = msg.topic();
        let [key_class, value_class, header_class] = &self.classes;
        let key = self
            .key
            .decode(topic, msg.key())
            .map_err(|e| (Stage::KeyConverter, key_class.clone(), e))?;
        let value = self
            .value
            .decode(topic, msg.payload())
            .map_err(|e| (Stage::ValueConverter, value_class.clone(), e))?;
        let mut headers = Vec::new();
        for h in msg.headers().iter().flat_map(|hs| hs.iter()) {
            let sv = self
                .headers
                .decode(topic, h.key, h.value)
                .map_err(|e| (Stage::HeaderConverter, header_class.clone(), e))?;
            headers.push(Header {
                key: h.key.to_string(),
                schema: sv.schema,
                value: sv.value,
            });
        }
        Ok(SinkRecord {
            topic: topic.to_string(),
            partition: msg.partition(),
            offset: msg.offset(),
            timestamp: msg.timestamp().to_millis(),
            key_schema: key.schema,
            key: key.value,
            value_schema: value.schema,
            value: value.value,
            headers,
        })
    }

    /// A source record transformed and converted, as it is to be produced; `None` if a
    /// transform dropped it.
    pub fn source_record(&self, record: &mut SourceRecord) -> Result<Option<Original>, Failed> {
        match self.transforms.run(record) {
            Ok(Applied::Keep) => {}
            Ok(Applied::Drop) => return Ok(None),
            Err((class, e)) => return Err((Stage::Transformation, class.to_string(), e)),
        }
        let [key_class, value_class, header_class] = &self.classes;
        let topic = &record.topic;
        let key = self
            .key
            .encode(topic, record.key_schema.as_ref(), &record.key)
            .map_err(|e| (Stage::KeyConverter, key_class.clone(), e))?;
        let value = self
            .value
            .encode(topic, record.value_schema.as_ref(), &record.value)
            .map_err(|e| (Stage::ValueConverter, value_class.clone(), e))?;
        let mut headers = Vec::with_capacity(record.headers.len());
        for h in &record.headers {
            let bytes = self
                .headers
                .encode(topic, &h.key, h.schema.as_ref(), &h.value)
                .map_err(|e| (Stage::HeaderConverter, header_class.clone(), e))?;
            headers.push((h.key.clone(), bytes));
        }
        Ok(Some(Original {
            key,
            value,
            headers,
            timestamp: record.timestamp,
        }))
    }

    /// A source record that failed on its way, for the DLQ: converted as far as the
    /// converters manage, else as text.
    pub fn as_it_was(&self, record: &SourceRecord) -> Original {
        let bytes = |converter: &dyn Converter, schema, value: &Value| {
            converter
                .encode(&record.topic, schema, value)
                .unwrap_or_else(|_| (*value != Value::Null).then(|| value.to_string().into_bytes()))
        };
        Original {
            key: bytes(self.key.as_ref(), record.key_schema.as_ref(), &record.key),
            value: bytes(
                self.value.as_ref(),
                record.value_schema.as_ref(),
                &record.value,
            ),
            headers: Vec::new(),
            timestamp: record.timestamp,
        }
    }
}
