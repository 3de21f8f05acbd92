#!/usr/bin/env python3
"""Databases for volume: OpenCode's opencode.db and Goose's sessions.db
(stdlib only), and their counts computed from the databases here, without
mem-ingest.

    python3 scripts/gen-db.py opencode OUT_DIR [--mb N] [--seed S] [--steps K]
                                              [--channel NAME] [--forks]
    python3 scripts/gen-db.py goose OUT_ROOT [--mb N] [--seed S] [--second]
    python3 scripts/gen-db.py count opencode OUT_DIR
    python3 scripts/gen-db.py count goose OUT_ROOT

`opencode` writes OUT_DIR/opencode.db (an OpenCode data folder) with the
tables and JSON of ../shared/samples/opencode/make_fixture.py (OpenCode's
own schema, ../shared/spec/opencode-format.md): sessions in a few
projects, user messages (text, synthetic text, file parts), assistant
messages of 1 to K LLM calls (step-start, reasoning, text, tool parts
completed or in error, a step-finish with each call's tokens and cost; the
message's own `tokens` its last call's, its `cost` the sum, as OpenCode
writes them), child sessions (a `task` tool part naming them), compactions
(a `compaction` part, then a `summary` answer), aborted answers (an
`error`), and a few answers still streaming (no `time.completed`, a tool
part `running`, zero tokens). Times run from 2026-08-01 past the id clock's
wrap of 2026-08-14. `--forks`: some sessions are forked (`/fork`: the
first messages copied with new ids, their times and tokens kept).
`--channel NAME`: also `opencode-NAME.db`, a channel's database holding
a copy of some sessions (the same ids) and sessions of its own.

`goose` writes OUT_ROOT/.local/share/goose/sessions/sessions.db (so that
HOME=OUT_ROOT finds it, for ccusage as for mem-ingest) with the schema-17
tables of ../shared/samples/goose/make_fixture.py: user and sub_agent
sessions, messages (text, thinking, toolRequest, toolResponse in the
current and the legacy shape, context injected for the model), one
usage_ledger row per LLM call, the sessions' accumulated_* columns the
ledger's sums and their last-call columns the last call's. `--second`:
also OUT_ROOT/.local/share/Block/goose/sessions/sessions.db, an older
store holding copies of some sessions (the same ids, messages and ledger).

The output depends on the arguments only (a seeded generator, no clock):
two runs give the same bytes.

`count` prints, as JSON, what `mem-ingest stats` must report for the
folder and what ccusage 20.0.24 must report (each by the rules of the
spec's ccusage section), computed here with sqlite3 and json.
"""
import json
import os
import re
import random
import sqlite3
import sys

# -- shared --------------------------------------------------------------------

WORDS = ("the limiter bucket refills once per second burst rate request route "
         "handler middleware config test fails passes error timeout retry token "
         "cache window queue worker parse field value index table schema read "
         "write lock commit branch merge build release debug trace span metric "
         "function module import export return async await promise stream "
         "buffer chunk offset length file path line column").split()


def words(rng, lo, hi):
    n = rng.randint(lo, hi)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def lines(rng, lo, hi):
    return "\n".join("%4d: %s" % (i + 1, words(rng, 3, 14)) for i in range(rng.randint(lo, hi)))


def args_of(argv, flags):
    """(positionals, {flag: value}); `flags` maps a flag to True when it
    takes a value."""
    pos, opt, i = [], {}, 0
    while i < len(argv):
        a = argv[i]
        if a in flags:
            if flags[a]:
                opt[a] = argv[i + 1]
                i += 1
            else:
                opt[a] = True
        elif a.startswith("--"):
            sys.exit("unknown option %s" % a)
        else:
            pos.append(a)
        i += 1
    return pos, opt


