"""Print every record of the given Avro container files as one JSON line each, with its file
and the file's writer schema: an independent reader (fastavro) of what Ferry wrote."""
import json
import sys

import fastavro

for path in sys.argv[1:]:
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        schema = reader.writer_schema
        codec = reader.codec
        for record in reader:
            print(json.dumps({"file": path, "codec": codec, "schema": schema, "record": record}, default=str))
