//! Prices per token, to cost the usage of agents that record no cost of
//! their own (all but pi, and Claude Code's older `costUSD` lines).
//!
//! The table shipped is data, `data/prices.json`: the LiteLLM price list
//! (MIT) that ccusage 20.0.24 embeds for `--offline`, extracted from its
//! binary by `scripts/extract-prices.py`, with its source, version and
//! date. A newer table can be read from a file ([`Prices::from_json`]):
//! ours, or LiteLLM's `model_prices_and_context_window.json` as it is.
//!
//! A response's cost is each kind of token (input, output, cache write,
//! cache read) times its price; where a model has a price above 200,000
//! tokens, the tokens of that kind past 200,000 in one response are
//! priced at it, as ccusage does. A model LiteLLM's list does not name is
//! priced from the second table ccusage embeds, models.dev's
//! (`data/prices-models-dev.json`), as ccusage prices Gemini CLI's, Qwen
//! Code's and Copilot CLI's Claude names. A model neither table knows has
//! no cost (`None`): never a false 0.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::record::Usage;

/// The tokens of one kind in one response past which the higher price
/// applies, where a model has one.
pub const TIER_TOKENS: u64 = 200_000;

/// One model's prices, in USD per token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct Price {
    /// Input (not cached) tokens.
    #[serde(rename = "input_cost_per_token", default)]
    pub input: Option<f64>,
    /// Output tokens.
    #[serde(rename = "output_cost_per_token", default)]
    pub output: Option<f64>,
    /// Tokens written to the cache.
    #[serde(rename = "cache_creation_input_token_cost", default)]
    pub cache_write: Option<f64>,
    /// Tokens read from the cache.
    #[serde(rename = "cache_read_input_token_cost", default)]
    pub cache_read: Option<f64>,
    /// Input past [`TIER_TOKENS`] in one response.
    #[serde(rename = "input_cost_per_token_above_200k_tokens", default)]
    pub input_above: Option<f64>,
    /// Output past [`TIER_TOKENS`].
    #[serde(rename = "output_cost_per_token_above_200k_tokens", default)]
    pub output_above: Option<f64>,
    /// Cache writes past [`TIER_TOKENS`].
    #[serde(rename = "cache_creation_input_token_cost_above_200k_tokens", default)]
    pub cache_write_above: Option<f64>,
    /// Cache reads past [`TIER_TOKENS`].
    #[serde(rename = "cache_read_input_token_cost_above_200k_tokens", default)]
    pub cache_read_above: Option<f64>,
    /// What `speed: "fast"` multiplies the cost by.
    #[serde(rename = "fast_multiplier", default)]
    pub fast: Option<f64>,
}

/// `tokens` at `base`, those past [`TIER_TOKENS`] at `above` when there
/// is one (ccusage's `calculateTieredCost`).
fn tiered(tokens: u64, base: Option<f64>, above: Option<f64>) -> f64 {
    if tokens == 0 {
        return 0.0;
    }
    match above {
        Some(a) if tokens > TIER_TOKENS => {
            (tokens - TIER_TOKENS) as f64 * a + base.map_or(0.0, |b| TIER_TOKENS as f64 * b)
        }
        _ => base.map_or(0.0, |b| tokens as f64 * b),
    }
}

impl Price {
    /// The cost of one response's usage.
    pub fn cost(&self, u: &Usage) -> f64 {
        tiered(u.input, self.input, self.input_above)
            + tiered(u.output, self.output, self.output_above)
            + tiered(u.cache_write, self.cache_write, self.cache_write_above)
            + tiered(u.cache_read, self.cache_read, self.cache_read_above)
    }

    /// Whether it prices anything.
    fn any(&self) -> bool {
        self.input.is_some() || self.output.is_some()
    }
}

/// A model's price as [`Prices::resolve`] found it: its prices, and the
/// multiplier of a model named with `-fast`.
#[derive(Debug, Clone, Copy)]
pub struct Resolved {
    price: Price,
    fast: Option<f64>,
    /// Not in LiteLLM's list: models.dev's price.
    dev: Option<&'static DevPrice>,
}

impl Resolved {
    /// The cost of one response: [`Prices::cost_with_hour`]'s, to the bit.
    pub fn cost(&self, u: &Usage, hour: u64) -> f64 {
        let hour = hour.min(u.cache_write);
        if let Some(d) = self.dev {
            return d.cost(u, hour);
        }
        let p = &self.price;
        let five = Usage {
            cache_write: u.cache_write - hour,
            ..*u
        };
        let mut cost = p.cost(&five) + hour as f64 * 2.0 * p.input.unwrap_or(0.0);
        if let Some(m) = self.fast {
            cost *= m;
        }
        cost
    }
}

