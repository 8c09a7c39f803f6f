"""Read every record of a topic with confluent-kafka (an independent client) and print them as
JSON lines: {"key", "value", "headers": {name: value}} with bytes decoded as UTF-8."""
import json
import sys

from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ferry-test-reader",
                     "enable.auto.commit": False})
metadata = consumer.list_topics(topic, timeout=10)
partitions = [TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions]
consumer.assign(partitions)
text = lambda b: None if b is None else b.decode("utf-8", "replace")
seen = 0
empty_polls = 0
while seen < expected and empty_polls < 20:
    msg = consumer.poll(0.5)
    if msg is None:
        empty_polls += 1
        continue
    if msg.error():
        raise SystemExit(f"consume error: {msg.error()}")
    headers = {k: text(v) for k, v in (msg.headers() or [])}
    print(json.dumps({"partition": msg.partition(), "offset": msg.offset(),
                      "key": text(msg.key()), "value": text(msg.value()), "headers": headers}))
    seen += 1
consumer.close()
