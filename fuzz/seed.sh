#!/usr/bin/env bash
# Fills fuzz/corpus/line/, reader/, claude/, codex/, qwen/, copilot/, cursor_cli/, gemini/, amp/, cline/, gemini_legacy/,
# opencode/, goose/ and cursor/ from the fixtures
# and the samples beside the project.
#   line:   every distinct line of fixtures/*.jsonl, fixtures/bad/*.jsonl and fixtures/no-header/*.jsonl
#           (without its \n, cut to 8 KiB).
#   reader: every fixture file (large ones as their first 12 lines, cut to
#           12 KiB, plus their last 3 lines, cut to 4 KiB), each behind a few
#           reader prefixes: 2 bytes of buffer capacity (little-endian, 1 + n
#           % 4096), 1 byte of plan length, the plan (see fuzz/src/lib.rs).
# Files are named by their SHA-1, so running it again adds nothing twice.
# Usage: fuzz/seed.sh [CORPUS_DIR]   (from anywhere; default fuzz/corpus)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
corpus=${1:-$here/corpus}
line_dir=$corpus/line
reader_dir=$corpus/reader
mkdir -p "$line_dir" "$reader_dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

shopt -s nullglob
fixtures=("$root"/fixtures/*.jsonl "$root"/fixtures/bad/*.jsonl "$root"/fixtures/no-header/*.jsonl)
if [ ${#fixtures[@]} -eq 0 ]; then
    echo "seed.sh: no fixtures under $root/fixtures" >&2
    exit 1
fi

# Reader prefixes: capacity 1 one byte at a time; 7 with short reads and an
# interruption; 64 interrupted before every read; 4096 whole reads.
prefixes=('\000\000\001\000' '\006\000\003\002\377\012' '\077\000\001\377' '\377\017\000')

# Moves every file of directory $1 to $2/<sha1 of its content>.
by_sha1() {
    (cd "$1" && sha1sum -- *) | while read -r sum name; do
        mv "$1/$name" "$2/$sum"
    done
}

# Lines: the distinct lines of all fixtures, one file each (split keeps
# each line's \n; tr drops it, a line holds no other).
mkdir "$tmp/split" "$tmp/lines" "$tmp/files"
for f in "${fixtures[@]}"; do
    cat "$f"
    echo
done | LC_ALL=C sort -u >"$tmp/all"
split -l 1 -a 6 "$tmp/all" "$tmp/split/l"
for l in "$tmp"/split/l*; do
    head -c 8192 "$l" | tr -d '\n' >"$tmp/lines/${l##*/}"
done
by_sha1 "$tmp/lines" "$line_dir"

# Files, behind each reader prefix.
i=0
for f in "${fixtures[@]}"; do
    if [ "$(wc -c <"$f")" -le 16384 ]; then
        cp "$f" "$tmp/file"
    else
        # (through files: `head | head` would die of SIGPIPE under pipefail)
        head -n 12 "$f" >"$tmp/head"
        tail -n 3 "$f" >"$tmp/tail"
        { head -c 12288 "$tmp/head"; tail -c 4096 "$tmp/tail"; } >"$tmp/file"
    fi
    for p in "${prefixes[@]}"; do
        i=$((i + 1))
        { printf "$p"; cat "$tmp/file"; } >"$tmp/files/$i"
    done
done
by_sha1 "$tmp/files" "$reader_dir"

# Claude Code transcripts: every sample beside the project (../shared), each
# as its first 12 lines cut to 12 KiB.
claude_dir=$corpus/claude
mkdir -p "$claude_dir" "$tmp/claude"
samples=$(cd "$root/.." && pwd)/shared/samples
i=0
if [ -d "$samples" ]; then
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        head -n 12 "$f" >"$tmp/head"
        head -c 12288 "$tmp/head" >"$tmp/claude/$i"
    done < <(find "$samples/claude-code" "$samples/claude-code-log-messages/claude-code" -name '*.jsonl' -print0 2>/dev/null)
fi
# And a few hand-made lines, so the corpus is never empty.
printf '%s\n' '{"type":"user","uuid":"u1","sessionId":"s","cwd":"/p","timestamp":"2025-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}' \
    '{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","requestId":"r","message":{"id":"m","role":"assistant","model":"claude","content":[{"type":"text","text":"yo"}],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":2}}}' \
    >"$tmp/claude/hand"
