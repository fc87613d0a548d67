import asyncio, os, sys, tempfile, shutil
from pathlib import Path
from kgagents.tools import sandbox as sb
sb._find_bwrap = lambda: None
D = Path(tempfile.mkdtemp(prefix="kgrev-reg-"))
try:
    box = sb.Sandbox(D / "w", sb.SandboxLimits(timeout_s=5, cpu_s=1, memory_mb=256, max_file_mb=1), allow_weak=True)
    cases = {
        "cpu": "while True: pass",
        "mem": "x = bytearray(10**9)",
        "fsize": "open('big', 'wb').write(b'x' * (2 << 20))",
        "fsize_tmp": "open('/tmp/big', 'wb').write(b'x' * (2 << 20))",
        "exit3": "import sys; sys.exit(3)",
        "os_exit": "import os; os._exit(0)",
        "kill_self": "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
        "sleep_timeout": "import time; time.sleep(60)",
        "setsid_sleep": "import os, time; os.setsid(); time.sleep(60)",
        "write_ok": "open('mine.txt','w').write('hi'); result = sorted(os.listdir('.')) if False else 1",
        "print_flood": "import sys\nwhile True: sys.stdout.write('x'*65536)",
        "threads": "import threading, time\nts=[threading.Thread(target=time.sleep, args=(1,)) for _ in range(100)]\n[t.start() for t in ts]",
        "fork": "import os; os.fork()",
        "unshare_again": "import os; os.unshare(os.CLONE_NEWUSER|os.CLONE_NEWNS); result = 'unshared'",
    }
    for name, code in cases.items():
        r = box.run_sync(code)
        print(f"{name:14} ok={r.ok} timed_out={r.timed_out} exit={r.exit_code} dur={r.duration_s} error={str(r.error)[:150]!r} result={r.result!r}")
    print("host sees mine.txt:", (D / "w" / "mine.txt").read_text())
    print("left in .sandbox:", list((D / "w").rglob(".sandbox/*")))
finally:
    shutil.rmtree(D, ignore_errors=True)
