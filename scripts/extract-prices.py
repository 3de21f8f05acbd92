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

After it comes models.dev's price table and its catalog rules (two more
raw deflate streams), written to crates/mem-ingest-parse/data/
prices-models-dev.json: ccusage prices from it a model LiteLLM's list does
not name.
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

# The second table, right after the first: models.dev's prices (its
# api.json flattened to "provider/model" and bare model ids, USD per million
# tokens: input, output, cache_read, cache_write, and "tiers" that price a
# whole response above a context size; "exactOnly" ids are matched by their
# full name only), then the catalog's rules (ids of model authors,
# "owners", among them). ccusage prices a model LiteLLM's list does not
# have from it (Gemini CLI's, Qwen Code's, Copilot CLI's Claude names).
second = zlib.decompressobj(-15)
dev = json.loads(second.decompress(stream.unused_data[:8 << 20]))
third = zlib.decompressobj(-15)
rules = json.loads(third.decompress(second.unused_data[:4 << 20]))
dev_out = {
    "source": "models.dev (https://models.dev, its api.json), as embedded by ccusage 20.0.24 "
              "for --offline (models-dev-pricing.json, models-dev-catalog-rules.json)",
    "license": "MIT (models.dev: Copyright (c) 2025 spin.dev, github.com/anomalyco/models.dev LICENSE; ccusage: Copyright (c) 2025 ryoppippi)",
    "ccusage_version": "20.0.24",
    "ccusage_binary_sha256": hashlib.sha256(data).hexdigest(),
    "extracted": "2026-12-05",
    "units": "USD per million tokens; tiers: the prices of a whole response whose context "
             "(input and cache) is above the tier's size",
    "owners": rules["owners"],
    "models": {k: {f: v for f, v in dev[k].items() if f in ("cost", "exactOnly")}
               for k in sorted(dev) if "cost" in dev[k]},
}
if len(sys.argv) <= 2:
    json.dump(dev_out, open("crates/mem-ingest-parse/data/prices-models-dev.json", "w"),
              indent=0, sort_keys=False, separators=(",", ":"))
print(f"{len(dev_out['models'])} models.dev models", file=sys.stderr)
