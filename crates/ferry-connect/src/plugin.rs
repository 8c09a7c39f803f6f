//! What a built-in plugin tells the control plane about itself.

use std::collections::BTreeMap;

use crate::config::ConfigDef;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginKind {
    Sink,
    Source,
}

impl PluginKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Sink => "sink",
            PluginKind::Source => "source",
        }
    }
}

/// A cross-property check: (field, error) pairs.
pub type ConfigCheck = fn(&BTreeMap<String, String>) -> Vec<(String, String)>;

/// A connector plugin: its class name (Kafka Connect's, so existing configs keep working), the
/// short aliases Kafka Connect accepts, and its config definition.
#[derive(Clone, Debug)]
pub struct PluginDesc {
    pub class: &'static str,
    pub aliases: &'static [&'static str],
    pub kind: PluginKind,
    pub version: &'static str,
    /// The plugin's own properties (the common connector and sink ones are added by
    /// validation).
    pub config: fn() -> ConfigDef,
    /// Checks across properties, beyond each property's own validator.
    pub check: Option<ConfigCheck>,
}

impl PluginDesc {
    /// Whether `name` is this plugin's class or one of its aliases.
    pub fn matches(&self, name: &str) -> bool {
        self.class == name || self.aliases.contains(&name)
    }
}

/// Find a plugin by class name or alias.
pub fn find<'a>(plugins: &'a [PluginDesc], name: &str) -> Option<&'a PluginDesc> {
    plugins.iter().find(|p| p.matches(name.trim()))
}
