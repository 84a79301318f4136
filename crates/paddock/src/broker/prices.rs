//! The price table: USD per million tokens as exact decimals, turned into
//! integer micro-dollars so that costs add up without float drift. The table
//! is vendored (`data/prices.toml`), dated and versioned, and can be replaced
//! by a file in the same format.

use std::collections::BTreeMap;
use std::path::Path;

use paddock_protocol::TokenUsage;
use serde::Deserialize;

const VENDORED: &str = include_str!("../../data/prices.toml");

#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("price table {origin}: cannot read: {source}")]
    Read {
        origin: String,
        source: std::io::Error,
    },
    #[error("price table {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("price table {origin}: model `{model}` field `{field}`: `{value}` is not a decimal with at most 6 fraction digits")]
    Decimal {
        origin: String,
        model: String,
        field: &'static str,
        value: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    version: String,
    models: BTreeMap<String, RawPrice>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    input: String,
    cached_input: String,
    #[serde(default)]
    cache_write: Option<String>,
    output: String,
}

/// One model's prices in micro-dollars per million tokens (so that
/// `tokens * price / 1_000_000` is micro-dollars).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelPrice {
    pub input: u64,
    pub cached_input: u64,
    pub cache_write: u64,
    pub output: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceTable {
    pub version: String,
    models: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// The table shipped inside the binary.
    pub fn vendored() -> Result<PriceTable, PriceError> {
        PriceTable::parse(VENDORED, "vendored")
    }

    pub fn load(path: &Path) -> Result<PriceTable, PriceError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PriceError::Read {
            origin: origin.clone(),
            source,
        })?;
        PriceTable::parse(&text, &origin)
    }

    pub fn parse(text: &str, origin: &str) -> Result<PriceTable, PriceError> {
        let raw: RawTable = toml::from_str(text).map_err(|e| PriceError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        let mut models = BTreeMap::new();
        for (name, p) in raw.models {
            let dec = |field: &'static str, value: &str| {
                parse_micros(value).ok_or_else(|| PriceError::Decimal {
                    origin: origin.to_string(),
                    model: name.clone(),
                    field,
                    value: value.to_string(),
                })
            };
            let input = dec("input", &p.input)?;
            let price = ModelPrice {
                input,
                cached_input: dec("cached_input", &p.cached_input)?,
                cache_write: match &p.cache_write {
                    Some(v) => dec("cache_write", v)?,
                    None => input,
                },
                output: dec("output", &p.output)?,
            };
            models.insert(name, price);
        }
        Ok(PriceTable {
            version: raw.version,
            models,
        })
    }

    /// The names of the priced models, sorted.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// The price of a model: exact name, or the name without a `-YYYYMMDD` suffix.
    pub fn price(&self, model: &str) -> Option<ModelPrice> {
        if let Some(p) = self.models.get(model) {
            return Some(*p);
        }
        // Bedrock ids: `us.anthropic.claude-…-20250929-v1:0` → `claude-…-20250929`.
        if let Some(name) = super::bedrock::price_name(model) {
            return self.price(name);
        }
        // `-20250929` (Anthropic), `@20250929` (Vertex AI).
        let (stem, date) = model.rsplit_once(['-', '@'])?;
        if date.len() == 8 && date.chars().all(|c| c.is_ascii_digit()) {
            return self.models.get(stem).copied();
        }
        None
    }

    /// The cost of `tokens` on `model` in micro-dollars, rounded half up;
    /// `None` when the model has no price.
    pub fn cost_micros(&self, model: &str, tokens: &TokenUsage) -> Option<i64> {
        let p = self.price(model)?;
        let total: u128 = u128::from(tokens.input_tokens) * u128::from(p.input)
            + u128::from(tokens.cached_input_tokens) * u128::from(p.cached_input)
            + u128::from(tokens.cache_write_tokens) * u128::from(p.cache_write)
            + u128::from(tokens.output_tokens) * u128::from(p.output);
        let micros = (total + 500_000) / 1_000_000;
        Some(i64::try_from(micros).unwrap_or(i64::MAX))
    }
}

/// `"1.25"` → 1_250_000 (micro-units). At most 6 fraction digits.
fn parse_micros(s: &str) -> Option<u64> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int.is_empty() || frac.len() > 6 {
        return None;
    }
    if !int.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let int: u64 = int.parse().ok()?;
    let mut frac_val: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..6 {
        frac_val *= 10;
    }
    int.checked_mul(1_000_000)?.checked_add(frac_val)
}

/// Micro-dollars as `$0.001234`.
pub fn format_usd(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    format!("{sign}${}.{:06}", m / 1_000_000, m % 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendored_table_parses_and_prices_exactly() {
        let t = PriceTable::vendored().unwrap();
        assert_eq!(t.version, "2026-11-30");
        let usage = TokenUsage {
            input_tokens: 1_000,
            cached_input_tokens: 2_000,
            cache_write_tokens: 0,
            output_tokens: 300,
            reasoning_tokens: 100,
        };
        // 1000*5 + 2000*0.5 + 300*30 = 5000 + 1000 + 9000 micro-dollars.
        assert_eq!(t.cost_micros("gpt-5.5", &usage), Some(15_000));
        let claude = TokenUsage {
            input_tokens: 10,
            cached_input_tokens: 100,
            cache_write_tokens: 1_000,
            output_tokens: 7,
            reasoning_tokens: 0,
        };
        // 10*3 + 100*0.3 + 1000*3.75 + 7*15 = 30 + 30 + 3750 + 105.
        assert_eq!(
            t.cost_micros("claude-sonnet-4-5-20250929", &claude),
            Some(3_915)
        );
        assert_eq!(t.cost_micros("no-such-model", &claude), None);
    }

    #[test]
    fn rounding_is_half_up_on_the_sum() {
        let t = PriceTable::vendored().unwrap();
        let usage = TokenUsage {
            cached_input_tokens: 3,
            ..TokenUsage::default()
        };
        // 3 * 0.125 = 0.375 micro-dollars → 0.
        assert_eq!(t.cost_micros("gpt-5.1-codex", &usage), Some(0));
        let usage = TokenUsage {
            cached_input_tokens: 4,
            ..TokenUsage::default()
        };
        // 4 * 0.125 = 0.5 → 1.
        assert_eq!(t.cost_micros("gpt-5.1-codex", &usage), Some(1));
    }

    #[test]
    fn bad_decimals_are_named() {
        let err = PriceTable::parse(
            "version = \"x\"\n[models.m]\ninput = \"1.2.3\"\ncached_input = \"0\"\noutput = \"1\"\n",
            "test.toml",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "price table test.toml: model `m` field `input`: `1.2.3` is not a decimal with at most 6 fraction digits"
        );
    }

    #[test]
    fn usd_formatting() {
        assert_eq!(format_usd(15_000), "$0.015000");
        assert_eq!(format_usd(2_500_001), "$2.500001");
    }
}
