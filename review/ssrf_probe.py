import asyncio, os, sys
sys.path.insert(0, os.getcwd())
from tests.tools.test_url_guard import RecordingProxy
from kgagents.tools.http import fetch, FetchError, TransientFetchError
import httpx

URLS = sys.argv[1:] or [
 "http://0127.0.0.1/", "http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://0x7f.1/",
 "http://[::ffff:7f00:1]/", "http://[::7f00:1]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[2002:7f00:1::]/",
 "http://[2002:a9fe:a9fe::]/", "http://[64:ff9b::a00:5]/", "http://[::ffff:0:a9fe:a9fe]/",
 "http://localhost./", "http://LOCALHOST/", "http://a@127.0.0.1/", "http://127.0.0.1#@example.com/",
 "http://ｌｏｃａｌｈｏｓｔ/", "http://127。0。0。1/", "http://①②⑦.⓪.⓪.①/", "http://169.254.169.254./",
 "http://metadata.google.internal/", "http://xn--fa-hia.invalid/", "http://faß.invalid/",
 "http://0.0.0.0/", "http://[::]/", "http://%31%32%37.0.0.1/", "http://127.0.0.1%09/",
 "http://[fe80::1%25eth0]/", "http://example.com:80@127.0.0.1/",
]

async def main():
    p = RecordingProxy()
    for k in ("HTTP_PROXY","HTTPS_PROXY","ALL_PROXY","NO_PROXY","http_proxy","https_proxy","all_proxy","no_proxy"):
        os.environ.pop(k, None)
    os.environ["HTTP_PROXY"] = p.url; os.environ["HTTPS_PROXY"] = p.url
    for u in URLS:
        n = len(p.requests)
        try:
            h = httpx.URL(u); parsed = (h.host, h.raw_host)
        except Exception as e:
            parsed = repr(e)
        try:
            r = await fetch(u)
            res = f"FETCHED {r.content[:20]!r}"
        except (FetchError, TransientFetchError) as e:
            res = type(e).__name__ + ": " + str(e)[:110]
        except Exception as e:
            res = "UNEXPECTED " + repr(e)[:200]
        print(f"{u!r:45} {parsed!s:50} -> {res} | proxy got {p.requests[n:]}")
    p.stop()
asyncio.run(main())