/// A price table: models by name, and where it came from.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    models: HashMap<String, Price>,
    /// Names in lower case, sorted, for the fuzzy match.
    lower: Vec<(String, String)>,
    /// Where the table came from (the file's `source`, or the path).
    pub source: String,
    /// Fast multipliers beyond the models' own.
    overrides: FastOverrides,
    /// The names a model not in the table by its own name was found under
    /// ([`Prices::find`]'s prefixes and fuzzy match), by that name: `stats`
    /// prices every response, and the fuzzy match scans the whole table.
    found: FoundMemo,
    /// Models LiteLLM's list does not name are priced from models.dev's
    /// table (the shipped table's; a table read from a file prices only
    /// what it names).
    models_dev: bool,
}

/// [`Prices::find`]'s memo: model name to the table's name (None: not
/// priced). A clone starts empty.
#[derive(Debug, Default)]
struct FoundMemo(std::sync::RwLock<HashMap<String, Option<String>>>);

impl Clone for FoundMemo {
    fn clone(&self) -> Self {
        FoundMemo::default()
    }
}

/// ccusage's fast multipliers beyond the price list's: by exact model
/// name, and by a prefix of the name.
#[derive(Debug, Clone, Default, Deserialize)]
struct FastOverrides {
    #[serde(default)]
    exact: HashMap<String, f64>,
    #[serde(default)]
    normalized_prefix: HashMap<String, f64>,
}

/// The shipped table's file shape, each model's entry kept as its JSON
/// text ([`Prices::from_json`]).
#[derive(Deserialize)]
struct Shipped<'a> {
    source: String,
    #[serde(default)]
    fast_multiplier_overrides: FastOverrides,
    #[serde(borrow)]
    models: HashMap<String, &'a serde_json::value::RawValue>,
}

/// The shipped shape read from a [`serde_json::Value`]: the way a
/// document that is not exactly that shape (duplicate keys, a LiteLLM
/// list) is read, as it always was.
#[derive(Deserialize)]
struct ShippedValue {
    source: String,
    #[serde(default)]
    fast_multiplier_overrides: FastOverrides,
    models: HashMap<String, serde_json::Value>,
}

/// Prefixes tried before a model's name, in order, when the name alone is
/// not in the table (ccusage's order).
const PREFIXES: [&str; 7] = [
    "anthropic/",
    "claude-3-5-",
    "claude-3-",
    "claude-",
    "openai/",
    "azure/",
    "openrouter/openai/",
];