def fresh(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


# -- OpenCode ------------------------------------------------------------------

OC_DDL = """
CREATE TABLE `project` (
  `id` text PRIMARY KEY, `worktree` text NOT NULL, `vcs` text, `name` text,
  `icon_url` text, `icon_color` text, `time_created` integer NOT NULL,
  `time_updated` integer NOT NULL, `time_initialized` integer,
  `sandboxes` text NOT NULL, `commands` text
);
CREATE TABLE `session` (
  `id` text PRIMARY KEY, `project_id` text NOT NULL, `workspace_id` text,
  `parent_id` text, `slug` text NOT NULL, `directory` text NOT NULL,
  `path` text, `title` text NOT NULL, `version` text NOT NULL,
  `share_url` text, `summary_additions` integer, `summary_deletions` integer,
  `summary_files` integer, `summary_diffs` text,
  `cost` real DEFAULT 0 NOT NULL,
  `tokens_input` integer DEFAULT 0 NOT NULL,
  `tokens_output` integer DEFAULT 0 NOT NULL,
  `tokens_reasoning` integer DEFAULT 0 NOT NULL,
  `tokens_cache_read` integer DEFAULT 0 NOT NULL,
  `tokens_cache_write` integer DEFAULT 0 NOT NULL,
  `revert` text, `permission` text, `agent` text, `model` text,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `time_compacting` integer, `time_archived` integer,
  CONSTRAINT `fk_session_project_id_project_id_fk` FOREIGN KEY (`project_id`)
    REFERENCES `project`(`id`) ON DELETE CASCADE
);
CREATE TABLE `message` (
  `id` text PRIMARY KEY, `session_id` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `data` text NOT NULL,
  CONSTRAINT `fk_message_session_id_session_id_fk` FOREIGN KEY (`session_id`)
    REFERENCES `session`(`id`) ON DELETE CASCADE
);
CREATE TABLE `part` (
  `id` text PRIMARY KEY, `message_id` text NOT NULL, `session_id` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `data` text NOT NULL,
  CONSTRAINT `fk_part_message_id_message_id_fk` FOREIGN KEY (`message_id`)
    REFERENCES `message`(`id`) ON DELETE CASCADE
);
CREATE TABLE `todo` (
  `session_id` text NOT NULL, `content` text NOT NULL, `status` text NOT NULL,
  `priority` text NOT NULL, `position` integer NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  CONSTRAINT `todo_pk` PRIMARY KEY(`session_id`, `position`)
);
CREATE INDEX `session_project_idx` ON `session` (`project_id`);
CREATE INDEX `session_workspace_idx` ON `session` (`workspace_id`);
CREATE INDEX `session_parent_idx` ON `session` (`parent_id`);
CREATE INDEX `message_session_time_created_id_idx` ON `message` (`session_id`,`time_created`,`id`);
CREATE INDEX `part_message_id_id_idx` ON `part` (`message_id`,`id`);
CREATE INDEX `part_session_idx` ON `part` (`session_id`);
"""

B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
PREFIX = {"session": "ses", "message": "msg", "part": "prt"}
PROJECTS = [("/home/dev/src/ratelimit", "4b0ea68d7af9a6031a7ffda7ad66e0cb83315750"),
            ("/home/dev/src/webapp", "9c1f2e3d4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"),
            ("/home/dev/work/infra", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"),
            ("/", "global")]
MODELS = [("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-opus-4-1"),
          ("openai", "gpt-5"), ("google", "gemini-2.5-pro")]
T0 = 1785542400000  # 2026-08-01T00:00:00Z, in ms
TOOLS = ["bash", "read", "edit", "grep", "glob", "write"]


class Ids:
    """OpenCode's Identifier.create (legacy 6-byte form): the low 48 bits
    of ms * 0x1000 + a per-millisecond counter in hex (bit-inverted for
    session ids), then 14 random base62 characters."""

    def __init__(self, rng):
        self.rng, self.last, self.n = rng, 0, 0

    def make(self, kind, ms):
        if ms != self.last:
            self.last, self.n = ms, 0
        self.n += 1
        now = ms * 0x1000 + self.n
        if kind == "session":
            now = ~now
        six = (now & ((1 << 48) - 1)).to_bytes(6, "big").hex()
        return PREFIX[kind] + "_" + six + "".join(self.rng.choice(B62) for _ in range(14))


class OcStore:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.ids = Ids(random.Random(seed + 1))
        self.sessions, self.messages, self.parts = [], [], []
        self.bytes = 0

    def session(self, t, title, project, parent=None):
        sid = self.ids.make("session", t)
        self.sessions.append(dict(id=sid, project_id=project[1], parent_id=parent,
                                  slug=title.lower().replace(" ", "-")[:24], directory=project[0],
                                  title=title, version="1.18.9", time_created=t, time_updated=t))
        return sid

    def message(self, sid, t, data, updated=None):
        mid = self.ids.make("message", t)
        self.messages.append(dict(id=mid, session_id=sid, time_created=t,
                                  time_updated=updated or t, data=data))
        self.bytes += 120 + len(json.dumps(data))
        return mid

    def part(self, sid, mid, t, data, updated=None):
        pid = self.ids.make("part", t)
        self.parts.append(dict(id=pid, message_id=mid, session_id=sid, time_created=t,
                               time_updated=updated or t, data=data))
        self.bytes += 150 + len(json.dumps(data))
        return pid


def oc_tokens(t):
    return {"input": t[0], "output": t[1], "reasoning": t[2], "cache": {"read": t[3], "write": t[4]}}


def oc_conversation(st, sid, project, t, turns, steps_max, child_of=None):
    """A session's turns from time `t` (ms); returns the time after it."""
    rng = st.rng
    provider, model = rng.choice(MODELS)
    for turn in range(turns):
        # the user's message
        u = st.message(sid, t, {"role": "user", "time": {"created": t}, "agent": "build",
                                "model": {"providerID": provider, "modelID": model}})
        compaction = turn > 2 and rng.random() < 0.06
        if compaction:
            st.part(sid, u, t, {"type": "compaction", "auto": rng.random() < 0.5})
        else:
            st.part(sid, u, t, {"type": "text", "text": words(rng, 5, 60)})
            if rng.random() < 0.1:
                st.part(sid, u, t, {"type": "text", "synthetic": True,
                                    "text": "Called the Read tool with the following input: " + words(rng, 4, 20)})
            if rng.random() < 0.08:
                name = rng.choice(["router.ts", "limiter.ts", "README.md", "config.yaml"])
                st.part(sid, u, t, {"type": "file", "mime": "text/plain", "filename": name,
                                    "url": "file://%s/src/%s" % (project[0], name),
                                    "source": {"type": "file", "path": "src/" + name,
                                               "text": {"value": "@src/" + name, "start": 0, "end": 4 + len(name)}}})
        t += rng.randint(300, 3000)
        # the answer: 1 to steps_max LLM calls
        last = turn == turns - 1
        streaming = last and child_of is None and rng.random() < 0.1
        steps = 1 if compaction else rng.randint(1, steps_max)
        info = {"role": "assistant", "time": {"created": t}, "parentID": u, "modelID": model,
                "providerID": provider, "mode": "build", "agent": "build",
                "path": {"cwd": project[0], "root": project[0]}, "cost": 0,
                "tokens": oc_tokens((0, 0, 0, 0, 0))}
        if compaction:
            info["summary"] = True
        a = st.message(sid, t, info)
        cost, tokens = 0.0, (0, 0, 0, 0, 0)
        tp = t
        for step in range(steps):
            tp += 1
            st.part(sid, a, tp, {"type": "step-start", "snapshot": "%040x" % rng.getrandbits(160)})
            if not compaction and rng.random() < 0.4:
                tp += rng.randint(100, 2000)
                st.part(sid, a, tp, {"type": "reasoning", "text": words(rng, 10, 120),
                                     "time": {"start": tp - 50, "end": tp}, "metadata": {}})
            if streaming and step == steps - 1:
                tp += 10
                st.part(sid, a, tp, {"type": "text", "text": "", "time": {"start": tp}})
                tp += 10
                st.part(sid, a, tp, {"type": "tool", "callID": "toolu_%024x" % rng.getrandbits(96),
                                     "tool": "edit", "state": {"status": "running",
                                                               "input": {"filePath": project[0] + "/src/x.ts"},
                                                               "time": {"start": tp}}})
                break
            tp += rng.randint(100, 3000)
            text = words(rng, 5, 200) if not compaction else "Summary: " + words(rng, 40, 200)
            st.part(sid, a, tp, {"type": "text", "text": text, "time": {"start": tp - 80, "end": tp}})
            if not compaction and step < steps - 1 or rng.random() < 0.2:
                tool = rng.choice(TOOLS)
                tp += rng.randint(100, 5000)
                call = "toolu_%024x" % rng.getrandbits(96)
                if tool == "bash":
                    inp = {"command": "grep -rn %s src/" % rng.choice(WORDS), "description": words(rng, 2, 6)}
                else:
                    inp = {"filePath": "%s/src/%s.ts" % (project[0], rng.choice(WORDS))}
                if rng.random() < 0.07:
                    state = {"status": "error", "input": inp, "error": "Error: " + words(rng, 3, 12),
                             "time": {"start": tp - 40, "end": tp}}
                else:
                    out = lines(rng, 2, 80)
                    state = {"status": "completed", "input": inp, "output": out,
                             "title": words(rng, 2, 6), "metadata": {"truncated": False},
                             "time": {"start": tp - 40, "end": tp}}
                    if tool == "bash":
                        state["metadata"] = {"output": out[:200], "exit": rng.choice([0, 0, 0, 1, 2]),
                                             "description": inp["description"], "truncated": False}
                st.part(sid, a, tp, {"type": "tool", "callID": call, "tool": tool, "state": state})
            tok = (rng.randint(50, 40000), rng.randint(10, 4000), rng.choice([0, 0, rng.randint(1, 900)]),
                   rng.choice([0, rng.randint(100, 80000)]), rng.choice([0, rng.randint(10, 9000)]))
            c = round(rng.random() * 0.2, 6)
            tp += 5
            fin = {"type": "step-finish", "reason": "tool-calls" if step < steps - 1 else "stop",
                   "snapshot": "%040x" % rng.getrandbits(160), "cost": c, "tokens": oc_tokens(tok)}
            if rng.random() < 0.3:
                fin["tokens"]["total"] = sum(tok)
            st.part(sid, a, tp, fin)
            cost += c
            tokens = tok
        if not streaming:
            info["time"]["completed"] = tp + 1
            info["cost"] = round(cost, 6)
            info["tokens"] = oc_tokens(tokens)
            if rng.random() < 0.03:
                info["error"] = {"name": "MessageAbortedError", "data": {"message": "The operation was aborted."}}
            else:
                info["finish"] = "stop"
        t = tp + rng.randint(2000, 120000)
    return t


def oc_build(seed, mb, steps_max, forks):
    st = OcStore(seed)
    rng = st.rng
    # the JSON's bytes that give a database of `mb` MB (its pages,
    # indexes and columns are 0.45 of the JSON again)
    target = mb * 1024 * 1024 / 1.45
    t = T0
    n = 0
    while st.bytes < target:
        project = PROJECTS[rng.randrange(len(PROJECTS))]
        n += 1
        sid = st.session(t, "Session %d: %s" % (n, words(rng, 2, 5)), project)
        first = len(st.messages)
        t = oc_conversation(st, sid, project, t + 1000, rng.randint(2, 14), steps_max)
        if rng.random() < 0.1:
            # a child session (the task tool), its task part on a message of the parent
            child = st.session(t, "%s (@general subagent)" % words(rng, 2, 4), project, parent=sid)
            parent_msg = st.messages[-1]["id"]
            t = oc_conversation(st, child, project, t + 500, rng.randint(1, 4), steps_max, child_of=sid)
            st.part(sid, parent_msg, t, {"type": "tool", "callID": "toolu_%024x" % rng.getrandbits(96),
                                         "tool": "task", "state": {
                                             "status": "completed",
                                             "input": {"description": "Investigate", "prompt": words(rng, 5, 20),
                                                       "subagent_type": "general"},
                                             "output": words(rng, 10, 60), "title": "Investigate",
                                             "metadata": {"sessionId": child, "summary": []},
                                             "time": {"start": t - 100, "end": t}}})
        if forks and rng.random() < 0.15:
            # /fork: the first messages copied with new ids, times and tokens kept
            done = [m for m in st.messages[first:] if m["session_id"] == sid]
            upto = done[:max(2, len(done) // 2) & ~1]
            fork = st.session(t, "%s (fork #1)" % st.sessions[-1]["title"], project)
            by_msg = {}
            for p in st.parts:
                if p["session_id"] == sid:
                    by_msg.setdefault(p["message_id"], []).append(p)
            new_ids = {}
            for m in upto:
                data = json.loads(json.dumps(m["data"]))
                if "parentID" in data:
                    data["parentID"] = new_ids.get(data["parentID"], data["parentID"])
                nm = st.message(fork, m["time_created"], data, m["time_updated"])
                new_ids[m["id"]] = nm
                for p in by_msg.get(m["id"], []):
                    st.part(fork, nm, p["time_created"], json.loads(json.dumps(p["data"])), p["time_updated"])
        t += rng.randint(60000, 3600000)
    return st


def oc_write(path, st, sessions=None):
    fresh(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(OC_DDL)
    keep = (lambda sid: sid in sessions) if sessions is not None else (lambda sid: True)
    for wt, pid in PROJECTS:
        db.execute("INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes)"
                   " VALUES (?,?,?,?,?,?)", (pid, wt, "git", T0, T0, "[]"))
    db.executemany("INSERT INTO session (id,project_id,parent_id,slug,directory,title,version,time_created,"
                   "time_updated) VALUES (:id,:project_id,:parent_id,:slug,:directory,:title,:version,"
                   ":time_created,:time_updated)", [s for s in st.sessions if keep(s["id"])])
    db.executemany("INSERT INTO message VALUES (?,?,?,?,?)",
                   ((m["id"], m["session_id"], m["time_created"], m["time_updated"], json.dumps(m["data"]))
                    for m in st.messages if keep(m["session_id"])))
    db.executemany("INSERT INTO part VALUES (?,?,?,?,?,?)",
                   ((p["id"], p["message_id"], p["session_id"], p["time_created"], p["time_updated"],
                     json.dumps(p["data"])) for p in st.parts if keep(p["session_id"])))
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def opencode(argv):
    pos, opt = args_of(argv, {"--mb": True, "--seed": True, "--steps": True, "--channel": True,
                              "--forks": False})
    if len(pos) != 1:
        sys.exit(__doc__)
    out = pos[0]
    seed = int(opt.get("--seed", 7))
    mb = float(opt.get("--mb", 100))
    st = oc_build(seed, mb, int(opt.get("--steps", 3)), "--forks" in opt)
    oc_write(os.path.join(out, "opencode.db"), st)
    if "--channel" in opt:
        # a channel's database: a copy of one session in ten (the same
        # ids), and sessions of its own (another seed, later times)
        rng = random.Random(seed + 2)
        copied = {s["id"] for s in st.sessions if rng.random() < 0.1}
        own = oc_build(seed + 100, max(mb / 20, 0.05), int(opt.get("--steps", 3)), False)
        for s in st.sessions:
            if s["id"] in copied:
                own.sessions.append(s)
        own.messages += [m for m in st.messages if m["session_id"] in copied]
        own.parts += [p for p in st.parts if p["session_id"] in copied]
        name = "".join(c if c.isalnum() or c in "._-" else "-" for c in opt["--channel"])
        oc_write(os.path.join(out, "opencode-%s.db" % name), own)
    return 0


def oc_final(data, parts):
    """Whether a message is final (docs/opencode.md): a user message with
    parts; an assistant message completed or in error, no tool part
    pending or running."""
    role = data.get("role")
    if role == "user":
        return len(parts) > 0
    if role == "assistant":
        t = data.get("time") or {}
        done = t.get("completed") is not None or data.get("error") is not None
        return done and all(p.get("type") != "tool" or (p.get("state") or {}).get("status") in ("completed", "error")
                            for p in parts)
    return True


def count_opencode(out):
    names = sorted(n for n in os.listdir(out) if n == "opencode.db" or
                   (n.startswith("opencode-") and n.endswith(".db")))
    ours = {"records": {"user": 0, "assistant": 0, "tool_result": 0},
            "usage": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "total_tokens": 0},
            "messages": 0, "pending": 0,
            # input tokens by the answer's model, as `stats`' by_model
            "input_by_model": {}}
    seen = set()
    # ccusage reads opencode.db alone (else the first opencode-*.db)
    ccu_db = "opencode.db" if "opencode.db" in names else (names[0] if names else None)
    names.sort(key=lambda n: n != ccu_db)
    ccu = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "total_tokens": 0}
    diff = {"later_calls": 0, "channel_only": 0, "fork_copies": 0}
    for name in names:
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(out, name), uri=True)
        # a fork's session (`<title> (fork #N)`): its messages are copies,
        # their calls counted in the forked session's
        forks = {sid for sid, title in db.execute("SELECT id, title FROM session")
                 if re.search(r" \(fork #\d+\)$", title)}
        parts = {}
        for mid, data in db.execute("SELECT message_id, data FROM part ORDER BY time_created, id"):
            parts.setdefault(mid, []).append(json.loads(data))
        for mid, sid, data in db.execute("SELECT id, session_id, data FROM message ORDER BY rowid"):
            d = json.loads(data)
            ps = parts.get(mid, [])
            copy = sid in forks
            if name == ccu_db:
                tk = d.get("tokens") or {}
                c = tk.get("cache") or {}
                vals = [tk.get("input", 0), tk.get("output", 0), c.get("read", 0), c.get("write", 0)]
                s = sum(vals) + tk.get("reasoning", 0)
                if s > 0 and d.get("modelID") and d.get("providerID"):
                    for k, v in zip(("input", "output", "cache_read", "cache_write"), vals):
                        ccu[k] += v
                    ccu["total_tokens"] += max(s, tk.get("total", 0))
                    if copy:
                        diff["fork_copies"] += vals[0]
            if mid in seen:
                continue
            seen.add(mid)
            ours["messages"] += 1
            if not oc_final(d, ps):
                ours["pending"] += 1
                continue
            ours["records"][d["role"]] += 1
            for p in ps:
                if p.get("type") == "tool" and p["state"]["status"] in ("completed", "error"):
                    ours["records"]["tool_result"] += 1
            if d["role"] != "assistant" or copy:
                continue
            fins = [p for p in ps if p.get("type") == "step-finish"]
            for i, p in enumerate(fins):
                tk = p["tokens"]
                vals = [tk["input"], tk["output"], tk["cache"]["read"], tk["cache"]["write"]]
                s = sum(vals) + tk["reasoning"]
                for k, v in zip(("input", "output", "cache_read", "cache_write"), vals):
                    ours["usage"][k] += v
                ours["usage"]["total_tokens"] += max(s, tk.get("total", 0))
                by_model = ours["input_by_model"]
                by_model[d["modelID"]] = by_model.get(d["modelID"], 0) + vals[0]
                if name != ccu_db:
                    diff["channel_only"] += vals[0]
                elif i < len(fins) - 1:
                    diff["later_calls"] += vals[0]
        db.close()
    return {"ours": ours, "ccusage": ccu, "input_difference": diff}


# -- Goose ---------------------------------------------------------------------

GOOSE_DDL = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    user_set_name BOOLEAN DEFAULT FALSE,
    session_type TEXT NOT NULL DEFAULT 'user',
    working_dir TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    extension_data TEXT DEFAULT '{}',
    total_tokens INTEGER,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cache_read_tokens INTEGER,
    cache_write_tokens INTEGER,
    accumulated_total_tokens INTEGER,
    accumulated_input_tokens INTEGER,
    accumulated_output_tokens INTEGER,
    accumulated_cache_read_tokens INTEGER,
    accumulated_cache_write_tokens INTEGER,
    accumulated_cost REAL,
    schedule_id TEXT,
    recipe_json TEXT,
    user_recipe_values_json TEXT,
    provider_name TEXT,
    model_config_json TEXT,
    goose_mode TEXT NOT NULL DEFAULT 'auto',
    archived_at TIMESTAMP,
    project_id TEXT,
    parent_session_id TEXT,
    parent_delegation TEXT
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content_json TEXT NOT NULL,
    created_timestamp INTEGER NOT NULL,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    tokens INTEGER,
    metadata_json TEXT
);
CREATE TABLE IF NOT EXISTS usage_ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_timestamp INTEGER NOT NULL,
    model TEXT,
    input_tokens INTEGER,
    output_tokens INTEGER,
    total_tokens INTEGER,
    cache_read_tokens INTEGER,
    cache_write_tokens INTEGER,
    cost REAL,
    cost_source TEXT,
    is_compaction INTEGER DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id);
