//! Taking a pipeline over from Kafka Connect: Apache Kafka Connect runs a FileStreamSource →
//! topic → FileStreamSink pipeline and stops; Ferry creates both connectors under the same
//! names and goes on — the source from the offsets Kafka Connect left in its offsets topic,
//! the sink from the `connect-<name>` group's — so that every line reaches a sink file
//! exactly once.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_tests::connect::KafkaConnect;
use ferry_tests::pipeline::{create, started};
use ferry_tests::{say, wait_for, Kafka, Settings};
use serde_json::{json, Value};

const FLOW: Duration = Duration::from_secs(120);
const STRING: &str = "org.apache.kafka.connect.storage.StringConverter";

fn numbered(from: usize, to: usize) -> String {
    (from..to).map(|i| format!("line-{i:05}\n")).collect()
}

fn read_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn ferry_takes_a_file_pipeline_over_from_kafka_connect_without_a_line_twice_or_lost() {
    let kafka = Kafka::start(&[("lines", 2)]);
    let work = tempfile::tempdir().expect("a work dir");
    let input = work.path().join("input.txt");
    std::fs::write(&input, numbered(0, 1000)).expect("the input");
    let kc_out = work.path().join("kafka-connect.out");
    let input_path = input.to_string_lossy().to_string();
    let source = [
        ("connector.class", "FileStreamSource"),
        ("file", input_path.as_str()),
        ("topic", "lines"),
        ("key.converter", STRING),
        ("value.converter", STRING),
    ];
    let sink = |file: &str| {
        vec![
            ("connector.class".to_string(), "FileStreamSink".to_string()),
            ("topics".to_string(), "lines".to_string()),
            ("tasks.max".to_string(), "2".to_string()),
            ("file".to_string(), file.to_string()),
            ("key.converter".to_string(), STRING.to_string()),
            ("value.converter".to_string(), STRING.to_string()),
        ]
    };

    // Kafka Connect runs the pipeline.
    let mut connect = KafkaConnect::start(
        &kafka.bootstrap,
        "connect-migrate",
        1,
        &[("offset.flush.interval.ms", "500")],
    );
    let as_json = |pairs: Vec<(String, String)>| -> Value {
        Value::Object(
            pairs
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        )
    };
    let source_json = as_json(
        source
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    for (name, config) in [
        ("lines-source", source_json),
        ("lines-sink", as_json(sink(&kc_out.to_string_lossy()))),
    ] {
        let (status, body) = connect.call(
            "POST",
            "/connectors",
            Some(&json!({"name": name, "config": config})),
        );
        assert_eq!(status, 201, "{body}");
    }
    wait_for(
        "Kafka Connect's sink to write the first 1000 lines",
        FLOW,
        || (read_lines(&kc_out).len() >= 1000).then_some(()),
    );
    // Its offsets, as its own KIP-875 endpoint reports them: the source at the end of the
    // file, the sink past every record.
    let input_len = std::fs::metadata(&input).expect("the input").len();
    wait_for("Kafka Connect's offsets flushed", FLOW, || {
        let (_, source) = connect.call("GET", "/connectors/lines-source/offsets", None);
        let (_, sink) = connect.call("GET", "/connectors/lines-sink/offsets", None);
        let position = source["offsets"][0]["offset"]["position"].as_u64()?;
        let consumed: u64 = sink["offsets"]
            .as_array()?
            .iter()
            .filter_map(|o| o["offset"]["kafka_offset"].as_u64())
            .sum();
        (position == input_len && consumed == 1000).then_some(())
    });
    connect.stop();
    say("TAKEOVER: Kafka Connect wrote 1000 lines and stopped");

    // Lines written while nothing runs, then Ferry takes both connectors over by name.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .expect("the input");
    std::io::Write::write_all(&mut file, numbered(1000, 1500).as_bytes()).expect("more lines");
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let mut ferry_source: Vec<(&str, &str)> = source.to_vec();
    ferry_source.push(("offsets.storage.topic", "connect-migrate-offsets"));
    create(&cluster, leader, "lines-source", &ferry_source);
    let ferry_sink = sink("ferry.out");
    let ferry_sink: Vec<(&str, &str)> = ferry_sink
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    create(&cluster, leader, "lines-sink", &ferry_sink);
    let ferry_out = cluster.node(1).work_dir.join("ferry.out");
    wait_for("Ferry's sink to write the 500 new lines", FLOW, || {
        (read_lines(&ferry_out).len() >= 500).then_some(())
    });
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for line in read_lines(&kc_out)
        .into_iter()
        .chain(read_lines(&ferry_out))
    {
        *seen.entry(line).or_default() += 1;
    }
    let want: Vec<String> = numbered(0, 1500).lines().map(str::to_string).collect();
    let twice: Vec<&String> = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(l, _)| l)
        .collect();
    let lost: Vec<&String> = want.iter().filter(|l| !seen.contains_key(*l)).collect();
    assert!(
        twice.is_empty() && lost.is_empty() && seen.len() == want.len(),
        "{} lines twice (first {:?}), {} lost (first {:?})",
        twice.len(),
        twice.first(),
        lost.len(),
        lost.first()
    );
    assert!(cluster
        .log_text(1)
        .contains("no offsets in Ferry: starting from Kafka Connect's"));
    say(format!(
        "TAKEOVER: Kafka Connect wrote 1000 lines, Ferry the {} after them; each of the 1500 once",
        read_lines(&ferry_out).len()
    ));
}
