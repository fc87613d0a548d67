"""The pure checks behind "files from others are data", value by value (the end-to-end attacks are in
tests/test_shared_files.py and tests/test_checkpoint_serde.py): what a bundle may hold, what a recording may
choose, what a pickle may import and build, what a recording's schema may be, what is a secret in a URL, which
registry rows are the user's own, what a zip's end record may announce, what reaches a terminal."""

from __future__ import annotations

import dataclasses
import json
import pickle
import zipfile
from typing import Literal

import numpy as np
import pytest

from kgagents.cli.recorded import is_plain_model, plain_context, settings_from
from kgagents.core.bundles import BundleLimits, bundle_problems, bundled_name, directory_problems
from kgagents.core.plain_pickle import UnsafePickle, admits, dtype_of, load_plain
from kgagents.core.printable import printable, printable_json, printable_lines
from kgagents.core.redact import is_secret_name, scrub, scrub_text
from kgagents.core.replay import schema_problems
from kgagents.core.runs import kept_context, key_file_problem, row_mark
from kgagents.core.serde import CheckpointRefused, strict_serializer
from kgagents.nodes.kgot import KGoTContext


@pytest.mark.parametrize("name,allowed", [
    ("bundle.json", True), ("results.jsonl", True), ("manifest.json", True), ("report.md", True),
    ("pareto-simpleqa.png", True), ("recording.sqlite", True), ("checkpoints.sqlite", False),
    ("checkpoints.json", False), ("recording.sqlite-wal", False), ("other.sqlite", False), ("node_info.pkl", False),
    ("edge_index.pt", False), ("run.sh", False), (".env", False), ("sub/results.json", False),
    ("../results.json", False), ("/etc/results.json", False), ("results.json/", False), ("a" * 121 + ".json", False),
])
def test_what_a_bundle_may_hold(name, allowed):
    assert bundled_name(name) is allowed


