"""Produce records whose values are given as hex (any bytes, UTF-8 or not) with confluent-kafka,
an independent client, and wait until every one is acknowledged."""
import sys

from confluent_kafka import Producer

bootstrap, topic, values = sys.argv[1], sys.argv[2], sys.argv[3:]
producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
failures = []
for value in values:
    producer.produce(topic, bytes.fromhex(value),
                     on_delivery=lambda err, msg: err and failures.append(str(err)))
if producer.flush(30) != 0 or failures:
    raise SystemExit(f"not every record was acknowledged: {failures}")