if [ -n "$(ls "$tmp/claude")" ]; then by_sha1 "$tmp/claude" "$claude_dir"; fi

# Codex rollouts: every sample beside the project, each as its first 12
# lines cut to 12 KiB, and a hand-made rollout of the shapes that carry a
# running context (a model, cumulative totals, twins).
codex_dir=$corpus/codex
mkdir -p "$codex_dir" "$tmp/codex"
i=0
if [ -d "$samples" ]; then
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        head -n 12 "$f" >"$tmp/head"
        head -c 12288 "$tmp/head" >"$tmp/codex/$i"
    done < <(find "$samples/codex" "$samples/claude-code-log-messages/codex" -name '*.jsonl' -print0 2>/dev/null)
fi
printf '%s\n' '{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t1","cwd":"/a","forked_from_id":"t0"}}' \
    '{"timestamp":"2026-01-01T00:00:01.000Z","type":"turn_context","payload":{"cwd":"/a","model":"gpt-5"}}' \
    '{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}' \
    '{"timestamp":"2026-01-01T00:00:02.500Z","type":"event_msg","payload":{"type":"user_message","message":"hi"}}' \
    '{"timestamp":"2026-01-01T00:00:03.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"reasoning_output_tokens":1,"total_tokens":13}}}}' \
    '{"timestamp":"2026-01-01T00:00:04.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":30,"cached_input_tokens":4,"output_tokens":9,"reasoning_output_tokens":1,"total_tokens":39},"last_token_usage":{"input_tokens":20,"cached_input_tokens":0,"output_tokens":6,"reasoning_output_tokens":0,"total_tokens":26}}}}' \
    >"$tmp/codex/hand"
by_sha1 "$tmp/codex" "$codex_dir"

# Qwen Code chat files: the sample beside the project, and a hand-made
# file of its shapes (thoughts, a tool call and result, usage with cached
# tokens, telemetry, compression, a rewind, a fork copy).
qwen_dir=$corpus/qwen
mkdir -p "$qwen_dir" "$tmp/qwen"
i=0
if [ -d "$samples" ]; then
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        head -n 12 "$f" >"$tmp/head"
        head -c 12288 "$tmp/head" >"$tmp/qwen/$i"
    done < <(find "$samples/qwen-code" -name '*.jsonl' -print0 2>/dev/null)
fi
printf '%s\n' '{"uuid":"u1","parentUuid":null,"sessionId":"s","timestamp":"2026-01-01T00:00:00.000Z","type":"user","cwd":"/p","message":{"role":"user","parts":[{"text":"hi"}]}}' \
    '{"uuid":"a1","parentUuid":"u1","sessionId":"s","timestamp":"2026-01-01T00:00:01.000Z","type":"assistant","cwd":"/p","model":"qwen3-coder-plus","message":{"role":"model","parts":[{"text":"think","thought":true},{"text":"yo"},{"functionCall":{"id":"c1","name":"read_file","args":{"path":"a"}}}]},"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":5,"thoughtsTokenCount":2,"totalTokenCount":107}}' \
    '{"uuid":"t1","parentUuid":"a1","sessionId":"s","timestamp":"2026-01-01T00:00:02.000Z","type":"tool_result","cwd":"/p","message":{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"x"}}}]},"toolCallResult":{"callId":"c1","status":"success"}}' \
    '{"uuid":"s1","parentUuid":"t1","sessionId":"s","timestamp":"2026-01-01T00:00:03.000Z","type":"system","subtype":"ui_telemetry","cwd":"/p","systemPayload":{"uiEvent":{"input_token_count":100}}}' \
    '{"uuid":"s2","parentUuid":"s1","sessionId":"s","timestamp":"2026-01-01T00:00:04.000Z","type":"system","subtype":"chat_compression","cwd":"/p","systemPayload":{"compressedHistory":[{"role":"user","parts":[{"text":"sum"}]}]}}' \
    '{"uuid":"s3","parentUuid":"s2","sessionId":"s","timestamp":"2026-01-01T00:00:05.000Z","type":"system","subtype":"rewind","cwd":"/p","systemPayload":{"truncatedCount":2}}' \
    '{"uuid":"a1","parentUuid":"u1","sessionId":"f","timestamp":"2026-01-01T00:00:01.000Z","type":"assistant","cwd":"/p","model":"qwen3-coder-plus","message":{"role":"model","parts":[{"text":"yo"}]},"usageMetadata":{"totalTokenCount":7},"forkedFrom":{"sessionId":"s","messageUuid":"a1"}}' \
    >"$tmp/qwen/hand"
