//! Made-up credentials of every kind redaction covers (random characters in
//! each rule's shape; none was ever issued), and sessions of pi, Claude Code
//! and Codex that hold them in user text, tool-call arguments, tool output,
//! a `.env` dump and a private key block, some written with JSON escapes.

use serde_json::{json, Value};

pub const AWS_ID: &str = "AKIAEZCOJCBEUDBISVFZ";
pub const AWS_SECRET: &str = "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";
pub const GHP: &str = "ghp_lKaRT4l3tzKQ89bHPUcmXpx8fezCPliWyIX2";
pub const GH_FINE: &str =
    "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";
pub const ANTHROPIC: &str = "sk-ant-api03-AcVLvacYlDpVb0sBhRt-GXuKpxQDMLQTk_8IE1923xlE3tqi2fPiyPnfqAJV_K37sCQM1ORSAvSaF8gtRlrKl5EctCuwAAA";
pub const OPENAI: &str = "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";
pub const GCP: &str = "AIzad7Od1SdRzhqw88eu81MjM-wydYn3mUJpULL";
pub const SLACK: &str = "xoxb-8460277237-8369865801842-9pZ15SrhhQLekcN2cPBGg5MC";
pub const STRIPE: &str = "sk_live_OGAGOn80VSYfM9uoz02oPgfE";
pub const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
pub const GLPAT: &str = "glpat-6bpYdfeI5zNEmwTdUR3x";
pub const DB_PASSWORD: &str = "hunter2hunter42";
pub const URL_PASSWORD: &str = "Zq8vTr4pLm77";
/// The body lines of [`PEM`].
pub const PEM_BODY: [&str; 3] = [
    "Bdq3qlaLfLt2wWHAQ0w+VW0TxYGAm1vro1MrkJ1RrgzaAmZPTnAyIh4eSe8NOHgB",
    "sP4PdXQn/2vO7F6G8qzP9pe+NhWkqyHXSqUDGtTIvLXEPxxLfYrNbyDFWJhSPE5m",
    "0lyOmmNBV7qD9xzUbXsQWFfPsn44xAXrKqniYdrzW6QOH8teslnBWDGrcO9Ucmvd",
];

/// A private key block.
pub fn pem() -> String {
    format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
        PEM_BODY.join("\n")
    )
}

/// Every secret planted, as the bytes that must not be anywhere.
pub fn all() -> Vec<&'static str> {
    let mut v = vec![
        AWS_ID,
        AWS_SECRET,
        GHP,
        GH_FINE,
        ANTHROPIC,
        OPENAI,
        GCP,
        SLACK,
        STRIPE,
        JWT,
        GLPAT,
        DB_PASSWORD,
        URL_PASSWORD,
    ];
    v.extend(PEM_BODY);
    v
}

/// The free texts planted, by where they go: a user's words (the AWS key
/// id to be written with a `\u` escape), more of them, a tool call's
/// command, a `.env` dump and a private key block as tool output.
pub struct Planted {
    pub user: String,
    pub user2: String,
    pub command: String,
    pub env: String,
    pub key: String,
}

pub fn planted() -> Planted {
    Planted {
        user: format!("deploy with {GHP} and the key {AWS_ID} please"),
        user2: format!(
            "keys: {ANTHROPIC} {OPENAI} {GCP} {SLACK} {GLPAT} {GH_FINE} token {JWT} end"
        ),
        command: format!(
            "psql postgres://app:{URL_PASSWORD}@db.internal/app && curl -H 'Authorization: Bearer {STRIPE}' https://api.example.com"
        ),
        env: format!(
            "$ cat .env\nDB_PASSWORD={DB_PASSWORD}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\nPORT=8080\n"
        ),
        key: format!("$ cat ~/.ssh/id_rsa\n{}\n", pem()),
    }
}

/// The redactions one session of [`planted`] makes, by rule id: 14.
pub const PER_SESSION: [(&str, u64); 14] = [
    ("anthropic-api-key", 1),
    ("aws-access-token", 1),
    ("aws-secret-access-key", 1),
    ("env-secret", 1),
    ("gcp-api-key", 1),
    ("github-fine-grained-pat", 1),
    ("github-pat", 1),
    ("gitlab-pat", 1),
    ("jwt", 1),
    ("openai-api-key", 1),
    ("private-key", 1),
    ("slack-bot-token", 1),
    ("stripe-access-token", 1),
    ("url-password", 1),
];

