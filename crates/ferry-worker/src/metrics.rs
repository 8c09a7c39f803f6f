//! What a worker counts, kept per node in one Prometheus registry (`prometheus-client`):
//! Kafka Connect's worker and task metrics, under the names Strimzi's JMX exporter rules give
//! them (`kafka_connect_<group>_<attribute>`, labels `connector` and `task`), as gauges like
//! theirs. A task's series exist while it runs on this node, as Kafka Connect's metric groups
//! do, and start at zero with each start.

use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One count. Kafka Connect's `-total` attributes are exported as gauges, and so are these.
pub type Count = Gauge<i64, AtomicI64>;

/// The labels of a task's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    connector: String,
    task: String,
}

/// Declares the per-task counts once: the field, the series name and its meaning.
macro_rules! task_metrics {
    ($($field:ident: $name:literal, $help:literal;)*) => {
        /// A task's counts, updated by its loop, pipeline and reporter. A default one counts
        /// into nothing registered (unit tests).
        #[derive(Clone, Debug, Default)]
        pub struct TaskMetrics {
            $(#[doc = $help] pub $field: Count,)*
        }

        /// Every task's series of one count each.
        #[derive(Debug, Default)]
        struct TaskFamilies {
            $($field: Family<TaskLabels, Count>,)*
        }

        impl TaskFamilies {
            fn register(&self, registry: &mut Registry) {
                $(registry.register($name, $help, self.$field.clone());)*
            }

            fn of(&self, labels: &TaskLabels) -> TaskMetrics {
                TaskMetrics { $($field: self.$field.get_or_create_owned(labels),)* }
            }

            fn remove(&self, labels: &TaskLabels) {
                $(self.$field.remove(labels);)*
            }
        }
    };
}

task_metrics! {
    sink_record_read: "kafka_connect_sink_task_sink_record_read_total",
        "Records read from Kafka by this sink task (before transforms).";
    sink_record_send: "kafka_connect_sink_task_sink_record_send_total",
        "Records output from the transforms and put to this sink task.";
    source_record_poll: "kafka_connect_source_task_source_record_poll_total",
        "Records polled from this source task (before transforms).";
    source_record_write: "kafka_connect_source_task_source_record_write_total",
        "Records output from the transforms and written to Kafka by this source task.";
    record_failures: "kafka_connect_task_error_total_record_failures",
        "Record processing failures in this task.";
    record_errors: "kafka_connect_task_error_total_record_errors",
        "Records that failed in this task (after retries, if any).";
    records_skipped: "kafka_connect_task_error_total_records_skipped",
        "Records skipped because of errors (errors.tolerance=all).";
    retries: "kafka_connect_task_error_total_retries",
        "Operations of this task retried after a retriable failure.";
    errors_logged: "kafka_connect_task_error_total_errors_logged",
        "Errors logged (errors.log.enable=true).";
    dlq_requests: "kafka_connect_task_error_deadletterqueue_produce_requests",
        "Records sent to the dead letter queue.";
    dlq_failures: "kafka_connect_task_error_deadletterqueue_produce_failures",
        "Records the dead letter queue failed to take.";
}

/// A node's metrics: the worker's own and every task's it runs.
#[derive(Debug)]
pub struct WorkerMetrics {
    registry: Registry,
    /// Connectors (connector instances) running on this worker.
    pub connector_count: Count,
    /// Tasks running on this worker.
    pub task_count: Count,
    tasks: TaskFamilies,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let connector_count = Count::default();
        let task_count = Count::default();
        registry.register(
            "kafka_connect_worker_connector_count",
            "Connectors run in this worker.",
            connector_count.clone(),
        );
        registry.register(
            "kafka_connect_worker_task_count",
            "Tasks run in this worker.",
            task_count.clone(),
        );
        let tasks = TaskFamilies::default();
        tasks.register(&mut registry);
        WorkerMetrics {
            registry,
            connector_count,
            task_count,
            tasks,
        }
    }
}

impl WorkerMetrics {
    /// The counts of a task starting on this node, from zero.
    pub fn task(&self, connector: &str, task: u32) -> TaskMetrics {
        let labels = labels(connector, task);
        self.tasks.remove(&labels);
        self.tasks.of(&labels)
    }

    /// A task stopped on this node: its series go.
    pub fn forget(&self, connector: &str, task: u32) {
        self.tasks.remove(&labels(connector, task));
    }

    /// Every series, in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

fn labels(connector: &str, task: u32) -> TaskLabels {
    TaskLabels {
        connector: connector.to_string(),
        task: task.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_s_series_live_while_it_runs_and_start_from_zero() {
        let metrics = WorkerMetrics::default();
        let t = metrics.task("sink", 0);
        t.sink_record_read.inc_by(5);
        metrics.task_count.inc();
        let text = metrics.render();
        assert!(
            text.contains(
                "kafka_connect_sink_task_sink_record_read_total{connector=\"sink\",task=\"0\"} 5"
            ),
            "{text}"
        );
        assert!(text.contains("kafka_connect_worker_task_count 1"), "{text}");
        let again = metrics.task("sink", 0);
        assert_eq!(again.sink_record_read.get(), 0, "a new start counts anew");
        metrics.forget("sink", 0);
        assert!(!metrics.render().contains("connector=\"sink\""));
    }
}
