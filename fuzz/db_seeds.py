#!/usr/bin/env python3
"""Seeds for the database fuzz targets (opencode, goose, cursor; see
fuzz/src/db.rs for the input's lines) from the real column values of the
fixture databases that ../shared/samples/<agent>/make_fixture.py builds.

Usage: db_seeds.py SAMPLES_DIR CORPUS_DIR   (called by fuzz/seed.sh)

For each agent: the whole database as one version (at most 40 rows), each
session alone, and two versions: the first half of the rows then all of
them (rows added), and (OpenCode) the assistant messages before they were
complete then as they are (a message filled in after it was first seen).
Files are named by their SHA-1: running it again adds nothing twice.
"""
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

MAX = 40
REWRITE = b"\n--\n"


def save(out, data):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def b(v):
    if v is None:
        return b"\x01"
    if isinstance(v, bytes):
        return b"\x02" + v
    return str(v).encode()


def lines(rows):
    return b"\n".join(rows[:MAX])


def versions(out, rows):
    save(out, lines(rows))
    if len(rows) > 2:
        half = rows[: len(rows) // 2]
        save(out, lines(half) + REWRITE + lines(rows))
        save(out, lines(rows) + REWRITE + lines(half))


def make(samples, agent, tmp):
    d = os.path.join(tmp, agent)
    subprocess.run([sys.executable, os.path.join(samples, agent, "make_fixture.py"), d],
                   check=True, stdout=subprocess.DEVNULL)
    return d


def opencode(samples, out, tmp):
    d = make(samples, "opencode", tmp)
    db = sqlite3.connect(os.path.join(d, "opencode.db"))
    first = None
    rows, early, by_session = [], [], {}
    for mid, sid, data in db.execute(
            "SELECT id, session_id, data FROM message ORDER BY time_created, id"):
        first = first or sid
        tag = b"m" if sid == first else b"n"
        msg = [tag + b(data)]
        parts = [b"p" + b(p) for (p,) in db.execute(
            "SELECT data FROM part WHERE message_id = ? ORDER BY time_created, id", (mid,))]
        rows += msg + parts
        by_session.setdefault(sid, []).extend([b"m" + b(data)] + parts)
        # The message as OpenCode inserts it first: not complete, no parts.
        try:
            j = json.loads(data)
        except ValueError:
            j = None
        if isinstance(j, dict) and j.get("role") == "assistant":
            j.get("time", {}).pop("completed", None)
            j["tokens"] = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
            early += [tag + json.dumps(j).encode()]
        else:
            early += msg + parts
    versions(out, rows)
    save(out, lines(early) + REWRITE + lines(rows))
    for s in by_session.values():
        save(out, lines(s))


def goose(samples, out, tmp):
    d = make(samples, "goose", tmp)
    db = sqlite3.connect(os.path.join(d, "sessions", "sessions.db"))
    sessions = [s for (s,) in db.execute("SELECT id FROM sessions ORDER BY created_at, id")]
    rows = []
    for i, sid in enumerate(sessions[:2]):
        for role, content, created, meta in db.execute(
                "SELECT role, content_json, created_timestamp, metadata_json FROM messages "
                "WHERE session_id = ? ORDER BY created_timestamp, id", (sid,)):
            tag = {"user": b"u", "assistant": b"a"}.get(role)
            if tag is None:
                rows.append(b"r" + b(role) + b"\t" + b(content))
            else:
                rows.append((tag if i == 0 else tag.upper()) + b(content))
            rows.append(b"t" + b(created))
            if meta is not None:
                rows.append(b"x" + b(meta))
        for r in db.execute(
                "SELECT created_timestamp, model, input_tokens, output_tokens, total_tokens, "
                "cache_read_tokens, cache_write_tokens, cost, cost_source FROM usage_ledger "
                "WHERE session_id = ? ORDER BY id", (sid,)):
            rows.append((b"l" if i == 0 else b"L") + b"\t".join(b(v) for v in r))
        for r in db.execute(
                "SELECT accumulated_input_tokens, accumulated_output_tokens, "
                "accumulated_cache_read_tokens, accumulated_cache_write_tokens, "
                "accumulated_total_tokens, accumulated_cost, updated_at, model_config_json, "
                "working_dir FROM sessions WHERE id = ?", (sid,)):
            rows.append((b"s" if i == 0 else b"S") + b"\t".join(b(v) for v in r))
    versions(out, rows)
    # A compaction: the conversation inserted again.
    save(out, lines(rows) + REWRITE + b"R\n" + lines(rows))


def cursor(samples, out, tmp):
    d = make(samples, "cursor", tmp)
    user = os.path.join(d, ".config", "Cursor", "User")
    db = sqlite3.connect(os.path.join(user, "globalStorage", "state.vscdb"))
    kv = list(db.execute("SELECT key, value FROM cursorDiskKV ORDER BY rowid"))
    rows = []
    for key, value in kv:
        if key.startswith("composerData:"):
            cid = key[len("composerData:"):]
            rows.append(b"c" + b(value))
            for k, v in kv:
                if k.startswith("bubbleId:%s:" % cid):
                    rows.append(b"b" + b(v))
    for key, value in db.execute("SELECT key, value FROM ItemTable WHERE key NOT LIKE 'cursorAuth/%'"):
        rows.append(b"i" + key.encode() + b"\t" + b(value))
    ws = os.path.join(user, "workspaceStorage")
    for w in sorted(os.listdir(ws)):
        wdb = sqlite3.connect(os.path.join(ws, w, "state.vscdb"))
        for (v,) in wdb.execute("SELECT value FROM ItemTable WHERE key = 'composer.composerData'"):
            rows.append(b"w" + b(v))
    versions(out, rows)
    # The first composer generating, then done.
    gen = [r.replace(b'"status": "completed"', b'"status": "generating"', 1) for r in rows]
    save(out, lines(gen) + REWRITE + lines(rows))


# Hand-made inputs, written whether the samples are there or not: each
# target's line kinds, the value types, two versions.
HAND = {
    "opencode": [
        b'm{"role":"user","time":{"created":1}}\np{"type":"text","text":"hi"}\n'
        b'm{"role":"assistant","time":{"created":2},"modelID":"m","providerID":"p"}\n'
        b'p{"type":"tool","callID":"c","tool":"bash","state":{"status":"running","input":{}}}'
        b'\n--\n'
        b'm{"role":"user","time":{"created":1}}\np{"type":"text","text":"hi"}\n'
        b'm{"role":"assistant","time":{"created":2,"completed":3},"modelID":"m","providerID":"p"}\n'
        b'p{"type":"tool","callID":"c","tool":"bash","state":{"status":"completed","input":{},"output":"x"}}\n'
        b'p{"type":"step-finish","tokens":{"input":5,"output":1,"cache":{"read":2,"write":0}},"cost":0.1}\n'
        b'n\x02{"role":"user"}\nm\x01',
    ],
    "goose": [
        b'u[{"type":"text","text":"hi"}]\nx{"userVisible":false,"agentVisible":true}\n'
        b'a[{"type":"toolRequest","id":"c","toolCall":{"status":"success","value":{"name":"s__sh","arguments":{}}}}]\n'
        b't\x041e300\nl1\tm\t5\t1\t6\t0\t0\t0.1\tprovider_reported\nS5\t1\t0\t0\t6\t0.1\t2026-01-01 00:00:00'
        b'\n--\nR\nu[{"type":"text","text":"hi"}]\nr\x02x\t[]\nl1\tm\t5\t1\t6\t0\t0\t0.1\t\x01\n'
        b'l2\tm\t99999999999999999999\t\x01\tx\t0\t0\t0\tcarried_forward',
    ],
    "cursor": [
        b'c{"status":"generating","generatingBubbleIds":["b1"],"modelConfig":{"modelName":"m"}}\n'
        b'b{"type":1,"text":"hi"}\nb{"type":2,"text":"yo","tokenCount":{"inputTokens":5,"outputTokens":1}}\n'
        b'b{"type":2,"toolFormerData":{"name":"t","rawArgs":"{}","status":"loading"}}\n'
        b'k\xff\tnull\nisecret\tx\nw{"allComposers":[{"composerId":"c0"}]}'
        b'\n--\n'
        b'c{"status":"completed","modelConfig":{"modelName":"m"}}\n'
        b'b{"type":1,"text":"hi"}\nb{"type":2,"text":"yo","tokenCount":{"inputTokens":5,"outputTokens":1}}\n'
        b'b{"type":2,"toolFormerData":{"name":"t","rawArgs":"{}","status":"completed","result":"{\\"output\\":\\"x\\"}"}}\n'
        b'c{"conversation":[{"type":1,"bubbleId":"i0","text":"a"}],"status":"completed"}\nc\x02{}',
    ],
}


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    samples, corpus = argv
    for t, inputs in HAND.items():
        for data in inputs:
            save(os.path.join(corpus, t), data)
    if not os.path.isdir(samples):
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        opencode(samples, os.path.join(corpus, "opencode"), tmp)
        goose(samples, os.path.join(corpus, "goose"), tmp)
        cursor(samples, os.path.join(corpus, "cursor"), tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
