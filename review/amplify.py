"""Graph files within every import limit (no line over 64 MB, documents under 256 MB, gzip within the ratio)
whose parse takes the import past a 1 GB address space. Prints each outcome and the child's peak RSS."""
import gzip, json, os, resource, subprocess, sys
from pathlib import Path

MB = 1 << 20
root = Path(sys.argv[1]); root.mkdir(parents=True, exist_ok=True)

def gz(path, data: bytes):
    with gzip.open(path, "wb", 9) as f:
        f.write(data)
    return path

def two_char_strings(n_bytes):
    # "aa","ab",... : every element a new 2-char str object (~51 bytes + an 8-byte slot) from 5 bytes of text
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    pairs = [a + b for a in alphabet for b in alphabet]
    out, size, i = [], 0, 0
    while size < n_bytes:
        s = '"' + pairs[i % len(pairs)] + '",'; out.append(s); size += len(s); i += 1
    return "".join(out)[:-1]

cases = {}
# ARK-V1 document, plain, 60 MB (< 256 MB max_document_mb): a list of empty lists, parsed whole
p = root / "ark.json"; p.write_text("[" + ",".join(["[]"] * (20 * MB)) + "]"); cases["ARK-V1 JSON, 60 MB of []"] = (p, "ark")
# CRAG calls, plain, 60 MB
p = root / "crag.json"; p.write_text('{"calls": [' + ",".join(["{}"] * (20 * MB)) + "]}"); cases["CRAG calls, 60 MB of {}"] = (p, "crag")
# TSV triples .gz, one line of 60 MB (< 64 MB max_record_mb; < 64 MB ratio floor): tabs
p = gz(root / "tabs.tsv.gz", b"h\tr\tt" + b"\t" * (60 * MB) + b"\n"); cases["TSV .gz, one 60 MB line of tabs"] = (p, "triples")
# CSV triples .gz, a row of commas spread over 60 lines of 1 MB, joined by quoted newlines
line = b"," * MB
p = gz(root / "commas.csv.gz", b"h,r,t" + b'"\n"'.join([line] * 60) + b"\n"); cases["CSV .gz, one row over 60 lines of commas"] = (p, "triples")
# JSON-lines triples .gz, one 60 MB line: a qualifier list of 2-character strings
p = gz(root / "strings.jsonl.gz", ('["h", "r", "t", {"q": [' + two_char_strings(60 * MB) + ']}]\n').encode()); cases["JSON lines .gz, one 60 MB line of short strings"] = (p, "triples")

script = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from kgagents.cli import main
sys.exit(main(["graph", "import", sys.argv[1], "--format", sys.argv[2], "--to", sys.argv[3], "--quiet"]))
"""
env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
for i, (name, (path, fmt)) in enumerate(cases.items()):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([sys.executable, "-c", script, str(path), fmt, str(root / f"out{i}")],
                          capture_output=True, text=True, timeout=600, env=env)
    tail = (done.stderr.strip().splitlines() or [""])[-1][:160]
    print(f"{name:50} {path.stat().st_size / MB:7.2f} MB on disk  rc={done.returncode:4}  "
          f"traceback={'Traceback' in done.stderr}  last: {tail}")