CREATE INDEX IF NOT EXISTS idx_messages_timestamp ON messages(timestamp);
CREATE INDEX IF NOT EXISTS idx_messages_message_id ON messages(message_id);
CREATE INDEX IF NOT EXISTS idx_messages_session_created ON messages(session_id, created_timestamp, id);
CREATE INDEX IF NOT EXISTS idx_sessions_updated ON sessions(updated_at DESC);
CREATE INDEX IF NOT EXISTS idx_sessions_type ON sessions(session_type);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_usage_ledger_session ON usage_ledger(session_id);
"""

GOOSE_MODELS = [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-5"), ("google", "gemini-2.5-pro")]
G0 = 1785542400  # 2026-08-01T00:00:00Z, in seconds
VISIBLE = {"userVisible": True, "agentVisible": True}
AGENT_ONLY = {"userVisible": False, "agentVisible": True}


def utc(t):
    import time
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def goose_build(seed, mb):
    """(sessions, messages, ledger) as rows, in insert order."""
    rng = random.Random(seed)
    sessions, messages, ledger = [], [], []
    size, t, day, n_day = 0, G0, None, 0
    # the JSON's bytes that give a database of `mb` MB (its pages,
    # indexes and other columns are 0.5 of the JSON again)
    target = mb * 1024 * 1024 / 1.5

    def new_session(t, parent=None):
        nonlocal day, n_day
        d = utc(t)[:10].replace("-", "")
        if d != day:
            day, n_day = d, 0
        n_day += 1
        provider, model = rng.choice(GOOSE_MODELS)
        s = dict(id="%s_%d" % (d, n_day), name=words(rng, 2, 5), session_type="sub_agent" if parent else "user",
                 working_dir=rng.choice(PROJECTS[:3])[0], created_at=utc(t), provider_name=provider,
                 model_config_json=json.dumps({"model_name": model, "context_limit": None, "temperature": None,
                                               "max_tokens": None, "toolshim": False, "toolshim_model": None}),
                 parent_session_id=parent, model=model, acc=[0, 0, 0, 0, 0, 0.0], last=(0, 0, 0, 0, 0))
        sessions.append(s)
        return s

    def conversation(s, t, turns):
        nonlocal size
        uuid = lambda: "%08x-%04x-4%03x-8%03x-%012x" % (rng.getrandbits(32), rng.getrandbits(16),
                                                         rng.getrandbits(12), rng.getrandbits(12), rng.getrandbits(48))

        def msg(role, content, meta=VISIBLE):
            nonlocal size
            c = json.dumps(content)
            size += 100 + len(c)
            messages.append((s["id"], "msg_" + uuid(), role, c, t, json.dumps(meta)))

        for _ in range(turns):
            msg("user", [{"type": "text", "text": words(rng, 5, 60)}])
            if rng.random() < 0.15:
                msg("user", [{"type": "text", "text": "<turn-context>cwd=%s</turn-context>" % s["working_dir"]}],
                    AGENT_ONLY)
            for call in range(rng.randint(1, 3)):
                t += rng.randint(1, 40)
                content = []
                if rng.random() < 0.4:
                    content.append({"type": "thinking", "thinking": words(rng, 10, 100), "signature": "EuYBCkQYAiJA"})
                content.append({"type": "text", "text": words(rng, 5, 150)})
                tool = rng.random() < 0.6
                cid = "toolu_%024x" % rng.getrandbits(96)
                if tool:
                    content.append({"type": "toolRequest", "id": cid, "toolCall": {
                        "status": "success", "value": {"name": "developer__shell",
                                                       "arguments": {"command": "rg -n %s" % rng.choice(WORDS)}}}})
                msg("assistant", content)
                tok = (rng.randint(100, 40000), rng.randint(10, 4000), rng.choice([0, rng.randint(100, 60000)]),
                       rng.choice([0, rng.randint(10, 8000)]))
                cost = round(rng.random() * 0.2, 6)
                ledger.append((s["id"], t, s["model"], tok[0], tok[1], tok[0] + tok[1], tok[2], tok[3], cost,
                               "estimated", 0))
                acc = s["acc"]
                for i, v in enumerate((tok[0] + tok[1], tok[0], tok[1], tok[2], tok[3])):
                    acc[i] += v
                acc[5] += cost
                s["last"] = (tok[0] + tok[1], tok[0], tok[1], tok[2], tok[3])
                if tool:
                    t += rng.randint(1, 20)
                    out = lines(rng, 2, 60)
                    if rng.random() < 0.2:
                        value = [{"type": "text", "text": out}]
                    else:
                        value = {"content": [{"type": "text", "text": out}], "isError": rng.random() < 0.05}
                    msg("user", [{"type": "toolResponse", "id": cid, "toolResult": {"status": "success",
                                                                                     "value": value}}])
            t += rng.randint(30, 900)
        return t

    while size < target:
        s = new_session(t)
        t = conversation(s, t + 2, rng.randint(2, 12))
        if rng.random() < 0.1:
            child = new_session(t, parent=s["id"])
            t = conversation(child, t + 1, rng.randint(1, 3))
        t += rng.randint(600, 20000)
    return sessions, messages, ledger


def goose_write(path, built, keep=None):
    sessions, messages, ledger = built
    fresh(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(GOOSE_DDL)
    db.execute("INSERT INTO schema_version (version, applied_at) VALUES (17, '2026-08-01 00:00:00')")
    ok = (lambda sid: sid in keep) if keep is not None else (lambda sid: True)
    for s in sessions:
        if not ok(s["id"]):
            continue
        acc, last = s["acc"], s["last"]
        db.execute("INSERT INTO sessions (id, name, session_type, working_dir, created_at, updated_at,"
                   " total_tokens, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,"
                   " accumulated_total_tokens, accumulated_input_tokens, accumulated_output_tokens,"
                   " accumulated_cache_read_tokens, accumulated_cache_write_tokens, accumulated_cost,"
                   " provider_name, model_config_json, parent_session_id)"
                   " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (s["id"], s["name"], s["session_type"], s["working_dir"], s["created_at"], s["created_at"],
                    last[0], last[1], last[2], last[3], last[4], acc[0], acc[1], acc[2], acc[3], acc[4],
                    round(acc[5], 6), s["provider_name"], s["model_config_json"], s["parent_session_id"]))
    db.executemany("INSERT INTO messages (session_id, message_id, role, content_json, created_timestamp, timestamp,"
                   " metadata_json) VALUES (?,?,?,?,?,datetime(?, 'unixepoch'),?)",
                   ((m[0], m[1], m[2], m[3], m[4], m[4], m[5]) for m in messages if ok(m[0])))
    db.executemany("INSERT INTO usage_ledger (session_id, created_timestamp, model, input_tokens, output_tokens,"
                   " total_tokens, cache_read_tokens, cache_write_tokens, cost, cost_source, is_compaction)"
                   " VALUES (?,?,?,?,?,?,?,?,?,?,?)", (r for r in ledger if ok(r[0])))
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


GOOSE_MAIN = ".local/share/goose/sessions/sessions.db"
GOOSE_SECOND = ".local/share/Block/goose/sessions/sessions.db"


def goose(argv):
    pos, opt = args_of(argv, {"--mb": True, "--seed": True, "--second": False})
    if len(pos) != 1:
        sys.exit(__doc__)
    root = pos[0]
    seed = int(opt.get("--seed", 7))
    built = goose_build(seed, float(opt.get("--mb", 100)))
    goose_write(os.path.join(root, GOOSE_MAIN), built)
    if "--second" in opt:
        rng = random.Random(seed + 2)
        keep = {s["id"] for s in built[0] if rng.random() < 0.1}
        goose_write(os.path.join(root, GOOSE_SECOND), built, keep)
    return 0


def count_goose(root):
    ours = {"records": {"user": 0, "assistant": 0, "tool_result": 0, "system": 0},
            "usage": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "total_tokens": 0},
            "messages": 0}
    ccu = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "total_tokens": 0}
    diff = {"twice": 0}
    seen_msg, seen_ledger, seen_session = set(), set(), set()
    for rel in (GOOSE_MAIN, GOOSE_SECOND):
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            continue
        db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        for sid, inp, out, tot, model in db.execute(
                "SELECT id, accumulated_input_tokens, accumulated_output_tokens, accumulated_total_tokens,"
                " model_config_json FROM sessions WHERE model_config_json IS NOT NULL"):
            if not json.loads(model).get("model_name"):
                continue
            ccu["input"] += inp
            ccu["output"] += out
            ccu["total_tokens"] += max(tot, inp + out)
            if sid in seen_session:
                diff["twice"] += inp
            seen_session.add(sid)
        for sid, mid, role, content, meta in db.execute(
                "SELECT session_id, message_id, role, content_json, metadata_json FROM messages ORDER BY id"):
            if (sid, mid) in seen_msg:
                continue
            seen_msg.add((sid, mid))
            ours["messages"] += 1
            c = json.loads(content)
            m = json.loads(meta) if meta else {}
            if role == "user" and c and all(p.get("type") == "toolResponse" for p in c):
                ours["records"]["tool_result"] += len(c)
            elif role == "user" and m.get("userVisible") is False and m.get("agentVisible", True):
                ours["records"]["system"] += 1
            else:
                ours["records"][role] += 1
        for row in db.execute("SELECT session_id, created_timestamp, model, input_tokens, output_tokens,"
                              " total_tokens, cache_read_tokens, cache_write_tokens FROM usage_ledger ORDER BY id"):
            if row in seen_ledger:
                continue
            seen_ledger.add(row)
            _, _, _, i, o, tot, cr, cw = row
            ours["usage"]["input"] += i
            ours["usage"]["output"] += o
            ours["usage"]["cache_read"] += cr
            ours["usage"]["cache_write"] += cw
            ours["usage"]["total_tokens"] += tot
        db.close()
    return {"ours": ours, "ccusage": ccu, "input_difference": diff}


def main(argv):
    if len(argv) >= 2 and argv[0] == "opencode":
        return opencode(argv[1:])
    if len(argv) >= 2 and argv[0] == "goose":
        return goose(argv[1:])
    if len(argv) == 3 and argv[0] == "count" and argv[1] in ("opencode", "goose"):
        f = count_opencode if argv[1] == "opencode" else count_goose
        print(json.dumps(f(argv[2]), indent=1, sort_keys=True))
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
