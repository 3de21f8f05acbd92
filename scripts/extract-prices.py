#!/usr/bin/env python3
"""Extracts the LiteLLM price list that ccusage embeds for --offline into
crates/mem-ingest-parse/data/prices.json (usage: scripts/extract-prices.py
[CCUSAGE_BINARY]).

ccusage 20 is a native binary; its offline LiteLLM snapshot is a raw
deflate stream of compact JSON (per model: i, o, cc, cr the per-token
prices of input, output, cache write and cache read; ia, oa, cca, cra
the same above 200,000 tokens; ctx the context window; fast a multiplier
for speed "fast"), found after the string "deepseek-v4-pro" in 20.0.24.
The keys are written out under LiteLLM's own names.
"""
import hashlib
import json
import sys
import zlib

BINARY = sys.argv[1] if len(sys.argv) > 1 else (
    "/tmp/ccusage-reference/node_modules/@ccusage/ccusage-linux-x64/bin/ccusage")
NAMES = {
    "i": "input_cost_per_token",
    "o": "output_cost_per_token",
    "cc": "cache_creation_input_token_cost",
    "cr": "cache_read_input_token_cost",
    "ia": "input_cost_per_token_above_200k_tokens",
    "oa": "output_cost_per_token_above_200k_tokens",
    "cca": "cache_creation_input_token_cost_above_200k_tokens",
    "cra": "cache_read_input_token_cost_above_200k_tokens",
    "ctx": "max_input_tokens",
    "fast": "fast_multiplier",
}

data = open(BINARY, "rb").read()
marker = b"deepseek-v4-pro"
at = data.find(marker)
if at < 0:
    sys.exit(f"{BINARY}: the marker {marker!r} is not there (another ccusage version?)")
stream = zlib.decompressobj(-15)
raw = stream.decompress(data[at + len(marker):at + len(marker) + (8 << 20)])
compact = json.loads(raw)
# The speed "fast" multipliers ccusage applies besides the list's own
# (plain JSON in the binary, just before this message).
end = data.find(b"parse embedded fast-multiplier-overrides.json")
start = data.rfind(b'{\n\t"exact"', 0, end)
overrides = json.loads(data[start:end])
models = {
    name: {NAMES[k]: v for k, v in sorted(p.items(), key=lambda kv: list(NAMES).index(kv[0]))}
    for name, p in sorted(compact.items())
}
out = {
    "source": "LiteLLM model_prices_and_context_window.json "
              "(https://github.com/BerriAI/litellm), as embedded by ccusage 20.0.24 for --offline",
    "license": "MIT (LiteLLM: Copyright (c) 2023 Berri AI; ccusage: Copyright (c) 2025 ryoppippi)",
    "ccusage_version": "20.0.24",
    "ccusage_binary_sha256": hashlib.sha256(data).hexdigest(),
    "extracted": "2026-12-05",
    "units": "USD per token; *_above_200k_tokens: the price of the tokens of that kind past 200,000 in one response",
    "fast_multiplier_overrides": overrides,
    "models": models,
}
json.dump(out, sys.stdout if len(sys.argv) > 2 else open(
    "crates/mem-ingest-parse/data/prices.json", "w"), indent=1, sort_keys=False)
print(f"{len(models)} models", file=sys.stderr)
