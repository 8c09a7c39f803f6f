//! The plugins besides connectors that Kafka Connect's REST API lists and describes
//! (`GET /connector-plugins?connectorsOnly=false`, `GET /connector-plugins/{plugin}/config`):
//! transforms, predicates, converters and header converters, each with its properties.

use crate::config::ConfigDef;
use crate::converter::{self, CONVERTERS, SIMPLE_HEADER_CONVERTER};
use crate::transform;

/// The version of every built-in plugin that is not a connector: Ferry's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The type of a plugin that is not a connector, as Kafka Connect names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginType {
    /// A single message transform.
    Transformation,
    /// A predicate a transform may be conditional on.
    Predicate,
    /// A key or value converter.
    Converter,
    /// A header converter.
    HeaderConverter,
}

impl PluginType {
    /// Kafka Connect's name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginType::Transformation => "transformation",
            PluginType::Predicate => "predicate",
            PluginType::Converter => "converter",
            PluginType::HeaderConverter => "header_converter",
        }
    }
}

/// One plugin that is not a connector.
#[derive(Clone, Debug)]
pub struct Plugin {
    /// Its class (Kafka Connect's name).
    pub class: &'static str,
    /// Its type.
    pub kind: PluginType,
    /// Its properties.
    pub config: ConfigDef,
}

/// Every plugin that is not a connector, in Kafka Connect's order: transforms, predicates,
/// converters, header converters, each sorted by class.
pub fn others() -> Vec<Plugin> {
    let mut transforms: Vec<Plugin> = transform::classes()
        .into_iter()
        .map(|c| Plugin {
            class: c.class,
            kind: PluginType::Transformation,
            config: (c.config)(),
        })
        .collect();
    let mut predicates: Vec<Plugin> = transform::predicate_classes()
        .into_iter()
        .map(|(class, config)| Plugin {
            class,
            kind: PluginType::Predicate,
            config: config(),
        })
        .collect();
    let converter = |class: &'static str, kind| Plugin {
        class,
        kind,
        config: converter::converter_config(class),
    };
    let mut converters: Vec<Plugin> = CONVERTERS
        .iter()
        .map(|(class, _)| converter(class, PluginType::Converter))
        .collect();
    let mut headers: Vec<Plugin> = CONVERTERS
        .iter()
        .map(|(class, _)| *class)
        .chain([SIMPLE_HEADER_CONVERTER])
        .map(|class| converter(class, PluginType::HeaderConverter))
        .collect();
    let mut all = Vec::new();
    for group in [
        &mut transforms,
        &mut predicates,
        &mut converters,
        &mut headers,
    ] {
        group.sort_by_key(|p| p.class);
        all.append(group);
    }
    all
}

/// The plugin `name` stands for: its class, or its class without the package (a short name,
/// as Kafka Connect accepts it).
pub fn find(name: &str) -> Option<Plugin> {
    let name = name.trim();
    others().into_iter().find(|p| {
        p.class == name
            || p.class
                .rsplit_once('.')
                .is_some_and(|(_, short)| short == name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_listed_and_found_by_class_or_short_name() {
        let all = others();
        for kind in [
            PluginType::Transformation,
            PluginType::Predicate,
            PluginType::Converter,
            PluginType::HeaderConverter,
        ] {
            assert!(all.iter().any(|p| p.kind == kind), "no {kind:?}");
        }
        let cast = find("Cast$Value").expect("Cast$Value");
        assert_eq!(cast.class, "org.apache.kafka.connect.transforms.Cast$Value");
        assert!(cast.config.iter().any(|k| k.name == "spec"));
        let string = find("org.apache.kafka.connect.storage.StringConverter").expect("String");
        assert_eq!(string.kind, PluginType::Converter);
        assert!(find("SimpleHeaderConverter").is_some());
        assert!(find("TopicNameMatches").is_some());
        assert!(find("Nope").is_none());
    }
}