/// A JSON line, with the AWS key id written as `\u0041KIA...` (the parsers
/// decode it).
fn line(v: Value) -> String {
    let s = serde_json::to_string(&v).unwrap();
    let escaped = s.replace(AWS_ID, &format!("\\u0041{}", &AWS_ID[1..]));
    escaped + "\n"
}

/// A pi session (`id`) holding [`planted`].
pub fn pi_session(id: &str) -> String {
    let p = planted();
    let ts = |s: u32| format!("2026-03-01T10:00:{s:02}.000Z");
    let msg = |n: u32, parent: Option<String>, message: Value| {
        line(json!({
            "type": "message", "id": format!("{id}-{n}"), "parentId": parent,
            "timestamp": ts(n), "message": message,
        }))
    };
    let mut s = line(json!({
        "type": "session", "version": 3, "id": id, "timestamp": ts(0), "cwd": "/work/secrets"
    }));
    s += &msg(
        1,
        None,
        json!({"role": "user", "content": p.user, "timestamp": 1_772_359_201_000u64}),
    );
    s += &msg(
        2,
        Some(format!("{id}-1")),
        json!({"role": "user", "content": [{"type": "text", "text": p.user2}], "timestamp": 1_772_359_202_000u64}),
    );
    s += &msg(
        3,
        Some(format!("{id}-2")),
        json!({
            "role": "assistant", "provider": "anthropic", "model": "m", "stopReason": "toolUse",
            "content": [{"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": p.command}}],
            "timestamp": 1_772_359_203_000u64,
        }),
    );
    s += &msg(
        4,
        Some(format!("{id}-3")),
        json!({
            "role": "toolResult", "toolCallId": "t1", "toolName": "bash", "isError": false,
            "content": [{"type": "text", "text": p.env}], "timestamp": 1_772_359_204_000u64,
        }),
    );
    s += &msg(
        5,
        Some(format!("{id}-4")),
        json!({
            "role": "bashExecution", "command": "cat ~/.ssh/id_rsa", "output": p.key,
            "exitCode": 0, "timestamp": 1_772_359_205_000u64,
        }),
    );
    s
}

/// A Claude Code session (`id`) holding [`planted`].
pub fn claude_session(id: &str) -> String {
    let p = planted();
    let base = |uuid: &str, parent: Option<&str>, s: u32| {
        json!({
            "uuid": uuid, "parentUuid": parent, "sessionId": id, "cwd": "/work/secrets",
            "timestamp": format!("2026-03-01T11:00:{s:02}.000Z"), "isSidechain": false,
        })
    };
    let with = |mut v: Value, more: Value| {
        for (k, x) in more.as_object().unwrap() {
            v[k] = x.clone();
        }
        line(v)
    };
    let mut s = with(
        base("u1", None, 1),
        json!({"type": "user", "message": {"role": "user", "content": p.user}}),
    );
    s += &with(
        base("u2", Some("u1"), 2),
        json!({"type": "user", "message": {"role": "user", "content": p.user2}}),
    );
    s += &with(
        base("a1", Some("u2"), 3),
        json!({"type": "assistant", "requestId": "req_1", "message": {
            "id": "msg_1", "role": "assistant", "model": "claude-x", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": p.command}}],
            "usage": {"input_tokens": 1, "output_tokens": 2}}}),
    );
    s += &with(
        base("u3", Some("a1"), 4),
        json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": p.env}]}}),
    );
    s += &with(
        base("u4", Some("u3"), 5),
        json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": p.key}]}]}}),
    );
    s
}

