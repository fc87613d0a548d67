import os, sys, tempfile, shutil
from pathlib import Path
from kgagents.tools import sandbox as sb
sb._find_bwrap = lambda: None
D = Path(tempfile.mkdtemp(prefix="kgrev-esc-", dir="/srv"))
try:
    (D / "home").mkdir(); (D / "home" / "secret").write_text("S")
    os.environ["HOME"] = str(D / "home")
    box = sb.Sandbox(D / "w", sb.SandboxLimits(timeout_s=10), allow_weak=True)
    r = box.run_sync(open(sys.argv[1]).read(), inputs={"D": str(D)})
    print(r.ok, r.error, r.stdout)
finally:
    shutil.rmtree(D, ignore_errors=True)