by_sha1 "$tmp/qwen" "$qwen_dir"

# Copilot CLI session logs: the samples beside the project, and a
# hand-made log of its shapes (a model change, messages with output, a
# tool call and result, a checkpoint, two shutdowns around a resume).
copilot_dir=$corpus/copilot
mkdir -p "$copilot_dir" "$tmp/copilot"
i=0
if [ -d "$samples" ]; then
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        head -n 12 "$f" >"$tmp/head"
        head -c 12288 "$tmp/head" >"$tmp/copilot/$i"
    done < <(find "$samples/copilot-cli" -name 'events.jsonl' -print0 2>/dev/null)
fi
printf '%s\n' '{"type":"session.start","data":{"sessionId":"s","selectedModel":"gpt-5.4","context":{"cwd":"/p"}},"id":"e1","timestamp":"2026-01-01T00:00:00.000Z","parentId":null}' \
    '{"type":"session.model_change","data":{"newModel":"claude-opus-4.6-1m"},"id":"e2","timestamp":"2026-01-01T00:00:01.000Z","parentId":"e1"}' \
    '{"type":"user.message","data":{"content":"hi"},"id":"e3","timestamp":"2026-01-01T00:00:02.000Z","parentId":"e2"}' \
    '{"type":"assistant.message","data":{"messageId":"m","content":"","reasoningText":"r","toolRequests":[{"toolCallId":"c","name":"bash","arguments":{"command":"ls"}}],"outputTokens":7},"id":"e4","timestamp":"2026-01-01T00:00:03.000Z","parentId":"e3"}' \
    '{"type":"tool.execution_complete","data":{"toolCallId":"c","success":true,"result":{"content":"a"}},"id":"e5","timestamp":"2026-01-01T00:00:04.000Z","parentId":"e4"}' \
    '{"type":"session.usage_checkpoint","data":{"totalNanoAiu":1},"id":"e6","timestamp":"2026-01-01T00:00:05.000Z","parentId":"e5"}' \
    '{"type":"session.shutdown","data":{"modelMetrics":{"claude-opus-4.6-1m":{"usage":{"inputTokens":100,"outputTokens":10,"cacheReadTokens":50,"cacheWriteTokens":5}}}},"id":"e7","timestamp":"2026-01-01T00:00:06.000Z","parentId":"e6"}' \
    '{"type":"session.resume","data":{"context":{"cwd":"/q"}},"id":"e8","timestamp":"2026-01-02T00:00:00.000Z","parentId":"e7"}' \
    '{"type":"session.shutdown","data":{"modelMetrics":{"claude-opus-4.6-1m":{"usage":{"inputTokens":150,"outputTokens":12,"cacheReadTokens":60,"cacheWriteTokens":5}}}},"id":"e9","timestamp":"2026-01-02T00:00:06.000Z","parentId":"e8"}' \
    >"$tmp/copilot/hand"
by_sha1 "$tmp/copilot" "$copilot_dir"

# Cursor CLI transcripts: the JSONL samples beside the project, and a
# hand-made transcript of each kind (JSONL: text in <user_query>, thinking,
# the three tool-call spellings, a tool result, an unknown block, a control
# line; .txt: markers and indented bodies).
cursor_cli_dir=$corpus/cursor_cli
mkdir -p "$cursor_cli_dir" "$tmp/cursor_cli"
i=0
if [ -d "$samples" ]; then
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        head -c 12288 "$f" >"$tmp/cursor_cli/$i"
    done < <(find "$samples/cursor" -name '*.jsonl' -print0 2>/dev/null)
fi
printf '%s\n' '{"role":"user","message":{"content":[{"type":"text","text":"<user_query>\nrun ls\n</user_query>"}]}}' \
    '{"role":"assistant","message":{"content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"ok"},{"type":"tool_use","name":"Shell","input":{"command":"ls"}}]}}' \
    '{"type":"turn_ended","status":"success"}' \
    '{"role":"assistant","message":{"content":[{"type":"tool_call","name":"read_file","input":{"path":"a"}},{"type":"tool-call","toolName":"w","args":{}},{"type":"custom_block","text":"x"}]}}' \
    '{"role":"user","message":{"content":[{"type":"tool-result","name":"read_file","content":[{"type":"text","text":"r"}]}]}}' \
    >"$tmp/cursor_cli/hand"
