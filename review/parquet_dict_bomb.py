"""A Parquet node table whose one 40 MB text value (a dictionary page) is referenced by a million rows (an RLE
run of index 0): the metadata says ~40 MB, a batch of 65,536 rows is 2.6 TB of text."""
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
folder = Path(sys.argv[1]); folder.mkdir(parents=True, exist_ok=True)
n = 1_000_000
text = pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array(["x" * (40 << 20)]))
pq.write_table(pa.table({"id": pa.array([str(i) for i in range(n)]), "text": text}), folder / "nodes.parquet",
               compression="zstd")
pq.write_table(pa.table({"src": ["0"], "relation": ["r"], "dst": ["1"]}), folder / "edges.parquet")
md = pq.ParquetFile(folder / "nodes.parquet").metadata
print((folder / "nodes.parquet").stat().st_size, sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups)))
