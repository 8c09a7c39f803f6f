//! What a built-in plugin tells the control plane about itself.

use std::collections::BTreeMap;

use crate::config::ConfigDef;
use crate::error::Result;
use crate::task::{Connector, Props, SinkTask, SinkTaskContext, SourceTask, SourceTaskContext};

/// Whether a plugin is a sink or a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginKind {
    /// A sink connector.
    Sink,
    /// A source connector.
    Source,
}

impl PluginKind {
    /// `sink` or `source`, as Kafka Connect's REST API says.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Sink => "sink",
            PluginKind::Source => "source",
        }
    }
}

/// What a cross-property check found about one property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The config is invalid: (property, error).
    Error(String, String),
    /// Valid, but the user should know: (property, warning).
    Warning(String, String),
}

/// A cross-property check.
pub type ConfigCheck = fn(&BTreeMap<String, String>) -> Vec<Finding>;

/// How a plugin's tasks are built: from their task config, which the factory parses (once),
/// and their context, so that a built task has everything it needs.
#[derive(Clone, Copy, Debug)]
pub enum TaskFactory {
    /// A sink's tasks.
    Sink(fn(&Props, SinkTaskContext) -> Result<Box<dyn SinkTask>>),
    /// A source's tasks.
    Source(fn(&Props, SourceTaskContext) -> Result<Box<dyn SourceTask>>),
}

/// A connector plugin: its class name (Kafka Connect's, so existing configs keep working), the
/// short aliases Kafka Connect accepts, its config definition, and how to build it.
#[derive(Clone, Debug)]
pub struct PluginDesc {
    /// Kafka Connect's class name.
    pub class: &'static str,
    /// The class of its tasks in Kafka Connect, which a task config names (`task.class`).
    pub task_class: &'static str,
    /// Short names Kafka Connect accepts too.
    pub aliases: &'static [&'static str],
    /// The plugin's version.
    pub version: &'static str,
    /// Build the connector from its (validated) config.
    pub connector: fn(&Props) -> Result<Box<dyn Connector>>,
    /// How its tasks are built.
    pub tasks: TaskFactory,
    /// The plugin's own properties (the common connector and sink ones are added by
    /// validation).
    pub config: fn() -> ConfigDef,
    /// Checks across properties, beyond each property's own validator.
    pub check: Option<ConfigCheck>,
}

impl PluginDesc {
    /// Whether it is a sink or a source.
    pub fn kind(&self) -> PluginKind {
        match self.tasks {
            TaskFactory::Sink(_) => PluginKind::Sink,
            TaskFactory::Source(_) => PluginKind::Source,
        }
    }

    /// Whether `name` is this plugin's class or one of its aliases.
    pub fn matches(&self, name: &str) -> bool {
        self.class == name || self.aliases.contains(&name)
    }
}

/// Find a plugin by class name or alias.
pub fn find<'a>(plugins: &'a [PluginDesc], name: &str) -> Option<&'a PluginDesc> {
    plugins.iter().find(|p| p.matches(name.trim()))
}