printf 'user:\n<user_query>\nq\n</user_query>\n\nassistant:\n[Thinking]\n  t\nok\n[Tool call] Shell\n  command=ls\n[Tool result]\n  a\nafter\n' \
    >"$tmp/cursor_cli/txt"
by_sha1 "$tmp/cursor_cli" "$cursor_cli_dir"

# Gemini CLI chat files: the JSONL samples beside the project, and a
# hand-made file of its shapes (a message re-appended with its tokens and
# tool call, a tool output, a late copy, a $set checkpoint with a message
# of its own, a rewind, a resume).
gemini_dir=$corpus/gemini
mkdir -p "$gemini_dir" "$tmp/gemini"
i=0
if [ -d "$samples" ]; then
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        head -n 12 "$f" >"$tmp/head"
        head -c 12288 "$tmp/head" >"$tmp/gemini/$i"
    done < <(find "$samples/gemini-cli" -name '*.jsonl' -print0 2>/dev/null)
fi
printf '%s\n' '{"sessionId":"s","projectHash":"h","startTime":"2026-01-01T00:00:00.000Z","lastUpdated":"2026-01-01T00:00:00.000Z","kind":"main"}' \
    '{"id":"u1","timestamp":"2026-01-01T00:00:01.000Z","type":"user","content":[{"text":"hi"}],"displayContent":"hi @a"}' \
    '{"$set":{"lastUpdated":"2026-01-01T00:00:01.000Z"}}' \
    '{"id":"g1","timestamp":"2026-01-01T00:00:02.000Z","type":"gemini","content":"yo","thoughts":[{"subject":"s","description":"d","timestamp":"2026-01-01T00:00:02.000Z"}],"tokens":null,"model":"gemini-2.5-pro"}' \
    '{"id":"g1","timestamp":"2026-01-01T00:00:02.000Z","type":"gemini","content":"yo","tokens":{"input":100,"output":5,"cached":60,"thoughts":2,"tool":1,"total":108},"model":"gemini-2.5-pro"}' \
    '{"id":"g1","timestamp":"2026-01-01T00:00:02.000Z","type":"gemini","content":"yo","tokens":{"input":100,"output":5,"cached":60,"thoughts":2,"tool":1,"total":108},"model":"gemini-2.5-pro","toolCalls":[{"id":"c1","name":"read_file","args":{"absolute_path":"/p/a"},"result":null,"status":"executing"}]}' \
    '{"id":"t1","timestamp":"2026-01-01T00:00:03.000Z","type":"user","content":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"x"}}}]}' \
    '{"id":"g1","timestamp":"2026-01-01T00:00:02.000Z","type":"gemini","content":"yo","tokens":{"input":100,"output":5,"cached":60,"thoughts":2,"tool":1,"total":108},"model":"gemini-2.5-pro","toolCalls":[{"id":"c1","name":"read_file","args":{},"status":"success","agentId":"a"}]}' \
    '{"id":"i1","timestamp":"2026-01-01T00:00:04.000Z","type":"info","content":[{"text":"img"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}' \
    '{"$set":{"messages":[{"id":"x1","timestamp":"2026-01-01T00:00:05.000Z","type":"user","content":[{"text":"summary"}]},{"id":"t1","timestamp":"2026-01-01T00:00:03.000Z","type":"user","content":"x"}],"lastUpdated":"2026-01-01T00:00:05.000Z"}}' \
    '{"id":"u2","timestamp":"2026-01-01T00:00:06.000Z","type":"user","content":"again"}' \
    '{"$rewindTo":"u2"}' \
    '{"$set":{"sessionId":"s"}}' \
    '{"id":"e1","timestamp":"2026-01-01T00:00:07.000Z","type":"error","content":"boom"}' \
    >"$tmp/gemini/hand"
by_sha1 "$tmp/gemini" "$gemini_dir"

# Documents (amp, cline, gemini_legacy): the samples beside the project of
# at most 16 KiB, whole (a cut document does not parse; a larger one slows
# the fuzzer to a few runs a second), and hand-made documents, alone and
# as a rewrite of an earlier version (the two joined by "\n--\n", see
# fuzz/src/lib.rs: one more message, an edited one, a rewind).
for t in amp cline gemini_legacy; do mkdir -p "$corpus/$t" "$tmp/$t"; done
if [ -d "$samples" ]; then
    i=0
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        cp "$f" "$tmp/amp/s$i"
    done < <(find "$samples/amp" -name '*.json' -size -16k -print0 2>/dev/null)
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        cp "$f" "$tmp/cline/s$i"
    done < <(find "$samples/cline" \( -name '*.messages.json' -o -name 'api_conversation_history.json' \) -size -16k -print0 2>/dev/null)
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        cp "$f" "$tmp/gemini_legacy/s$i"
    done < <(find "$samples/gemini-cli" -name 'session-*.json' -size -16k -print0 2>/dev/null)