impl Prices {
    /// The table shipped with the library (parsed once).
    pub fn shipped() -> &'static Prices {
        static SHIPPED: OnceLock<Prices> = OnceLock::new();
        SHIPPED.get_or_init(|| {
            let mut p = Prices::from_json(include_bytes!("../data/prices.json"))
                .expect("the shipped price table parses (tested)");
            p.models_dev = true;
            p
        })
    }

    /// A table from JSON: the shipped file's shape (`source`, `models`),
    /// or LiteLLM's `model_prices_and_context_window.json` (models at the
    /// top level; entries without a per-token price, as its
    /// `sample_spec`, are left out). It prices only the models it names
    /// (not models.dev's, which the shipped table adds).
    ///
    /// # Errors
    /// Not JSON, or neither shape: why.
    pub fn from_json(bytes: &[u8]) -> Result<Prices, String> {
        // The shipped shape is parsed straight from the bytes, each
        // model's entry once, as its own text: every `stats` reads the
        // shipped table before its first file, and building a
        // `serde_json::Value` of it, cloning that, then converting each
        // entry was 8.6 M instructions of a run's start (6 M of them
        // saved). Any other document takes the way it always took.
        if let Ok(s) = serde_json::from_slice::<Shipped>(bytes) {
            let models = s.models.into_iter().map(|(name, raw)| {
                let p = serde_json::from_str::<Price>(raw.get()).ok();
                (name, p)
            });
            return Prices::of_models(s.source, s.fast_multiplier_overrides, models);
        }
        Prices::from_value_json(bytes)
    }

    /// [`Prices::from_json`] by way of a [`serde_json::Value`]: the way of
    /// a document that is not exactly the shipped shape.
    fn from_value_json(bytes: &[u8]) -> Result<Prices, String> {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let (source, overrides, models) = match serde_json::from_value::<ShippedValue>(v.clone()) {
            Ok(s) => (s.source, s.fast_multiplier_overrides, s.models),
            Err(_) => match v {
                serde_json::Value::Object(m) => (
                    "a LiteLLM price list".to_owned(),
                    FastOverrides::default(),
                    m.into_iter().collect(),
                ),
                _ => return Err("not a JSON object of models".to_owned()),
            },
        };
        let models = models
            .into_iter()
            .map(|(name, p)| (name, serde_json::from_value::<Price>(p).ok()));
        Prices::of_models(source, overrides, models)
    }

    /// The table of `models` (an entry that is not a model's prices,
    /// LiteLLM's `sample_spec` or a string price, is `None` and left out).
    fn of_models(
        source: String,
        overrides: FastOverrides,
        models: impl Iterator<Item = (String, Option<Price>)>,
    ) -> Result<Prices, String> {
        let mut t = Prices {
            source,
            overrides,
            ..Prices::default()
        };
        t.models.reserve(models.size_hint().0);
        for (name, p) in models {
            let Some(p) = p else {
                continue;
            };
            if p.any() {
                t.lower.push((name.to_lowercase(), name.clone()));
                t.models.insert(name, p);
            }
        }
        if t.models.is_empty() {
            return Err("no model with a per-token price".to_owned());
        }
        // Pairs of distinct names: no two equal, so unstable is the
        // stable order.
        t.lower.sort_unstable();
        Ok(t)
    }

    /// How many models it prices.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Whether it prices none.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// A model's prices: its name, else its name after one of ccusage's
    /// provider prefixes, else the first model (by name) whose name holds
    /// it or is held by it, case folded.
    pub fn find(&self, model: &str) -> Option<&Price> {
        if model.is_empty() {
            return None;
        }
        if let Some(p) = self.models.get(model) {
            return Some(p);
        }
        let memo = |m: &HashMap<String, Option<String>>| {
            m.get(model)
                .map(|name| name.as_ref().and_then(|n| self.models.get(n)))
        };
        if let Some(found) = memo(&self.found.0.read().unwrap_or_else(|e| e.into_inner())) {
            return found;
        }
        let name = self.find_name(model);
        let mut m = self.found.0.write().unwrap_or_else(|e| e.into_inner());
        m.insert(model.to_owned(), name.map(str::to_owned));
        memo(&m).flatten()
    }

    /// The table's name of `model`, not in it by its own: with one of
    /// ccusage's prefixes, else the first name (lower case, sorted) that
    /// holds it or that it holds.
    fn find_name(&self, model: &str) -> Option<&str> {
        for pre in PREFIXES {
            let name = format!("{pre}{model}");
            if let Some((k, _)) = self.models.get_key_value(&name) {
                return Some(k);
            }
        }
        let m = model.to_lowercase();
        self.lower
            .iter()
            .find(|(k, _)| k.contains(&m) || m.contains(k.as_str()))
            .and_then(|(_, name)| self.models.get_key_value(name))
            .map(|(k, _)| k.as_str())
    }

    /// The cost of one response of `model`, None when the model is not
    /// priced.
    pub fn cost(&self, model: Option<&str>, u: &Usage) -> Option<f64> {
        self.cost_with_hour(model, u, 0)
    }

    /// [`Prices::cost`], `hour` of the cache writes kept an hour (priced
    /// at twice the input price, as ccusage does), and a model named with
    /// `-fast` (Claude Code's `speed: "fast"`) priced as its base model
    /// times its fast multiplier (the model's, else ccusage's override,
    /// else 1).
    pub fn cost_with_hour(&self, model: Option<&str>, u: &Usage, hour: u64) -> Option<f64> {
        Some(self.resolve(model?)?.cost(u, hour))
    }

    /// What [`Prices::cost_with_hour`] looks up for `model`, looked up
    /// once: a caller pricing many responses of one model keeps it (the
    /// lookup, a hash and up to seven more with a prefix, then a scan of
    /// every name, costs more than the pricing).
    pub fn resolve(&self, model: &str) -> Option<Resolved> {
        let (name, fast) = match model.strip_suffix("-fast") {
            Some(base) if !self.models.contains_key(model) => (base, true),
            _ => (model, false),
        };
        let Some(price) = self.find(name) else {
            // Not in LiteLLM's list: models.dev's, as ccusage.
            if !self.models_dev {
                return None;
            }
            return DevTable::shipped().find(model).map(|d| Resolved {
                price: Price::default(),
                fast: None,
                dev: Some(d),
            });
        };
        let fast = fast.then(|| self.fast_multiplier(name, price));
        Some(Resolved {
            price: *price,
            fast,
            dev: None,
        })
    }

    fn fast_multiplier(&self, name: &str, p: &Price) -> f64 {
        if let Some(m) = p.fast {
            return m;
        }
        if let Some(m) = self.overrides.exact.get(name) {
            return *m;
        }
        self.overrides
            .normalized_prefix
            .iter()
            .filter(|(pre, _)| name.starts_with(pre.as_str()))
            .max_by_key(|(pre, _)| pre.len())
            .map_or(1.0, |(_, m)| *m)
    }
}