def _info(name: str, size: int, compressed: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.file_size, info.compress_size = size, compressed
    return info


def test_bundle_limits_at_their_edges():
    limits = BundleLimits(max_files=3, max_member_bytes=100, max_total_bytes=150, max_ratio=10, ratio_min_bytes=20)
    assert bundle_problems([_info("a.json", 100, 10), _info("b.json", 50, 5)], limits) == []
    assert bundle_problems([_info("a.json", 101, 20)], limits)  # one byte over the member limit
    assert bundle_problems([_info("a.json", 100, 10), _info("b.json", 51, 6)], limits)  # over the total
    assert bundle_problems([_info("a.json", 21, 2)], limits)  # expands 10.5 times
    assert bundle_problems([_info("a.json", 20, 1)], limits) == []  # small files may expand as they like
    assert bundle_problems([_info("a.json", 21, 0)], limits)  # a size from nothing
    assert bundle_problems([_info(f"{i}.json", 1, 1) for i in range(4)], limits)  # too many files
    assert bundle_problems([_info("a.json", 1, 1), _info("a.json", 1, 1)], limits)  # a name twice
    encrypted = _info("a.json", 1, 1)
    encrypted.flag_bits |= 0x1
    assert bundle_problems([encrypted], limits)


def test_a_recordings_schema():
    ok = [("table", "exchanges", "exchanges"), ("index", "sqlite_autoindex_exchanges_1", "exchanges"),
          ("table", "meta", "meta"), ("index", "sqlite_autoindex_meta_1", "meta")]
    columns = {"exchanges": ["fingerprint", "seq", "node", "request", "model", "reply"], "meta": ["key", "value"]}
    assert schema_problems(ok, columns) == []
    assert schema_problems(ok[:2], columns) == []  # a recording without meta (made from Python)
    assert schema_problems([("view", "meta", "meta"), *ok[:2]], columns)
    assert schema_problems([*ok, ("trigger", "t", "exchanges")], columns)
    assert schema_problems([*ok, ("table", "other", "other")], columns)
    assert schema_problems([*ok, ("index", "sqlite_autoindex_other_1", "other")], columns)
    assert schema_problems(ok, {**columns, "meta": ["key", "value", "extra"]})
    assert schema_problems(ok[2:], columns)  # no exchanges


@pytest.mark.parametrize("model,plain", [
    ("openai:gpt-4o", True), ("anthropic:claude-sonnet-4-5", True), ("ollama:qwen2.5:7b", True),
    ("Qwen/Qwen2.5-7B-Instruct", True), ("gpt-4o", True), ("scripted:/tmp/x.json", False), ("scripted:x", False),
    ("huggingface:gpt2", False), ("qwen2.5:7b", False), ("openai:../x", False), ("/etc/passwd", False),
    ("openai:http://x", False), ("", False), (None, False), (3, False),
])
def test_which_chat_models_a_recording_may_name(model, plain):
    assert is_plain_model(model) is plain


@dataclasses.dataclass(kw_only=True)
class _Toy:
    ROLES = ("judge",)
    model: object = None
    judge_model: object = None
    depth: int = 1
    ratio: float = 0.5
    on: bool = False
    mode: Literal["a", "b"] = "a"
    maybe: int | None = None
    path: str | None = None
    backend: str = "networkx"
    tools: list[str] | None = None
    allow_weak_sandbox: bool | None = None


def test_which_context_values_a_recording_may_carry():
    kept, left = plain_context(_Toy, {
        "model": "openai:gpt-4o", "judge_model": "scripted:/x", "depth": 3, "ratio": 2, "on": True, "mode": "b",
        "maybe": None, "path": "/etc", "backend": "neo4j", "tools": ["web_search"], "allow_weak_sandbox": True,
        "unknown": 1})
    assert kept == {"model": "openai:gpt-4o", "depth": 3, "ratio": 2, "on": True, "mode": "b", "maybe": None,
                    "tools": ["web_search"]}
    assert set(left) == {"judge_model", "path", "backend", "allow_weak_sandbox", "unknown"}
    kept, left = plain_context(_Toy, {"depth": True, "ratio": float("nan"), "on": 1, "mode": "c", "maybe": "1",
                                      "backend": "networkx", "tools": "web_search", "depth2": 1})
    assert kept == {"backend": "networkx"} and "depth" in left and "mode" in left and "tools" in left


def test_settings_from_a_recording():
    contexts = {"kgot": KGoTContext}
    settings = settings_from("eval", "kgot", {"dataset": "simpleqa", "split": "../../etc", "limit": -1, "runs": 2,
                                              "data": "/x", "ids": ["a", "b"], "processes": 64},
                             {"solve_mode": "direct", "kg_url": "bolt://u:pw@h:7687", "work_dir": "/"}, contexts,
                             users={"checkpointer": "postgresql://u:pw@h/db"})
    assert settings.options == {"dataset": "simpleqa", "runs": 2, "ids": ["a", "b"]}
    assert settings.context == {"solve_mode": "direct"}
    assert set(settings.left_out) == {"split", "limit", "data", "processes", "kg_url", "work_dir", "checkpointer"}
    assert "pw" not in str(settings.as_json())
    with pytest.raises(ValueError, match="not one of kgagents' workflows"):
        settings_from("eval", "evil", {}, {}, contexts)
    with pytest.raises(ValueError, match="not by `kgagents ask` or `kgagents eval`"):
        settings_from("graph", "kgot", {}, {}, contexts)


def test_plain_pickles_load_and_others_are_refused(tmp_path):
    value = {0: {"s": np.str_("a"), "i": np.int64(3), "a": np.arange(3), "o": np.array(["x", None], dtype=object),
                 "set": {1}, "b": b"x"}}
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        (tmp_path / "p.pkl").write_bytes(pickle.dumps(value, protocol=protocol))
        loaded = load_plain(tmp_path / "p.pkl")
        assert loaded[0]["s"] == "a" and list(loaded[0]["a"]) == [0, 1, 2] and loaded[0]["set"] == {1}
    (tmp_path / "e.pkl").write_bytes(pickle.dumps({"x": pickle.loads}))
    with pytest.raises(UnsafePickle, match=r"e\.pkl asks to load _pickle\.loads"):
        load_plain(tmp_path / "e.pkl")
    assert admits("numpy", "dtype") and admits("__builtin__", "set")
    assert not admits("builtins", "eval") and not admits("os", "system") and not admits("numpy", "load")


@pytest.mark.parametrize("text,clean", [
    ("postgresql://user:pa:ss@w@host:5432/db", "postgresql://host:5432/db"),
    ("--checkpointer=postgresql://u:p@h/db", "--checkpointer=postgresql://h/db"),
    ("kg_url=bolt://neo4j:secret@localhost:7687", "kg_url=bolt://localhost:7687"),
    ("https://token@github.com/x", "https://github.com/x"),
    ("http://host/v1?api_key=abc&q=1", "http://host/v1?api_key=REMOVED&q=REMOVED"),
    ("postgresql://h/db?sslmode=require&password=x", "postgresql://h/db?sslmode=require&password=REMOVED"),
    ("see http://a:b@c and https://d:e@f/g", "see http://c and https://f/g"),
    ("bolt://localhost:7687", "bolt://localhost:7687"), ("oxigraph:/dir", "oxigraph:/dir"), ("a@b.c", "a@b.c"),
])
def test_credentials_leave_urls(text, clean):
    assert scrub_text(text) == clean


@pytest.mark.parametrize("url", [
    "https://apim.example.net/openai/v1?subscription-key=SECRET1",  # Azure API Management
    "https://func.example.net/api/v1?code=SECRET1",  # Azure Functions' function key
    "https://llm.example.net/v1?auth_key=SECRET1",
    "https://llm.example.net/v1?private_key=SECRET1",
    "https://llm.example.net/v1?x=1&whatever-it-is-called=SECRET1#frag",
    "https://llm.example.net/v1?SECRET1",
    "https://llm.example.net/v1#access_token=SECRET1",
    "request: ChatOpenAI(openai_api_base='https://apim.example.net/v1?subscription-key=SECRET1', model='m')",
])
def test_a_recorded_base_url_keeps_no_key(url):
    """The ``base_url`` of an OpenAI-compatible server is in every recorded request and in the left-out settings
    of recordings, manifests and bundles: a key there has any name, so every query value goes, but the harmless
    settings'."""
    assert "SECRET1" not in scrub_text(url) and "SECRET1" not in str(scrub({"base_url": url}))
    assert scrub_text("https://h/openai?api-version=2024-06-01&sslmode=require") == \
        "https://h/openai?api-version=2024-06-01&sslmode=require"


def test_secret_fields_leave_mappings():
    assert [is_secret_name(n) for n in ("api_key", "OPENAI_API_KEY", "NEO4J_PASSWORD", "token", "client_secret",
                                        "budget_tokens", "max_tokens", "kg_url", "keys")] == [
        True, True, True, True, True, False, False, False, False]
    assert scrub({"api_key": "k", "models": {"base_url": "http://u:p@h/v1"}, "runs": [1, "x://a:b@c"]}) == {
        "models": {"base_url": "http://h/v1"}, "runs": [1, "x://c"]}


def test_the_strict_serializer_reads_what_kgagents_writes_and_refuses_the_rest():
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = strict_serializer("runs/checkpoints.sqlite")
    state = {"messages": [HumanMessage("q"), AIMessage("a")], "kg": {"nodes": [1, 2]}, "n": 3.5, "s": {1, 2}}
    assert serde.loads_typed(serde.dumps_typed(state)) == state
    evil = JsonPlusSerializer().dumps_typed({"x": {"y": [1, _ext("os", "system", "true")]}})
    with pytest.raises(CheckpointRefused, match=r"runs/checkpoints\.sqlite holds a value of type os\.system"):
        serde.loads_typed(evil)
    with pytest.raises(CheckpointRefused, match="'pickle'"):
        serde.loads_typed(("pickle", pickle.dumps(1)))
    with pytest.raises(CheckpointRefused, match="cannot read"):
        serde.loads_typed(("msgpack", b"\xc1"))


def _ext(module: str, name: str, argument: object) -> object:
    import ormsgpack

    return ormsgpack.Ext(0, ormsgpack.packb((module, name, argument)))


@pytest.mark.parametrize("name,state,ok", [
    ("f8", (3, "<", None, None, None, -1, -1, 0), True),
    ("i4", (3, ">", None, None, None, -1, -1, 0), True),
    ("U3", (3, "<", None, None, None, 12, 4, 8), True),
    ("S4", (3, "|", None, None, None, 4, 1, 0), True),
    ("O8", (3, "|", None, None, None, -1, -1, 63), True),
    ("O8", (3, "|", None, None, None, -1, -1, 0), True),  # the flags are never read: NumPy derives them again
    ("b1", None, True),
    ("V8", (3, "|", None, ("a",), {"a": ("O", 0)}, 8, 1, 0), False),
    ("f8", (3, "|", None, ("a",), {"a": ("O", 0)}, 8, 1, 0), False),
    ("f8", (3, "<", ((), (2,)), None, None, -1, -1, 0), False),
    ("U3", (3, "<", None, None, None, 400, 4, 8), False),
    ("M8", (4, "<", None, None, None, -1, -1, 0, (None, (b"s", 1, 1, 1))), False),
    ("(2,)f8", None, False), ("f8,O", None, False), ("O4", None, False), (3, None, False),
])
def test_which_numpy_dtypes_a_plain_pickle_may_describe(name, state, ok):
    from kgagents.core.plain_pickle import _Refused

    if ok:
        dtype = dtype_of(name, state)
        assert dtype.names is None and dtype.subdtype is None and dtype.hasobject == (name[0] == "O")
    else:
        with pytest.raises(_Refused):
            dtype_of(name, state)


def test_plain_pickles_keep_numpy_arrays_and_scalars_as_values(tmp_path):
    value = {"c": np.arange(6).reshape(2, 3), "f": np.asfortranarray(np.arange(6).reshape(2, 3)),
             "u": np.array(["ab", "c"]), "o": np.array([np.arange(2), None], dtype=object),
             "be": np.arange(3, dtype=">i4"), "scalars": [np.float64(1.5), np.int32(7), np.str_("é"), np.bool_(True)],
             "empty": b"", "ba": bytearray(b"x")}
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        (tmp_path / "p.pkl").write_bytes(pickle.dumps(value, protocol=protocol))
        loaded = load_plain(tmp_path / "p.pkl")
        for key in ("c", "f", "u", "be"):
            assert type(loaded[key]) is np.ndarray and loaded[key].dtype == value[key].dtype
            assert (loaded[key] == value[key]).all()
        assert list(loaded["o"][0]) == [0, 1] and loaded["o"][1] is None
        assert loaded["scalars"] == [1.5, 7, "é", True] and [type(x) for x in loaded["scalars"]] == [
            float, int, str, bool]
        assert loaded["empty"] == b"" and loaded["ba"] == bytearray(b"x")
    (tmp_path / "t.pkl").write_bytes(b"\x80\x04\x95")  # cut short
    with pytest.raises(UnsafePickle, match=r"t\.pkl is not a readable plain-data pickle"):
        load_plain(tmp_path / "t.pkl")


class _Reduce:
    def __init__(self, *reduced):
        self.reduced = reduced

    def __reduce__(self):
        return self.reduced


def test_numpy_values_a_plain_pickle_cannot_build(tmp_path):
    """What NumPy's reconstructors would be handed by a crafted pickle, refused by this loader's own constructors
    (never passed to NumPy) with the file's name: an object scalar from bytes, an object array from bytes, a bytes
    or bytearray of a size, bytes in another encoding."""
    from numpy._core.multiarray import _reconstruct, scalar

    array = _Reduce(_reconstruct, (np.ndarray, (0,), b"b"), (1, (1,), np.dtype("O"), False, b"A" * 8))
    for value in (_Reduce(scalar, (np.dtype("O"), b"A" * 8)), array, _Reduce(bytearray, (1 << 20,)),
                  _Reduce(bytes, (1 << 20,)), _Reduce(bytearray, ("x", "utf-16"))):
        (tmp_path / "x.pkl").write_bytes(pickle.dumps({0: value}, protocol=4))
        with pytest.raises(UnsafePickle, match=r"x\.pkl "):
            load_plain(tmp_path / "x.pkl")


def test_a_zips_end_record_limits_what_is_read():
    limits = BundleLimits()
    assert directory_problems(64, 64 * 1024, limits) == []
    assert directory_problems(65, 100, limits) == ["it announces 65 files; the limit is 64"]
    assert "its directory takes 65537 bytes" in directory_problems(3, 65537, limits)[0]


def test_which_registry_rows_are_the_users_own(tmp_path):
    key, other = b"k" * 32, b"o" * 32
    mark = row_mark(key, "t1", "kgot", {"temperature": 0.5}, [], None)
    assert mark == row_mark(key, "t1", "kgot", {"temperature": 0.5}, [], None)
    assert mark != row_mark(other, "t1", "kgot", {"temperature": 0.5}, [], None)
    assert mark != row_mark(key, "t1", "kgot", {"temperature": 0.5, "base_url": "http://x"}, [], None)
    assert mark != row_mark(key, "t1", "kgot", {"temperature": 0.5}, [], "postgresql://x/db")
    path = tmp_path / "runs.key"
    path.write_bytes(key)
    path.chmod(0o600)
    assert key_file_problem(path.stat(), 32) is None
    path.chmod(0o644)
    assert "others may read" in key_file_problem(path.stat(), 32)
    assert "bytes" in key_file_problem(path.stat(), 31)
    assert kept_context({"kg_url": "bolt://u:p@h", "token": "t", "model": "m", "base_url": "https://h/v1?k=v"}) == (
        {"model": "m"}, ["base_url", "kg_url", "token"])


def test_text_for_a_terminal_or_a_report():
    assert printable("q \x1b]52;c;eA==\x07 \u202e\n") == "q \\x1b]52;c;eA==\\x07 \\u202e\\n"
    assert printable("plain é 名") == "plain é 名"
    assert printable_lines("a\nb\x1b") == "a\nb\\x1b"
    text = printable_json('{\n  "a": "\x9b\u202e é"\n}')
    assert "\x9b" not in text and "\u202e" not in text and json.loads(text) == {"a": "\x9b\u202e é"}