/// A Codex rollout (`id`) holding [`planted`]; its tool call's arguments
/// are a JSON string inside the line's JSON.
pub fn codex_session(id: &str) -> String {
    let p = planted();
    let ts = |s: u32| format!("2026-03-01T12:00:{s:02}.000Z");
    let item = |s: u32, payload: Value| {
        line(json!({"timestamp": ts(s), "type": "response_item", "payload": payload}))
    };
    let mut s = line(
        json!({"timestamp": ts(0), "type": "session_meta", "payload": {
        "id": id, "timestamp": ts(0), "cwd": "/work/secrets", "model_provider": "openai"}}),
    );
    s += &line(
        json!({"timestamp": ts(0), "type": "turn_context", "payload": {"cwd": "/work/secrets", "model": "gpt-x"}}),
    );
    s += &item(
        1,
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": p.user}]}),
    );
    s += &item(
        2,
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": p.user2}]}),
    );
    let args = serde_json::to_string(&json!({"command": ["bash", "-lc", p.command]})).unwrap();
    s += &item(
        3,
        json!({"type": "function_call", "name": "shell", "arguments": args, "call_id": "c1"}),
    );
    s += &item(
        4,
        json!({"type": "function_call_output", "call_id": "c1", "output": p.env}),
    );
    s += &item(
        5,
        json!({"type": "function_call_output", "call_id": "c2", "output": p.key}),
    );
    s
}

/// A Qwen Code chat file (session `id`) holding [`planted`].
pub fn qwen_session(id: &str) -> String {
    let p = planted();
    let rec = |uuid: &str, parent: Option<&str>, s: u32, ty: &str, more: Value| {
        let mut v = json!({
            "uuid": uuid, "parentUuid": parent, "sessionId": id,
            "timestamp": format!("2026-03-01T13:00:{s:02}.000Z"), "type": ty,
            "cwd": "/work/secrets", "version": "0.15.2",
        });
        for (k, x) in more.as_object().unwrap() {
            v[k] = x.clone();
        }
        line(v)
    };
    let mut s = rec(
        "u1",
        None,
        1,
        "user",
        json!({"message": {"role": "user", "parts": [{"text": p.user}]}}),
    );
    s += &rec(
        "u2",
        Some("u1"),
        2,
        "user",
        json!({"message": {"role": "user", "parts": [{"text": p.user2}]}}),
    );
    s += &rec(
        "a1",
        Some("u2"),
        3,
        "assistant",
        json!({"model": "qwen3-coder-plus", "message": {"role": "model", "parts": [
        {"functionCall": {"id": "call_1", "name": "run_shell_command", "args": {"command": p.command}}}]}}),
    );
    s += &rec(
        "t1",
        Some("a1"),
        4,
        "tool_result",
        json!({"message": {"role": "user", "parts": [
        {"functionResponse": {"id": "call_1", "name": "run_shell_command", "response": {"output": p.env}}}]}}),
    );
    s += &rec(
        "t2",
        Some("t1"),
        5,
        "tool_result",
        json!({"message": {"role": "user", "parts": [
        {"functionResponse": {"id": "call_2", "name": "read_file", "response": {"output": p.key}}}]}}),
    );
    s
}

/// A Copilot CLI `events.jsonl` (session `id`) holding [`planted`].
pub fn copilot_session(id: &str) -> String {
    let p = planted();
    let ev = |n: u32, ty: &str, data: Value| {
        line(json!({"type": ty, "data": data, "id": format!("e{n}"),
                    "timestamp": format!("2026-03-01T14:00:{n:02}.000Z"), "parentId": null}))
    };
    let mut s = ev(
        1,
        "session.start",
        json!({"sessionId": id, "version": 1, "producer": "copilot-agent",
        "copilotVersion": "1.0.80", "startTime": "2026-03-01T14:00:00.000Z", "selectedModel": "gpt-5-mini",
        "context": {"cwd": "/work/secrets"}}),
    );
    s += &ev(2, "user.message", json!({"content": p.user}));
    s += &ev(3, "user.message", json!({"content": p.user2}));
    s += &ev(
        4,
        "assistant.message",
        json!({"messageId": "m1", "content": "",
        "toolRequests": [{"toolCallId": "c1", "name": "bash", "arguments": {"command": p.command}}],
        "outputTokens": 40, "requestId": "r1"}),
    );
    s += &ev(
        5,
        "tool.execution_complete",
        json!({"toolCallId": "c1", "success": true, "result": {"content": p.env}}),
    );
    s += &ev(
        6,
        "tool.execution_complete",
        json!({"toolCallId": "c2", "success": true, "result": {"content": p.key}}),
    );
    s
}