/// The second table ccusage 20.0.24 embeds, models.dev's
/// (`data/prices-models-dev.json`, extracted with the first): prices in USD
/// per million tokens, by `provider/model` and bare model ids, some with
/// context tiers. ccusage prices from it a model LiteLLM's list does not
/// name (Gemini CLI's, Qwen Code's, Copilot CLI's Claude names), and so do
/// we: the model's own id, else `<owner>/<model>` for the first model
/// author (models.dev's `owners`, in its order) that has one.
#[derive(Debug, Default)]
struct DevTable {
    /// Each model's price as written (its `cost`), parsed when it is first
    /// found: a run prices a few models of the table's thousands.
    models: HashMap<Cow<'static, str>, DevSlot>,
    owners: Vec<String>,
}

/// A model of the models.dev table: its `cost` object as written, and it
/// parsed, once found.
#[derive(Debug)]
struct DevSlot {
    cost: &'static serde_json::value::RawValue,
    price: OnceLock<DevPrice>,
}

/// Per million tokens of each kind.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct DevCost {
    #[serde(default)]
    input: Option<f64>,
    #[serde(default)]
    output: Option<f64>,
    #[serde(default)]
    cache_read: Option<f64>,
    #[serde(default)]
    cache_write: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
struct DevBound {
    size: u64,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Clone, Deserialize)]
struct DevTier {
    #[serde(flatten)]
    cost: DevCost,
    tier: DevBound,
}

#[derive(Debug, Clone, Deserialize)]
struct DevPrice {
    #[serde(flatten)]
    base: DevCost,
    #[serde(default)]
    tiers: Vec<DevTier>,
}

/// A model's entry, its `cost` kept as written.
#[derive(Deserialize)]
struct DevEntry<'a> {
    #[serde(borrow)]
    cost: &'a serde_json::value::RawValue,
    #[serde(default, rename = "exactOnly")]
    exact_only: bool,
}

#[derive(Deserialize)]
struct DevFile<'a> {
    owners: Vec<String>,
    #[serde(borrow)]
    models: HashMap<Cow<'a, str>, DevEntry<'a>>,
}

/// The models.dev table as shipped.
static DEV_TABLE: &[u8] = include_bytes!("../data/prices-models-dev.json");

impl DevTable {
    /// The shipped table (its names and owners read once; a model's price
    /// parsed when it is first found).
    fn shipped() -> &'static DevTable {
        static SHIPPED: OnceLock<DevTable> = OnceLock::new();
        SHIPPED.get_or_init(|| {
            let f: DevFile<'static> = serde_json::from_slice(DEV_TABLE)
                .expect("the shipped models.dev table parses (tested)");
            let mut owned = HashMap::with_capacity(f.models.len());
            for (name, e) in f.models {
                // `exactOnly`: found by its full id alone, never as an
                // owner's (the only way the lookup below differs).
                let key = if e.exact_only {
                    Cow::Owned(format!("={name}"))
                } else {
                    name
                };
                owned.insert(
                    key,
                    DevSlot {
                        cost: e.cost,
                        price: OnceLock::new(),
                    },
                );
            }
            DevTable {
                models: owned,
                owners: f.owners,
            }
        })
    }

    /// A model's price: its id, else its id under the first owner that
    /// has it.
    fn find(&self, model: &str) -> Option<&DevPrice> {
        if model.is_empty() {
            return None;
        }
        let slot = match self
            .models
            .get(model)
            .or_else(|| self.models.get(format!("={model}").as_str()))
        {
            Some(s) => s,
            None => self
                .owners
                .iter()
                .find_map(|o| self.models.get(format!("{o}/{model}").as_str()))?,
        };
        Some(slot.price.get_or_init(|| {
            serde_json::from_str(slot.cost.get())
                .expect("every price of the shipped models.dev table parses (tested)")
        }))
    }
}

