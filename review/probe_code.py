import os, json, ctypes
D, shm, tag = inputs["D"], inputs["shm"], inputs["tag"]
out = {}
def rd(p):
    try: return open(p).read()[:200]
    except Exception as e: return type(e).__name__ + ":" + str(e)
out["shm_secret"] = rd(shm + "/secret")
try:
    open(f"/dev/shm/kgrev-planted-{tag}", "w").write("x"); out["shm_write"] = True
except Exception as e: out["shm_write"] = repr(e)
out["other"] = rd(D + "/other/secret")
out["home_listing"] = os.listdir(os.path.join(D, "home")) if os.path.isdir(os.path.join(D, "home")) else None
out["uid"] = (os.getuid(), os.geteuid())
out["mountinfo"] = open("/proc/self/mountinfo").read()
out["sysrq_w"] = os.access("/proc/sysrq-trigger", os.W_OK)
out["cgroup_w"] = os.access("/sys/fs/cgroup/pids", os.W_OK)
out["usr_local_w"] = os.access("/usr/local/lib", os.W_OK)
out["etc_w"] = os.access("/etc", os.W_OK)
out["proc"] = sorted(os.listdir("/proc"))[:20]
print(json.dumps(out, indent=1))
