import ctypes, os, json, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
def err(): return errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())
D = inputs["D"]
# a secret in the hidden home: the host wrote it there
secret_path = os.path.join(D, "home", "secret")
out["direct"] = os.path.exists(secret_path)
os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)
out["umount_home"] = libc.umount2(os.path.join(D, "home").encode(), 2) == 0 or err()
os.makedirs("mnt", exist_ok=True)
MS_BIND, MS_REC = 4096, 16384
out["bind_root_nonrec"] = libc.mount(b"/", b"mnt", None, MS_BIND, None) == 0 or err()
out["bind_D_nonrec"] = libc.mount(D.encode(), b"mnt", None, MS_BIND, None) == 0 or err()
if out["bind_D_nonrec"] is True:
    out["via_bind"] = os.listdir(os.path.join("mnt", "home"))
# open_tree(OPEN_TREE_CLONE) without AT_RECURSIVE
SYS_open_tree, SYS_move_mount = 428, 429
fd = libc.syscall(SYS_open_tree, -100, D.encode(), 1)  # OPEN_TREE_CLONE
out["open_tree_clone"] = fd if fd < 0 and err() else "fd"
if fd >= 0:
    try: out["open_tree_list"] = os.listdir(f"/proc/self/fd/{fd}/home")
    except OSError as e: out["open_tree_list"] = str(e)
out["proc_mount"] = libc.mount(b"proc", b"mnt", b"proc", 0, None) == 0 or err()
out["sysfs_mount"] = libc.mount(b"sysfs", b"mnt", b"sysfs", 0, None) == 0 or err()
out["tmpfs_mount"] = libc.mount(b"tmpfs", b"mnt", b"tmpfs", 0, None) == 0 or err()
try:
    fd1 = os.open("/proc/1/ns/mnt", os.O_RDONLY); out["setns1"] = libc.setns(fd1, 0) == 0 or err()
except OSError as e: out["setns1"] = str(e)
try: out["proc1_root"] = os.listdir("/proc/1/root")[:3]
except OSError as e: out["proc1_root"] = str(e)
try: out["proc1_environ"] = open("/proc/1/environ").read()[:50]
except OSError as e: out["proc1_environ"] = str(e)
# name_to_handle_at / open_by_handle_at on the hidden home's inode
out["open_by_handle"] = "n/a"
print(json.dumps(out))
