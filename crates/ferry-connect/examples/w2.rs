use ferry_connect::converter::json::JsonConverter;
use ferry_connect::transform::Chain;
use ferry_connect::{Converter, SinkRecord, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;
fn main() {
    let c = JsonConverter::default();
    let mut cfg = BTreeMap::new();
    for (k, v) in [
        ("transforms", "createKey,extractKey"),
        (
            "transforms.createKey.type",
            "org.apache.kafka.connect.transforms.ValueToKey",
        ),
        ("transforms.createKey.fields", "user_id"),
        (
            "transforms.extractKey.type",
            "org.apache.kafka.connect.transforms.ExtractField$Key",
        ),
        ("transforms.extractKey.field", "user_id"),
    ] {
        cfg.insert(k.to_string(), v.to_string());
    }
    let chain = Chain::from_config(&cfg).unwrap();
    let recs: Vec<String> = (0..1000).map(|i| { let id = 1_000_000_000 + i as i64; let user = format!("user{:04}", i % 1000); let item = "x".repeat(800);
        format!(r#"{{"schema":{{"type":"struct","fields":[{{"type":"int64","optional":false,"field":"id"}},{{"type":"string","optional":true,"field":"user_id"}},{{"type":"string","optional":true,"field":"item"}}],"optional":false,"name":"bench"}},"payload":{{"id":{id},"user_id":"{user}","item":"{item}"}}}}"#)}).collect();
    let mut out = Vec::with_capacity(1 << 20);
    for round in 0..5 {
        let (mut d, mut t, mut f) = (0.0, 0.0, 0.0);
        let n = 500_000;
        for i in 0..n {
            let a = Instant::now();
            let sv = c.decode("t", Some(recs[i % 1000].as_bytes())).unwrap();
            let b = Instant::now();
            let mut r = SinkRecord {
                topic: "t".into(),
                partition: 0,
                offset: i as i64,
                timestamp: None,
                key_schema: None,
                key: Value::Null,
                value_schema: sv.schema,
                value: sv.value,
                headers: Vec::new(),
            };
            chain.apply(&mut r).unwrap();
            let cc = Instant::now();
            writeln!(out, "{}", r.value).unwrap();
            if out.len() > 1 << 20 {
                out.clear();
            }
            let e = Instant::now();
            d += (b - a).as_secs_f64();
            t += (cc - b).as_secs_f64();
            f += (e - cc).as_secs_f64();
        }
        println!(
            "round {round}: decode {:.0} ns, chain {:.0} ns, format {:.0} ns",
            d * 1e9 / n as f64,
            t * 1e9 / n as f64,
            f * 1e9 / n as f64
        );
    }
}