impl DevPrice {
    /// One response's cost, `hour` of its cache writes kept an hour. A
    /// response whose context (input, cache reads and writes) is above a
    /// tier's size is priced whole at that tier's prices (the largest such
    /// tier; a kind it does not price at the base price), as ccusage does
    /// (checked on a Gemini response of 300,000). A cache read without a
    /// price is a tenth of the input price (as ccusage prices Qwen Code's
    /// `qwen3-coder-plus`); a cache write without one the input price
    /// times 1.25, and one kept an hour twice the input price, as for
    /// LiteLLM's prices (no agent ccusage reads has such a write).
    fn cost(&self, u: &Usage, hour: u64) -> f64 {
        let context = u
            .input
            .saturating_add(u.cache_read)
            .saturating_add(u.cache_write);
        let tier = self
            .tiers
            .iter()
            .filter(|t| t.tier.kind == "context" && context > t.tier.size)
            .max_by_key(|t| t.tier.size);
        let pick = |f: fn(&DevCost) -> Option<f64>| {
            tier.and_then(|t| f(&t.cost)).or_else(|| f(&self.base))
        };
        let input = pick(|c| c.input).unwrap_or(0.0);
        let output = pick(|c| c.output).unwrap_or(0.0);
        let read = pick(|c| c.cache_read).unwrap_or(input * 0.1);
        let write = pick(|c| c.cache_write).unwrap_or(input * 1.25);
        let hour = hour.min(u.cache_write);
        (u.input as f64 * input
            + u.output as f64 * output
            + u.cache_read as f64 * read
            + (u.cache_write - hour) as f64 * write
            + hour as f64 * 2.0 * input)
            / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses_with_its_source() {
        let t = Prices::shipped();
        assert_eq!(t.len(), 600);
        assert!(t.source.contains("ccusage 20.0.24"), "{}", t.source);
        let p = t.find("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(p.input, Some(3e-6));
        assert_eq!(p.input_above, Some(6e-6));
    }

    /// The shipped table read straight from its bytes is the table the
    /// `serde_json::Value` way reads from them: every model, price and
    /// name, the source and the fast multipliers.
    #[test]
    fn the_shipped_shape_reads_as_the_value_way_reads_it() {
        let bytes = include_bytes!("../data/prices.json");
        let direct = Prices::from_json(bytes).unwrap();
        let by_value = Prices::from_value_json(bytes).unwrap();
        assert_eq!(direct.len(), 600);
        assert_eq!(direct.models, by_value.models);
        assert_eq!(direct.lower, by_value.lower);
        assert_eq!(direct.source, by_value.source);
        assert_eq!(direct.overrides.exact, by_value.overrides.exact);
        assert_eq!(
            direct.overrides.normalized_prefix,
            by_value.overrides.normalized_prefix
        );
        // A shipped shape with a model that is not prices, and one with
        // a string price: left out both ways.
        let odd = br#"{"source":"s","models":{"a":{"input_cost_per_token":1e-6},"b":"x","c":{"input_cost_per_token":"1"}}}"#;
        let (d, v) = (
            Prices::from_json(odd).unwrap(),
            Prices::from_value_json(odd).unwrap(),
        );
        assert_eq!(d.models.keys().collect::<Vec<_>>(), vec!["a"]);
        assert_eq!(d.models, v.models);
    }

    /// A model found by a prefix or the fuzzy match is found again, from
    /// the memo, as the table's same entry; one not priced stays not
    /// priced; a clone finds them as the original does.
    #[test]
    fn a_model_found_once_is_found_again_the_same() {
        let t = Prices::shipped();
        let fuzzy = t
            .lower
            .iter()
            .position(|(k, _)| k.contains("sonnet-4-5"))
            .unwrap();
        let (_, name) = &t.lower[fuzzy];
        for model in [
            "sonnet-4-5",
            "claude-sonnet-4-5-20250929-preview",
            "nothing-like-it",
        ] {
            let name_first = t.find_name(model);
            let first = t.find(model).map(std::ptr::from_ref);
            let again = t.find(model).map(std::ptr::from_ref);
            assert_eq!(first, again, "{model}");
            assert_eq!(
                first,
                name_first
                    .and_then(|n| t.models.get(n))
                    .map(std::ptr::from_ref)
            );
            let c = t.clone();
            assert_eq!(
                c.find(model).map(|p| p.input),
                t.find(model).map(|p| p.input)
            );
        }
        assert!(t.find("sonnet-4-5").is_some());
        assert!(t.find("nothing-like-it").is_none());
        assert!(t.models.contains_key(name));
    }

    #[test]
    fn tiers_price_the_tokens_past_200k() {
        let p = Price {
            input: Some(3e-6),
            input_above: Some(6e-6),
            output: Some(1.5e-5),
            ..Price::default()
        };
        let u = |input, output| Usage {
            input,
            output,
            ..Usage::default()
        };
        assert_eq!(p.cost(&u(200_000, 0)), 200_000.0 * 3e-6);
        assert_eq!(
            p.cost(&u(250_000, 10)),
            50_000.0 * 6e-6 + 200_000.0 * 3e-6 + 10.0 * 1.5e-5
        );
        // No tier for output: all at the base price.
        assert_eq!(p.cost(&u(0, 300_000)), 300_000.0 * 1.5e-5);
    }

    #[test]
    fn unknown_models_have_no_cost_and_litellm_files_read() {
        let t = Prices::from_json(
            br#"{"sample_spec":{"input_cost_per_token":"0"},"m-1":{"input_cost_per_token":1e-6,"output_cost_per_token":2e-6}}"#,
        )
        .unwrap();
        assert_eq!(t.len(), 1);
        let u = Usage {
            input: 10,
            output: 5,
            ..Usage::default()
        };
        assert_eq!(t.cost(Some("m-1"), &u), Some(10.0 * 1e-6 + 5.0 * 2e-6));
        assert_eq!(t.cost(Some("zzz"), &u), None);
        assert_eq!(t.cost(None, &u), None);
        assert!(Prices::from_json(b"[1]").is_err());
        assert!(Prices::from_json(b"{}").is_err());
    }

    /// models.dev's prices for what LiteLLM's list does not name, as
    /// ccusage 20.0.24 prices them (each figure checked against it: a
    /// generated Gemini CLI home, a Gemini response of 300,000 tokens of
    /// context, Qwen Code responses with and without cache reads).
    /// Every price of the models.dev table parses (each is parsed only
    /// when its model is first found).
    #[test]
    fn every_models_dev_price_parses() {
        let t = DevTable::shipped();
        assert_eq!(t.models.len(), 2828);
        for slot in t.models.values() {
            let _: DevPrice = serde_json::from_str(slot.cost.get()).unwrap();
        }
    }

    #[test]
    fn models_dev_prices_what_litellm_does_not_name() {
        let t = Prices::shipped();
        let u = |input, output, cache_read| Usage {
            input,
            output,
            cache_read,
            total_tokens: input + output + cache_read,
            ..Usage::default()
        };
        let close = |a: Option<f64>, b: f64| {
            let a = a.unwrap();
            assert!((a - b).abs() < 1e-12, "{a} against {b}");
        };
        // gemini-2.5-pro: 1.25, 10, cache read 0.125 a million; a context
        // above 200,000 prices the whole response at 2.5, 15, 0.25.
        close(
            t.cost(Some("gemini-2.5-pro"), &u(50_000, 1_000, 100_000)),
            0.0625 + 0.01 + 0.0125,
        );
        close(
            t.cost(Some("gemini-2.5-pro"), &u(200_000, 1_000, 100_000)),
            0.5 + 0.015 + 0.025,
        );
        // qwen3-coder-plus: 1 and 5 a million, no cache read price: a
        // tenth of the input's (ccusage: 0.0154 for 10,000 in, 4,000
        // cached, 1,000 out, the cached tokens in its input too).
        close(
            t.cost(Some("qwen3-coder-plus"), &u(10_000, 1_000, 4_000)),
            0.0154,
        );
        // Copilot CLI's `claude-sonnet-4.5`: its author's (anthropic/), 3 a
        // million.
        close(t.cost(Some("claude-sonnet-4.5"), &u(100_000, 0, 0)), 0.3);
        // LiteLLM's list first: its own names keep its prices.
        close(
            t.cost(Some("claude-sonnet-4-5-20250929"), &u(100_000, 0, 0)),
            0.3,
        );
        assert_eq!(t.cost(Some("no-such-model-anywhere"), &u(1, 1, 1)), None);
    }
}