fi
amp1='{"v":3,"id":"T-1","created":1767865803494,"env":{"initial":{"trees":[{"uri":"file:///p"}],"tags":["model:claude-sonnet-4-5"]}},"messages":[{"role":"user","messageId":0,"content":[{"type":"text","text":"hi"}],"meta":{"sentAt":1767865803494}},{"role":"assistant","messageId":1,"content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"yo"},{"type":"tool_use","id":"c1","name":"Bash","input":{"cmd":"ls"}}],"state":{"type":"complete","stopReason":"tool_use"},"usage":{"model":"claude-sonnet-4-5","inputTokens":5,"outputTokens":7,"cacheCreationInputTokens":1,"cacheReadInputTokens":100,"timestamp":"2026-01-08T09:50:04.000Z"}}'
amp2=',{"role":"user","messageId":2,"content":[{"type":"tool_result","toolUseID":"c1","run":{"status":"done","result":{"output":"a","exitCode":0}}}]},{"role":"assistant","messageId":3,"content":[{"type":"text","text":"..."}],"state":{"type":"running"}}'
printf '%s' "$amp1]}" >"$tmp/amp/h1"
printf '%s\n--\n%s' "$amp1]}" "$amp1$amp2],\"usageLedger\":{\"events\":[{\"timestamp\":\"2026-01-08T09:50:04.000Z\",\"model\":\"claude-sonnet-4-5\",\"tokens\":{\"input\":5,\"output\":7},\"toMessageId\":1}]}}" >"$tmp/amp/h2"
cl1='{"version":1,"agent":"lead","sessionId":"s","messages":[{"id":"m1","role":"user","content":[{"type":"text","text":"hi"},{"type":"file","path":"/p/a","content":"x"}]},{"id":"m2","role":"assistant","ts":1745343730123,"modelInfo":{"id":"claude-sonnet-4-6","provider":"anthropic"},"metrics":{"inputTokens":21,"outputTokens":8,"cacheReadTokens":3,"cacheWriteTokens":1,"cost":0.1},"content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"c1","name":"read_files","input":{"path":"a"}}]}'
cl2=',{"id":"m3","role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"x"}],"is_error":false}]},{"id":"m4","role":"user","content":[{"type":"text","text":"sum"}],"metadata":{"kind":"compaction","usageBefore":{"inputTokens":9}}}'
printf '%s' "$cl1]}" >"$tmp/cline/h1"
printf '%s\n--\n%s' "$cl1]}" "$cl1$cl2]}" >"$tmp/cline/h2"
old='[{"role":"user","content":"<task>\nhi\n</task>"},{"role":"assistant","content":[{"type":"text","text":"<read_file>\n<path>a</path>\n</read_file>"}]}'
new='[{"role":"user","content":[{"type":"text","text":"<task>\nhi\n</task>"},{"type":"text","text":"<environment_details>\nx\n</environment_details>"}]},{"role":"assistant","id":"r1","ts":1,"modelInfo":{"modelId":"m","providerId":"anthropic","mode":"act"},"metrics":{"tokens":{"prompt":10,"completion":2,"cached":4},"cost":0}'
printf '%s\n--\n%s' "$old]" "$old,{\"role\":\"user\",\"content\":\"[TASK RESUMPTION]\"}]" >"$tmp/cline/h3"
printf '%s' "$new,\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}]" >"$tmp/cline/h4"
gl1='{"sessionId":"s","projectHash":"h","startTime":"2026-01-01T00:00:00.000Z","lastUpdated":"2026-01-01T00:00:02.000Z","messages":[{"id":"u1","timestamp":"2026-01-01T00:00:01.000Z","type":"user","content":[{"text":"hi"}]},{"id":"g1","timestamp":"2026-01-01T00:00:02.000Z","type":"gemini","content":"yo","thoughts":[{"subject":"s","description":"d","timestamp":"2026-01-01T00:00:02.000Z"}],"tokens":{"input":100,"output":5,"cached":60,"thoughts":2,"tool":1,"total":108},"model":"gemini-2.5-pro","toolCalls":[{"id":"c1","name":"read_file","args":{},"result":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"x"}}}],"status":"success"}]}'
gl2=',{"id":"i1","timestamp":"2026-01-01T00:00:04.000Z","type":"info","content":"note"},{"id":"u2","timestamp":"2026-01-01T00:00:05.000Z","type":"user","content":"again"}'
printf '%s' "$gl1],\"kind\":\"main\"}" >"$tmp/gemini_legacy/h1"
printf '%s\n--\n%s' "$gl1$gl2],\"kind\":\"main\"}" "$gl1],\"kind\":\"main\"}" >"$tmp/gemini_legacy/h2"
printf '%s\n--\n%s' "$gl1],\"kind\":\"main\"}" "$gl1$gl2],\"directories\":[\"/p\"],\"kind\":\"subagent\"}" >"$tmp/gemini_legacy/h3"
for t in amp cline gemini_legacy; do by_sha1 "$tmp/$t" "$corpus/$t"; done

