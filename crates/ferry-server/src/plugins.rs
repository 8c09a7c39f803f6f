//! Every built-in plugin, listed explicitly.

use ferry_connect::PluginDesc;

/// The connector plugins this build of Ferry has.
pub fn plugins() -> Vec<PluginDesc> {
    vec![
        ferry_connector_file::sink_plugin(),
        ferry_connector_file::source_plugin(),
        ferry_connector_hdfs::sink_plugin(),
        ferry_connector_hdfs::hdfs3_sink_plugin(),
        ferry_connector_jdbc::sink_plugin(),
        ferry_connector_jdbc::source_plugin(),
    ]
}
