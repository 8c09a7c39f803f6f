//! The Connect model shared by the runtime and the plugins: Kafka Connect's data API (schemas,
//! values, structs), records, the connector and task contracts, converters, typed config
//! definitions and their validation, and plugin descriptions.

#![warn(missing_docs)]

pub mod catalog;
pub mod config;
pub mod converter;
pub mod data;
pub mod datefmt;
pub mod error;
pub mod error_handling;
pub mod logical;
pub mod plugin;
pub mod record;
pub mod task;
pub mod topic_creation;
pub mod topics;
pub mod transform;
pub mod validate;
pub mod value_text;

pub use config::{ConfigDef, ConfigKey, ConfigType, Importance, Support};
pub use converter::Converter;
pub use data::{Schema, SchemaAndValue, SchemaType, Struct, Value};
pub use error::{ConnectError, Result, Retry, Stage};
pub use logical::{Decimal, Logical};
pub use plugin::{PluginDesc, PluginKind};
pub use record::{Header, SinkRecord, SourceRecord, TopicPartition};
pub use task::{Connector, SinkTask, SinkTaskContext, SourceTask, SourceTaskContext};
pub use validate::{validate, validate_on, FieldResult, Validation};
