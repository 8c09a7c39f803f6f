//! Error handling end to end: malformed JSON among good records, with `errors.tolerance=all`
//! and a dead letter queue read back by an independent client (Python's confluent-kafka), and
//! with `errors.tolerance=none`, a FAILED task whose config fix brings everything in; source
//! records that fail a transform, dead-lettered with their source position; a retriable
//! failure (a broken pipe) retried with backoff until it heals or `errors.retry.timeout` ends; a
//! source record the broker refuses, failing its task; a consumed record's own headers, kept
//! into the dead letter queue.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use ferry_tests::pipeline::{create, create_source, create_source_with, started};
use ferry_tests::{
    error_header, lines_in_work_dirs, read_topic, say, wait_for, Cluster, Kafka, Settings,
};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::Value;

const FLOW: Duration = Duration::from_secs(90);

/// 100 orders as JSON lines, every tenth one cut short; the good ones as FileStreamSink
/// writes them.
fn orders(cluster: &Cluster) -> (PathBuf, BTreeSet<String>, Vec<(usize, String)>) {
    let path = cluster.dir.path().join("orders.txt");
    let mut lines = Vec::new();
    let (mut good, mut bad) = (BTreeSet::new(), Vec::new());
    for i in 0..100 {
        if i % 10 == 7 {
            let line = format!(r#"{{"id": {i}, "item": "#);
            bad.push((i, line.clone()));
            lines.push(line);
        } else {
            lines.push(format!(r#"{{"id":{i}}}"#));
            good.insert(format!("{{id={i}}}"));
        }
    }
    std::fs::write(&path, lines.join("\n") + "\n").expect("write the orders");
    (path, good, bad)
}

/// Wait (as `what`) until the first task of connector `name` is FAILED: its trace.
fn failed_trace(cluster: &Cluster, leader: u64, name: &str, what: &str) -> String {
    wait_for(what, FLOW, || {
        let status = cluster.json(leader, &["connectors", "status", name]);
        let task = &status["tasks"][0];
        (task["state"] == "FAILED").then(|| task["trace"].as_str().unwrap_or_default().to_string())
    })
}

fn sink_config<'a>(file: &'a str, tolerance: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("connector.class", "FileStreamSink"),
        ("topics", "orders"),
        ("file", file),
        (
            "value.converter",
            "org.apache.kafka.connect.json.JsonConverter",
        ),
        ("value.converter.schemas.enable", "false"),
        ("errors.tolerance", tolerance),
        ("errors.log.enable", "true"),
        ("errors.log.include.messages", "true"),
        ("errors.deadletterqueue.topic.name", "dlq-orders"),
        ("errors.deadletterqueue.topic.replication.factor", "1"),
        ("errors.deadletterqueue.context.headers.enable", "true"),
    ]
}

#[test]
fn malformed_records_go_to_the_dead_letter_queue_with_their_context_and_the_rest_arrive() {
    let test_began = std::time::SystemTime::now();
    let kafka = Kafka::start(&[("orders", 1), ("dlq-orders", 1)]);
    // The node logs JSON (`[log] format`), as a log collector reads it.
    let json_logs = Settings {
        log_format: Some("json"),
        ..Settings::default()
    };
    let (cluster, leader) = started(1, &kafka, json_logs);
    let (input, good, bad) = orders(&cluster);
    create_source(&cluster, leader, &input, "orders");
    create(&cluster, leader, "sink", &sink_config("sink.out", "all"));
    wait_for("every good order in the sink", FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(&cluster, "sink.out")
            .into_iter()
            .collect();
        (got == good).then_some(())
    });
    let dead = read_topic(&kafka, "dlq-orders", bad.len());
    assert_eq!(dead.len(), bad.len(), "{dead:?}");
    for (record, (offset, line)) in dead.iter().zip(&bad) {
        assert_eq!(
            record["value"].as_str(),
            Some(line.as_str()),
            "the record as consumed"
        );
        let h = &record["headers"];
        let header = |name: &str| error_header(h, name);
        assert_eq!(header("topic").as_deref(), Some("orders"));
        assert_eq!(header("partition").as_deref(), Some("0"));
        assert_eq!(header("offset"), Some(offset.to_string()));
        assert_eq!(header("connector.name").as_deref(), Some("sink"));
        assert_eq!(header("task.id").as_deref(), Some("0"));
        assert_eq!(header("stage").as_deref(), Some("VALUE_CONVERTER"));
        assert_eq!(
            header("class.name").as_deref(),
            Some("org.apache.kafka.connect.json.JsonConverter")
        );
        assert_eq!(
            header("exception.class.name").as_deref(),
            Some("org.apache.kafka.connect.errors.DataException")
        );
        // Kafka Connect's words; the cause follows in the stack trace.
        assert_eq!(
            header("exception.message").as_deref(),
            Some("Converting byte[] to Kafka Connect data failed due to serialization error: "),
            "{h}"
        );
        assert!(
            header("exception.stacktrace").is_some_and(|m| m.contains("DataException")
                && m.contains(
                    "Caused by: JsonConverter (topic orders): the data is not valid JSON"
                )),
            "{h}"
        );
    }
    // Every consumed offset is committed, the dead-lettered ones included.
    wait_for("the sink's offsets at the end of the topic", FLOW, || {
        let offsets = cluster.json(leader, &["connectors", "offsets", "sink"]);
        (offsets["offsets"][0]["offset"]["kafka_offset"].as_i64() == Some(100)).then_some(())
    });
    // The task's counts say the same, under Kafka Connect's names.
    let count = |connector: &str, name: &str| {
        cluster.metric([leader], name, &[("connector", connector), ("task", "0")])
    };
    let (all, bad) = ((good.len() + bad.len()) as i64, bad.len() as i64);
    assert_eq!(
        count(
            "source",
            "kafka_connect_source_task_source_record_poll_total"
        ),
        all
    );
    assert_eq!(
        count(
            "source",
            "kafka_connect_source_task_source_record_write_total"
        ),
        all
    );
    assert_eq!(
        count("sink", "kafka_connect_sink_task_sink_record_read_total"),
        all
    );
    assert_eq!(
        count("sink", "kafka_connect_sink_task_sink_record_send_total"),
        all - bad,
        "the malformed ones never reach put"
    );
    for skipped in [
        "kafka_connect_task_error_total_record_errors",
        "kafka_connect_task_error_total_records_skipped",
        "kafka_connect_task_error_total_errors_logged",
        "kafka_connect_task_error_deadletterqueue_produce_requests",
    ] {
        assert_eq!(count("sink", skipped), bad, "{skipped}");
    }
    assert_eq!(
        count(
            "sink",
            "kafka_connect_task_error_deadletterqueue_produce_failures"
        ),
        0
    );
    // The same series as Prometheus scrapes them: `GET /metrics` on the REST listener.
    let scraped = cluster
        .rest(leader, "GET", "/metrics", ferry_tests::rest::Body::None)
        .expect("GET /metrics answers");
    assert_eq!(scraped.status, 200, "{:?}", scraped.body);
    assert!(
        scraped
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{:?}",
        scraped.headers
    );
    let text = scraped.body.as_str().unwrap_or_default();
    for (name, value) in [
        ("kafka_connect_sink_task_sink_record_read_total", all),
        (
            "kafka_connect_task_error_deadletterqueue_produce_requests",
            bad,
        ),
    ] {
        let line = format!("{name}{{connector=\"sink\",task=\"0\"}} {value}");
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    // The states of the units this node runs, as Kafka Connect's status metrics show them.
    for line in [
        "kafka_connect_connector_status{connector=\"sink\",status=\"running\"} 1",
        "kafka_connect_connector_task_status{connector=\"sink\",task=\"0\",status=\"running\"} 1",
        "kafka_connect_worker_connector_running_task_count{connector=\"sink\"} 1",
        "kafka_connect_worker_connector_failed_task_count{connector=\"sink\"} 0",
        "kafka_connect_sink_task_partition_count{connector=\"sink\",task=\"0\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    // Both tasks (the source's and the sink's) started, and no start failed.
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    assert!(
        value("kafka_connect_worker_task_startup_success_total") >= 2.0,
        "{text}"
    );
    assert_eq!(
        value("kafka_connect_worker_task_startup_failure_total"),
        0.0
    );
    // The offsets the test waited for were committed.
    let commits =
        "kafka_connect_sink_task_offset_commit_completion_total{connector=\"sink\",task=\"0\"}";
    assert!(value(commits) >= 1.0, "{text}");
    // Ferry's own: this node's Raft, the only node, leads.
    assert_eq!(value("ferry_raft_is_leader"), 1.0, "{text}");
    assert_eq!(value("ferry_raft_leader_id"), leader as f64, "{text}");
    assert!(value("ferry_raft_applied_index") >= 1.0, "{text}");
    assert_eq!(value("ferry_worker_lease_held"), 1.0, "{text}");
    // Kafka Connect's windowed measures, of the batches just read and polled.
    for rate in [
        "kafka_connect_sink_task_sink_record_read_rate{connector=\"sink\",task=\"0\"}",
        "kafka_connect_source_task_source_record_poll_rate{connector=\"source\",task=\"0\"}",
    ] {
        assert!(value(rate) > 0.0, "{rate}: {text}");
    }
    let sink = |name: &str| value(&format!("{name}{{connector=\"sink\",task=\"0\"}}"));
    assert!(
        sink("kafka_connect_sink_task_put_batch_max_time_ms") >= 0.0,
        "{text}"
    );
    assert_eq!(
        sink("kafka_connect_connector_task_offset_commit_success_percentage"),
        1.0,
        "{text}"
    );
    assert!(
        sink("kafka_connect_connector_task_batch_size_max") >= 1.0,
        "{text}"
    );
    // The last malformed record was met during the test.
    let since_epoch = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_millis() as f64)
    };
    let last_error = sink("kafka_connect_task_error_last_error_timestamp");
    assert!(
        last_error >= since_epoch(test_began)
            && last_error <= since_epoch(std::time::SystemTime::now()),
        "{text}"
    );
    // Every line of the node's log is a JSON object; a task's lines carry its unit's span,
    // with the connector, the task and the generation.
    let log = cluster.log_text(leader);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let assigned = lines
        .iter()
        .find(|l| {
            l["fields"]["message"] == "sink task assigned" && l["span"]["connector"] == "sink"
        })
        .unwrap_or_else(|| panic!("no JSON line of the sink task's start in\n{log}"));
    assert_eq!(assigned["span"]["task"], 0, "{assigned}");
    assert!(
        assigned["span"]["generation"].as_u64().is_some(),
        "{assigned}"
    );
    say(format!(
        "DLQ: {} good orders delivered, {} malformed ones in dlq-orders with all ten context headers",
        good.len(),
        dead.len()
    ));
}

