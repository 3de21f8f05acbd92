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
//! priced at it, as ccusage does. A model the table does not know has no
//! cost (`None`): never a false 0.

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
}

impl Resolved {
    /// The cost of one response: [`Prices::cost_with_hour`]'s, to the bit.
    pub fn cost(&self, u: &Usage, hour: u64) -> f64 {
        let p = &self.price;
        let hour = hour.min(u.cache_write);
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

/// The shipped table's file shape.
#[derive(Deserialize)]
struct Shipped {
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
            Prices::from_json(include_bytes!("../data/prices.json"))
                .expect("the shipped price table parses (tested)")
        })
    }

    /// A table from JSON: the shipped file's shape (`source`, `models`),
    /// or LiteLLM's `model_prices_and_context_window.json` (models at the
    /// top level; entries without a per-token price, as its
    /// `sample_spec`, are left out).
    ///
    /// # Errors
    /// Not JSON, or neither shape: why.
    pub fn from_json(bytes: &[u8]) -> Result<Prices, String> {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let (source, overrides, models) = match serde_json::from_value::<Shipped>(v.clone()) {
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
        let mut t = Prices {
            source,
            overrides,
            ..Prices::default()
        };
        for (name, p) in models {
            // An entry that is not a model's prices (LiteLLM's
            // `sample_spec`, a string price) is not a model.
            let Ok(p) = serde_json::from_value::<Price>(p) else {
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
        t.lower.sort();
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
        let price = self.find(name)?;
        let fast = fast.then(|| self.fast_multiplier(name, price));
        Some(Resolved {
            price: *price,
            fast,
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
}
