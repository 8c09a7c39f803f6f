"""Print every row of the given Parquet files as one JSON line each, with its file and the
file's compression: an independent reader (pyarrow) of what Ferry wrote."""
import json
import sys

import pyarrow.parquet as pq

for path in sys.argv[1:]:
    meta = pq.ParquetFile(path).metadata
    codec = meta.row_group(0).column(0).compression if meta.num_row_groups else None
    for row in pq.read_table(path).to_pylist():
        print(json.dumps({"file": path, "codec": codec, "record": row}, default=str))