/// Records consumed by a sink keep their own headers: a dead-lettered one carries them ahead
/// of the context headers, whether it was the first message of a batch (polled) or among
/// those taken with it (the task's ready messages, read in one librdkafka call).
#[test]
fn a_dead_lettered_record_keeps_the_headers_it_was_consumed_with() {
    const RECORDS: usize = 1200;
    let kafka = Kafka::start(&[("orders", 1), ("dlq-orders", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    // Every record has headers; every 200th (0, 200, …) is malformed. All are in the topic
    // before the connector starts, so most of the malformed ones are in a batch's later part.
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &kafka.bootstrap)
        .create()
        .expect("a producer");
    let bad: Vec<usize> = (0..RECORDS).step_by(200).collect();
    let values: Vec<String> = (0..RECORDS)
        .map(|i| match bad.contains(&i) {
            true => format!(r#"{{"id": {i}, "item": "#),
            false => format!(r#"{{"id":{i}}}"#),
        })
        .collect();
    for (i, value) in values.iter().enumerate() {
        let trace = format!("t{i}");
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "trace-id",
                value: Some(trace.as_str()),
            })
            .insert(Header {
                key: "empty",
                value: None::<&str>,
            });
        let record = BaseRecord::<(), str>::to("orders")
            .payload(value.as_str())
            .headers(headers);
        ferry_tests::send_waiting(&producer, record);
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every record produced");
    create(&cluster, leader, "sink", &sink_config("sink.out", "all"));
    let dead = read_topic(&kafka, "dlq-orders", bad.len());
    assert_eq!(dead.len(), bad.len(), "{dead:?}");
    for (record, i) in dead.iter().zip(&bad) {
        let h = &record["headers"];
        assert_eq!(record["value"].as_str(), Some(values[*i].as_str()));
        assert_eq!(
            h["trace-id"].as_str(),
            Some(format!("t{i}").as_str()),
            "{h}"
        );
        assert!(
            h.get("empty").is_some_and(Value::is_null),
            "a header without a value stays, valueless: {h}"
        );
        assert_eq!(error_header(h, "offset"), Some(i.to_string()), "{h}");
    }
    wait_for("every good record in the sink", FLOW, || {
        let lines = lines_in_work_dirs(&cluster, "sink.out").len();
        (lines == RECORDS - bad.len()).then_some(())
    });
    say(format!(
        "headers: {} dead-lettered records of {RECORDS} kept their own headers",
        dead.len()
    ));
}

#[test]
fn without_tolerance_the_task_fails_with_a_readable_trace_and_a_config_fix_resumes_it() {
    let kafka = Kafka::start(&[("orders", 1), ("dlq-orders", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let (input, good, _) = orders(&cluster);
    create_source(&cluster, leader, &input, "orders");
    create(
        &cluster,
        leader,
        "strict",
        &sink_config("strict.out", "none"),
    );
    let trace = failed_trace(&cluster, leader, "strict", "the strict sink FAILED");
    assert!(trace.contains("VALUE_CONVERTER"), "{trace}");
    assert!(
        trace.contains("orders-0 offset 7"),
        "the trace names the record: {trace}"
    );
    assert!(trace.contains("not valid JSON"), "{trace}");
    // The records before the bad one were written; the rest wait.
    let before: BTreeSet<String> = lines_in_work_dirs(&cluster, "strict.out")
        .into_iter()
        .collect();
    assert!(before.len() <= 7, "{before:?}");
    // The fix: tolerate bad records. The task starts again from its committed offset.
    let fixed = cluster.connector_file("strict", &sink_config("strict.out", "all"));
    cluster.cli(
        leader,
        &[
            "connectors",
            "config",
            "strict",
            "-f",
            &fixed.to_string_lossy(),
        ],
    );
    wait_for("every good order after the fix", FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(&cluster, "strict.out")
            .into_iter()
            .collect();
        (got == good).then_some(())
    });
    say(format!("STRICT: failed at offset 7 with a readable trace; after the fix all {} good orders arrived", good.len()));
}

#[test]
fn source_records_that_fail_a_transform_are_dead_lettered_with_their_source_position() {
    let kafka = Kafka::start(&[("numbers", 1), ("dlq-numbers", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let input = cluster.dir.path().join("numbers.txt");
    let (mut text, mut good, mut bad) = (String::new(), BTreeSet::new(), Vec::new());
    for i in 0..50 {
        let line = if i % 10 == 3 {
            format!("n/a-{i}")
        } else {
            good.insert(i.to_string());
            i.to_string()
        };
        text.push_str(&line);
        text.push('\n');
        if i % 10 == 3 {
            // FileStreamSource's offset is the byte after the line.
            bad.push((line, text.len()));
        }
    }
    std::fs::write(&input, &text).expect("write the input");
    create_source_with(
        &cluster,
        leader,
        "numbers-source",
        &input,
        "numbers",
        &[
            ("transforms", "toInt"),
            (
                "transforms.toInt.type",
                "org.apache.kafka.connect.transforms.Cast$Value",
            ),
            ("transforms.toInt.spec", "int32"),
            ("errors.tolerance", "all"),
            ("errors.log.enable", "true"),
            ("errors.deadletterqueue.topic.name", "dlq-numbers"),
            ("errors.deadletterqueue.topic.replication.factor", "1"),
            ("errors.deadletterqueue.context.headers.enable", "true"),
        ],
    );
    create(
        &cluster,
        leader,
        "numbers-sink",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "numbers"),
            ("file", "numbers.out"),
        ],
    );
    wait_for("every number in the sink", FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(&cluster, "numbers.out")
            .into_iter()
            .collect();
        (got == good).then_some(())
    });
    let dead = read_topic(&kafka, "dlq-numbers", bad.len());
    assert_eq!(dead.len(), bad.len(), "{dead:?}");
    let file = input.to_string_lossy().to_string();
    for (record, (line, position)) in dead.iter().zip(&bad) {
        assert_eq!(record["value"].as_str(), Some(line.as_str()), "{record}");
        let h = &record["headers"];
        let header = |name: &str| error_header(h, name);
        assert_eq!(header("topic").as_deref(), Some("numbers"));
        assert_eq!(
            header("partition").as_deref(),
            Some("-1"),
            "not produced yet"
        );
        assert_eq!(header("offset").as_deref(), Some("-1"), "not produced yet");
        assert_eq!(header("connector.name").as_deref(), Some("numbers-source"));
        assert_eq!(header("stage").as_deref(), Some("TRANSFORMATION"));
        assert_eq!(
            header("class.name").as_deref(),
            Some("org.apache.kafka.connect.transforms.Cast$Value")
        );
        let partition: Value =
            serde_json::from_str(&header("source.partition").expect("source partition"))
                .expect("JSON");
        assert_eq!(partition["filename"].as_str(), Some(file.as_str()));
        let offset: Value =
            serde_json::from_str(&header("source.offset").expect("source offset")).expect("JSON");
        assert_eq!(offset["position"].as_u64(), Some(*position as u64), "{h}");
    }
    // The source moved past the failed records: its offset is at the end of the file.
    wait_for("the source's offset at the end of the file", FLOW, || {
        let offsets = cluster.json(leader, &["connectors", "offsets", "numbers-source"]);
        (offsets["offsets"][0]["offset"]["position"].as_u64() == Some(text.len() as u64))
            .then_some(())
    });
    say(format!(
        "SOURCE DLQ: {} numbers delivered, {} failed casts in dlq-numbers with their source positions",
        good.len(),
        dead.len()
    ));
}

#[test]
fn a_source_record_the_broker_refuses_fails_the_task_naming_it() {
    // The broker refuses a record larger than its topic's max.message.bytes; the producer
    // accepts it (its own limit is larger), so the refusal comes back as a delivery report.
    let kafka = Kafka::start(&[("small", 1)]);
    ferry_tests::brokers::set_topic_config(&kafka.bootstrap, "small", "max.message.bytes", "10000");
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let input = cluster.dir.path().join("lines.txt");
    std::fs::write(&input, format!("short\n{}\n", "x".repeat(20_000))).expect("write the input");
    create_source_with(&cluster, leader, "lines-source", &input, "small", &[]);
    let trace = failed_trace(&cluster, leader, "lines-source", "the source task FAILED");
    assert!(trace.contains("KAFKA_PRODUCE"), "{trace}");
    assert!(trace.contains("was not delivered to small"), "{trace}");
    // Nothing was committed past the refused record: the task starts again from before it.
    let offsets = cluster.json(leader, &["connectors", "offsets", "lines-source"]);
    let committed = offsets["offsets"][0]["offset"]["position"]
        .as_u64()
        .unwrap_or(0);
    assert!(committed <= "short\n".len() as u64, "{offsets}");
    say(format!(
        "REFUSED: the broker's refusal failed the source task: {}",
        trace.lines().next().unwrap_or_default()
    ));
}

/// A reader of a named pipe that appends what it reads to a file, opening the pipe again
/// whenever its writer closes it, until dropped (which kills it; it is only dropped while the
/// pipe is drained).
struct PipeReader(Child);

impl PipeReader {
    fn start(fifo: &Path, out: &Path) -> Self {
        let child = Command::new("sh")
            .arg("-c")
            .arg(r#"while :; do cat "$0" >> "$1"; done"#)
            .arg(fifo)
            .arg(out)
            .process_group(0)
            .spawn()
            .expect("start the pipe reader");
        PipeReader(child)
    }
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.0.id() as i32), Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// The (attempt, delay) of each retry the node logged for `what`.
fn retries_logged(log: &str, what: &str) -> Vec<(u64, u64)> {
    let field = |line: &str, name: &str| {
        let start = line.find(&format!(" {name}="))? + name.len() + 2;
        let rest = &line[start..];
        let end = rest.find(' ').unwrap_or(rest.len());
        rest[..end].trim_matches('"').parse().ok()
    };
    log.lines()
        .filter(|l| {
            l.contains("retriable failure: retrying") && l.contains(&format!("what=\"{what}\""))
        })
        .filter_map(|l| Some((field(l, "attempt")?, field(l, "delay_ms")?)))
        .collect()
}

#[test]
fn a_broken_pipe_is_retried_with_backoff_until_it_heals_or_the_retry_timeout_ends() {
    let kafka = Kafka::start(&[("piped", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let fifo = cluster.dir.path().join("sink.fifo");
    let out = cluster.dir.path().join("piped.out");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let input = cluster.dir.path().join("piped.txt");
    let lines = |from: usize, to: usize| -> String {
        (from..to).map(|i| format!("piped-{i:03}\n")).collect()
    };
    let append = |text: String| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&input)
            .expect("open the input");
        f.write_all(text.as_bytes()).expect("append");
    };
    let arrived = |n: usize| {
        let got = std::fs::read_to_string(&out).unwrap_or_default();
        let want = lines(0, n);
        assert!(
            want.starts_with(&got),
            "every line once and in order: {got:?}"
        );
        (got == want).then_some(())
    };
    append(lines(0, 10));
    let reader = PipeReader::start(&fifo, &out);
    create_source(&cluster, leader, &input, "piped");
    let fifo_path = fifo.to_string_lossy().to_string();
    let sink = |timeout: &'static str| {
        vec![
            ("connector.class", "FileStreamSink"),
            ("topics", "piped"),
            ("file", fifo_path.as_str()),
            ("errors.retry.timeout", timeout),
            ("errors.retry.delay.max.ms", "1000"),
        ]
    };
    create(&cluster, leader, "piped-sink", &sink("60000"));
    wait_for("the first lines through the pipe", FLOW, || arrived(10));

    // The reader goes away: writing to the pipe fails with EPIPE, a retriable I/O error.
    drop(reader);
    append(lines(10, 20));
    let retries = || {
        cluster.metric(
            [leader],
            "kafka_connect_task_error_total_retries",
            &[("connector", "piped-sink")],
        )
    };
    wait_for("three retries of the flush", FLOW, || {
        (retries() >= 3).then_some(())
    });
    let reader = PipeReader::start(&fifo, &out);
    wait_for("the lines held back, once each", FLOW, || arrived(20));
    let retries = retries_logged(&cluster.log_text(leader), "flush");
    assert_eq!(
        retries[..3],
        [(1, 300), (2, 600), (3, 1000)],
        "300 ms doubling, capped by errors.retry.delay.max.ms"
    );
    let status = cluster.json(leader, &["connectors", "status", "piped-sink"]);
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    say(format!(
        "RETRY: a broken pipe retried {} times with backoff {:?} ms, then all 20 lines once",
        retries.len(),
        retries.iter().map(|r| r.1).collect::<Vec<_>>()
    ));

    // With a short errors.retry.timeout the same failure fails the task, with its trace.
    let before = cluster.json(leader, &["connectors", "status", "piped-sink"])["tasks"][0]
        ["generation"]
        .as_u64();
    let short = cluster.connector_file("piped-sink", &sink("2000"));
    cluster.cli(
        leader,
        &[
            "connectors",
            "config",
            "piped-sink",
            "-f",
            &short.to_string_lossy(),
        ],
    );
    wait_for("the sink running its new config", FLOW, || {
        let status = cluster.json(leader, &["connectors", "status", "piped-sink"]);
        (status["tasks"][0]["state"] == "RUNNING"
            && status["tasks"][0]["generation"].as_u64() > before)
            .then_some(())
    });
    drop(reader);
    append(lines(20, 30));
    let trace = failed_trace(
        &cluster,
        leader,
        "piped-sink",
        "the sink FAILED after its retry timeout",
    );
    assert!(trace.contains("errors.retry.timeout"), "{trace}");
    assert!(trace.contains("Broken pipe"), "{trace}");
    assert!(
        trace.contains(&fifo_path),
        "the trace names the file: {trace}"
    );
    // A reader again, and a restart from the CLI: the rest arrives, nothing twice.
    let _reader = PipeReader::start(&fifo, &out);
    cluster.cli(
        leader,
        &[
            "connectors",
            "restart",
            "piped-sink",
            "--include-tasks",
            "--only-failed",
        ],
    );
    wait_for("every line after the restart, once each", FLOW, || {
        arrived(30)
    });
    say(format!(
        "RETRY TIMEOUT: FAILED with {trace:?}; restarted, all 30 lines once"
    ));
}
