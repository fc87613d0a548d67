"""Exploration: what a weak-mode call sees. Everything outside is made in a folder under /srv created here."""
import json, os, sys, tempfile, uuid, shutil
from pathlib import Path
from kgagents.tools import sandbox as sb
sb._find_bwrap = lambda: None

D = Path(tempfile.mkdtemp(prefix="kgrev-", dir="/srv"))
tag = uuid.uuid4().hex
shm_dir = Path("/dev/shm") / f"kgrev-{tag}"
try:
    home, proj, data = D / "home", D / "proj", D / "data"
    for f in (home, proj, data):
        f.mkdir()
    os.environ["HOME"] = str(home)
    os.environ["KGAGENTS_HOME"] = str(data)
    os.chdir(proj)
    shm_dir.mkdir(mode=0o700)
    (shm_dir / "secret").write_text("SHM-SECRET")
    (D / "other").mkdir(); (D / "other" / "secret").write_text("OTHER-SECRET")
    work = data / "runs" / "r1" / "python"
    box = sb.Sandbox(work, sb.SandboxLimits(timeout_s=20), allow_weak=True)
    code = sys.argv[1] if len(sys.argv) > 1 else open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe_code.py")).read()
    r = box.run_sync(code, inputs={"D": str(D), "shm": str(shm_dir), "tag": tag})
    print("ok", r.ok, "error", r.error)
    print(r.stdout[-6000:])
    print("stderr", r.stderr[-3000:])
    print("host /dev/shm now:", [p for p in os.listdir("/dev/shm") if tag in p])
finally:
    for p in Path("/dev/shm").iterdir():
        if tag in p.name:
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
    shutil.rmtree(D, ignore_errors=True)