/// A Gemini CLI chat file (session `id`) holding [`planted`]; its last
/// message (the private key block) is the one a file just written holds
/// back.
pub fn gemini_session(id: &str) -> String {
    let p = planted();
    let msg = |mid: &str, s: u32, ty: &str, more: Value| {
        let mut v =
            json!({"id": mid, "timestamp": format!("2026-03-01T15:00:{s:02}.000Z"), "type": ty});
        for (k, x) in more.as_object().unwrap() {
            v[k] = x.clone();
        }
        line(v)
    };
    let mut s = line(json!({"sessionId": id, "projectHash": "0".repeat(64),
        "startTime": "2026-03-01T15:00:00.000Z", "lastUpdated": "2026-03-01T15:00:00.000Z",
        "kind": "main"}));
    s += &msg("u1", 1, "user", json!({"content": [{"text": p.user}]}));
    s += &msg("u2", 2, "user", json!({"content": [{"text": p.user2}]}));
    s += &msg(
        "g1",
        3,
        "gemini",
        json!({"content": "", "model": "gemini-2.5-pro", "toolCalls": [
            {"id": "c1", "name": "run_shell_command", "args": {"command": p.command},
             "status": "success"}]}),
    );
    s += &msg(
        "t1",
        4,
        "user",
        json!({"content": [{"functionResponse": {"id": "c1", "name": "run_shell_command",
                                                "response": {"output": p.env}}}]}),
    );
    s += &msg(
        "t2",
        5,
        "user",
        json!({"content": [{"functionResponse": {"id": "c2", "name": "read_file",
                                                "response": {"output": p.key}}}]}),
    );
    s
}

/// An Amp thread (`T-...` id) holding [`planted`], as one JSON document.
pub fn amp_thread(id: &str) -> String {
    let p = planted();
    line(json!({
        "v": 3, "id": id, "created": 1_772_380_800_000_i64, "title": "secrets",
        "env": {"initial": {"trees": [{"displayName": "secrets", "uri": "file:///work/secrets"}]}},
        "messages": [
            {"role": "user", "messageId": 0, "content": [{"type": "text", "text": p.user}]},
            {"role": "user", "messageId": 1, "content": [{"type": "text", "text": p.user2}]},
            {"role": "assistant", "messageId": 2,
             "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                          "input": {"cmd": p.command}}],
             "state": {"type": "complete", "stopReason": "tool_use"}},
            {"role": "user", "messageId": 3,
             "content": [{"type": "tool_result", "toolUseID": "toolu_1",
                          "run": {"status": "done", "result": {"output": p.env, "exitCode": 0}}}]},
            {"role": "user", "messageId": 4,
             "content": [{"type": "tool_result", "toolUseID": "toolu_2",
                          "run": {"status": "done", "result": {"output": p.key, "exitCode": 0}}}]}
        ]
    }))
}

/// A Cline SDK transcript (`<id>.messages.json`, session `id`) holding
/// [`planted`], as one JSON document.
pub fn cline_session(id: &str) -> String {
    let p = planted();
    line(
        json!({"version": 1, "updated_at": "2026-03-01T16:00:05.000Z", "agent": "lead",
            "sessionId": id, "messages": [
            {"id": "m1", "role": "user", "ts": 1_772_380_801_000_i64,
             "content": [{"type": "text", "text": p.user}]},
            {"id": "m2", "role": "user", "ts": 1_772_380_802_000_i64,
             "content": [{"type": "text", "text": p.user2}]},
            {"id": "m3", "role": "assistant", "ts": 1_772_380_803_000_i64,
             "modelInfo": {"id": "claude-sonnet-4-6", "provider": "anthropic"},
             "content": [{"type": "tool_use", "id": "t1", "name": "execute_command",
                          "input": {"command": p.command}}]},
            {"id": "m4", "role": "user",
             "content": [{"type": "tool_result", "tool_use_id": "t1",
                          "content": [{"type": "text", "text": p.env}], "is_error": false}]},
            {"id": "m5", "role": "user",
             "content": [{"type": "tool_result", "tool_use_id": "t2",
                          "content": [{"type": "text", "text": p.key}], "is_error": false}]}
        ]}),
    )
}
