//! The Connect model shared by the runtime and the plugins. For now: typed config definitions,
//! plugin descriptions, and validation of a connector config against them.

pub mod config;
pub mod plugin;
pub mod validate;

pub use config::{ConfigDef, ConfigKey, ConfigType, Importance, Support};
pub use plugin::{PluginDesc, PluginKind};
pub use validate::{validate, FieldResult, Validation};