# Databases (opencode, goose, cursor): the fixture databases' real column
# values as the targets' input lines (fuzz/db_seeds.py runs each agent's
# make_fixture.py), and hand-made inputs.
python3 "$here/db_seeds.py" "$samples" "$corpus"

# Goose's legacy sessions (goose_legacy): the shared sample, and a file of
# the shapes the reader maps (no id, an id, a tool call and its result,
# injected context, a damaged line), alone and rewritten with one more.
mkdir -p "$tmp/goose_legacy" "$corpus/goose_legacy"
for f in "$samples"/goose/deja-vu/fixtures/registry/goose/sessions/*.jsonl; do
    [ -f "$f" ] && cp "$f" "$tmp/goose_legacy/$(basename "$f")"
done
gm='{"working_dir":"/p","description":"t","message_count":4,"accumulated_total_tokens":1200,"accumulated_input_tokens":1000,"accumulated_output_tokens":200}'
g1='{"role":"user","created":1735732800,"content":[{"type":"text","text":"why?"}],"metadata":{"userVisible":true,"agentVisible":true}}'
g2='{"id":"m2","role":"assistant","created":1735732805,"content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"toolRequest","id":"c1","toolCall":{"status":"success","value":{"name":"developer__shell","arguments":{"command":"make"}}}}]}'
g3='{"role":"user","created":1735732806,"content":[{"type":"toolResponse","id":"c1","toolResult":{"status":"success","value":{"content":[{"type":"text","text":"ok"}],"isError":false}}}]}'
g4='{"role":"user","created":1735732806,"content":[{"type":"text","text":"<ctx>"}],"metadata":{"userVisible":false,"agentVisible":true}}'
printf '%s
%s
%s
%s
{"role":"assist
' "$gm" "$g1" "$g2" "$g3" >"$tmp/goose_legacy/h1"
printf '%s
%s
%s
--
%s
%s
%s
%s
' "$gm" "$g1" "$g2" "$gm" "$g1" "$g2" "$g4" >"$tmp/goose_legacy/h2"
by_sha1 "$tmp/goose_legacy" "$corpus/goose_legacy"

echo "seed.sh: $(ls "$corpus/opencode" | wc -l) in $corpus/opencode, $(ls "$corpus/goose" | wc -l) in $corpus/goose, $(ls "$corpus/goose_legacy" | wc -l) in $corpus/goose_legacy, $(ls "$corpus/cursor" | wc -l) in $corpus/cursor"
echo "seed.sh: $(ls "$line_dir" | wc -l) inputs in $line_dir, $(ls "$reader_dir" | wc -l) in $reader_dir, $(ls "$claude_dir" | wc -l) in $claude_dir, $(ls "$codex_dir" | wc -l) in $codex_dir, $(ls "$qwen_dir" | wc -l) in $qwen_dir, $(ls "$copilot_dir" | wc -l) in $copilot_dir, $(ls "$cursor_cli_dir" | wc -l) in $cursor_cli_dir, $(ls "$gemini_dir" | wc -l) in $gemini_dir, $(ls "$corpus/amp" | wc -l) in $corpus/amp, $(ls "$corpus/cline" | wc -l) in $corpus/cline, $(ls "$corpus/gemini_legacy" | wc -l) in $corpus/gemini_legacy"
