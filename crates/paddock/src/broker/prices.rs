//! The price table: USD per million tokens as exact decimals, turned into
//! integer micro-dollars so that costs add up without float drift. The table
//! shipped in the binary is two files: `data/prices-litellm.toml`, generated
//! from LiteLLM's model cost map by `scripts/import-prices` (every OpenAI and
//! Anthropic chat model it lists), and `data/prices.toml` over it (models
//! newer than that import, by hand). A user's table (`--prices`,
//! `PADDOCK_PRICES`) is merged over the shipped one, model by model. Each
//! model has standard prices, the most it can output, and optionally a
//! long-context tier (applied when a call's input is above its threshold)
//! and batch, priority and flex tiers (applied when the answer says it was
//! served in that tier: OpenAI's `service_tier`, Anthropic's
//! `usage.service_tier`).

use std::collections::BTreeMap;
use std::path::Path;

use paddock_protocol::TokenUsage;
use serde::{Deserialize, Serialize};

/// The shipped tables, `data/prices-litellm.toml` and `data/prices.toml`
/// as JSON of the same shape (`build.rs`: a JSON parse at every start, a
/// tenth of the TOML parse's CPU).
const VENDORED_IMPORT: &str = include_str!(concat!(env!("OUT_DIR"), "/prices-litellm.json"));
const VENDORED: &str = include_str!(concat!(env!("OUT_DIR"), "/prices.json"));

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
        field: String,
        value: String,
    },
}

/// A price table file as written (decimal strings, USD per million tokens).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTable {
    /// The table's date (or another version label); it names the prices in
    /// every ledger row.
    pub version: String,
    /// Where the prices come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default)]
    pub models: BTreeMap<String, RawPrice>,
}

/// A price as written: a decimal string (`"1.25"`, exact) or a number
/// (`1.25`, `10`), kept as its shortest decimal text (a float's that reads
/// back as the same float), then checked as every price is
/// ([`PriceError::Decimal`]).
fn decimal<'de, D: serde::Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    struct Decimal;
    impl serde::de::Visitor<'_> for Decimal {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a price in USD per million tokens (a number, or a decimal string such as \"1.25\")")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<String, E> {
            if v.is_finite() {
                Ok(v.to_string())
            } else {
                Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
            }
        }
    }
    de.deserialize_any(Decimal)
}

/// [`decimal`] of a price that may be left out.
fn optional_decimal<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<String>, D::Error> {
    decimal(de).map(Some)
}

/// One model as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    #[serde(deserialize_with = "decimal")]
    pub input: String,
    /// Cache reads; defaults to `input`.
    #[serde(
        default,
        deserialize_with = "optional_decimal",
        skip_serializing_if = "Option::is_none"
    )]
    pub cached_input: Option<String>,
    /// Cache writes; defaults to `input`.
    #[serde(
        default,
        deserialize_with = "optional_decimal",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write: Option<String>,
    #[serde(deserialize_with = "decimal")]
    pub output: String,
    /// The most output tokens one call can produce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_context: Option<RawLongContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<RawTier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<RawTier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flex: Option<RawTier>,
}

/// Prices for calls whose input is above `above` tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLongContext {
    pub above: u64,
    #[serde(deserialize_with = "decimal")]
    pub input: String,
    #[serde(
        default,
        deserialize_with = "optional_decimal",
        skip_serializing_if = "Option::is_none"
    )]
    pub cached_input: Option<String>,
    #[serde(
        default,
        deserialize_with = "optional_decimal",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write: Option<String>,
    #[serde(deserialize_with = "decimal")]
    pub output: String,
}

/// A service tier's prices (batch, priority, flex).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTier {
    #[serde(deserialize_with = "decimal")]
    pub input: String,
    #[serde(
        default,
        deserialize_with = "optional_decimal",
        skip_serializing_if = "Option::is_none"
    )]
    pub cached_input: Option<String>,
    #[serde(deserialize_with = "decimal")]
    pub output: String,
}

/// Prices of one kind of call in micro-dollars per million tokens (so that
/// `tokens * price / 1_000_000` is micro-dollars).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Rates {
    pub input: u64,
    pub cached_input: u64,
    pub cache_write: u64,
    pub output: u64,
}

/// One model's prices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelPrice {
    pub standard: Rates,
    pub max_output: Option<u64>,
    /// (threshold, rates): calls with more input tokens than the threshold.
    pub long_context: Option<(u64, Rates)>,
    /// `batch`, `priority`, `flex`.
    pub tiers: BTreeMap<&'static str, Rates>,
}

/// The table's tier for a service tier an answer reports (OpenAI's
/// `priority`, `flex`; Anthropic's `priority`, `batch`); `None` for the
/// standard ones (`default`, `auto`, `standard`) and any other value.
pub fn tier_of(service_tier: &str) -> Option<&'static str> {
    match service_tier {
        "batch" => Some("batch"),
        "priority" => Some("priority"),
        "flex" => Some("flex"),
        _ => None,
    }
}

impl ModelPrice {
    /// The rates of a call the upstream served in `service_tier` (as its
    /// answer reports it): the tier's rates where the table has them
    /// (cache writes at the tier's input price), else [`Self::rates_for`].
    pub fn rates_in(&self, tokens: &TokenUsage, service_tier: Option<&str>) -> Rates {
        match service_tier
            .and_then(tier_of)
            .and_then(|t| self.tiers.get(t))
        {
            Some(rates) => *rates,
            None => self.rates_for(tokens),
        }
    }

    /// The rates a call with `tokens` pays: the long-context tier when its
    /// input (uncached, cached and cache writes) is above the threshold.
    pub fn rates_for(&self, tokens: &TokenUsage) -> Rates {
        let input = tokens
            .input_tokens
            .saturating_add(tokens.cached_input_tokens)
            .saturating_add(tokens.cache_write_tokens);
        match self.long_context {
            Some((above, rates)) if input > above => rates,
            _ => self.standard,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceTable {
    pub version: String,
    /// Where the prices come from, one line per merged table.
    pub sources: Vec<String>,
    models: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// The table shipped inside the binary: the LiteLLM import with the
    /// hand-maintained models over it.
    pub fn vendored() -> Result<PriceTable, PriceError> {
        let mut table = PriceTable::parse_json(VENDORED_IMPORT, "vendored prices-litellm.toml")?;
        table.merge(PriceTable::parse_json(VENDORED, "vendored prices.toml")?);
        Ok(table)
    }

    /// The table in effect: the shipped one, with `over` (a user's file)
    /// merged over it when given.
    pub fn effective(over: Option<&Path>) -> Result<PriceTable, PriceError> {
        let mut table = PriceTable::vendored()?;
        if let Some(path) = over {
            table.merge(PriceTable::load(path)?);
        }
        Ok(table)
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
        // The field, the message and where, on one line, as every TOML
        // document's error says it (`paddock_protocol::parse_error`):
        // toml's own text quotes the line under a caret, several lines,
        // which an error of Paddock's never is (docs/cli.md).
        let raw: RawTable = serde_path_to_error::deserialize(toml::Deserializer::new(text))
            .map_err(|e| {
                let (field, message) = paddock_protocol::parse_error::toml(e, text);
                PriceError::Parse {
                    origin: origin.to_string(),
                    message: format!(
                        "{}{message}",
                        paddock_protocol::parse_error::field_prefix(&field)
                    ),
                }
            })?;
        PriceTable::from_raw(raw, origin)
    }

    /// [`PriceTable::parse`] of a table written as JSON (the shipped
    /// tables, converted by `build.rs`).
    fn parse_json(text: &str, origin: &str) -> Result<PriceTable, PriceError> {
        let raw: RawTable = serde_json::from_str(text).map_err(|e| PriceError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        PriceTable::from_raw(raw, origin)
    }

    pub fn from_raw(raw: RawTable, origin: &str) -> Result<PriceTable, PriceError> {
        let mut models = BTreeMap::new();
        for (name, p) in raw.models {
            let dec = |field: &str, value: &str| {
                parse_micros(value).ok_or_else(|| PriceError::Decimal {
                    origin: origin.to_string(),
                    model: name.clone(),
                    field: field.to_string(),
                    value: value.to_string(),
                })
            };
            let rates = |prefix: &str,
                         input: &str,
                         cached: Option<&String>,
                         write: Option<&String>,
                         output: &str|
             -> Result<Rates, PriceError> {
                let input = dec(&format!("{prefix}input"), input)?;
                Ok(Rates {
                    input,
                    cached_input: match cached {
                        Some(v) => dec(&format!("{prefix}cached_input"), v)?,
                        None => input,
                    },
                    cache_write: match write {
                        Some(v) => dec(&format!("{prefix}cache_write"), v)?,
                        None => input,
                    },
                    output: dec(&format!("{prefix}output"), output)?,
                })
            };
            let standard = rates(
                "",
                &p.input,
                p.cached_input.as_ref(),
                p.cache_write.as_ref(),
                &p.output,
            )?;
            let long_context = match &p.long_context {
                Some(l) => Some((
                    l.above,
                    rates(
                        "long_context.",
                        &l.input,
                        l.cached_input.as_ref(),
                        l.cache_write.as_ref(),
                        &l.output,
                    )?,
                )),
                None => None,
            };
            let mut tiers = BTreeMap::new();
            for (tier, raw) in [
                ("batch", &p.batch),
                ("priority", &p.priority),
                ("flex", &p.flex),
            ] {
                if let Some(t) = raw {
                    let prefix = format!("{tier}.");
                    tiers.insert(
                        tier,
                        rates(&prefix, &t.input, t.cached_input.as_ref(), None, &t.output)?,
                    );
                }
            }
            models.insert(
                name,
                ModelPrice {
                    standard,
                    max_output: p.max_output,
                    long_context,
                    tiers,
                },
            );
        }
        Ok(PriceTable {
            version: raw.version,
            sources: raw.source.into_iter().collect(),
            models,
        })
    }

    /// Merges `over` into this table: its models replace or extend this
    /// table's, model by model; the version becomes `this+over` unless they
    /// are equal.
    pub fn merge(&mut self, over: PriceTable) {
        if over.version != self.version {
            self.version = format!("{}+{}", self.version, over.version);
        }
        self.sources.extend(over.sources);
        self.models.extend(over.models);
    }

    /// The names of the priced models, sorted.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// Every model with its prices, sorted by name.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &ModelPrice)> {
        self.models.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The price of a model: exact name, a Bedrock id (by the Anthropic
    /// name it stands for), or the name without a `-YYYYMMDD` /
    /// `@YYYYMMDD` date suffix.
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(p) = self.models.get(model) {
            return Some(p);
        }
        // Bedrock ids: `us.anthropic.claude-…-20250929-v1:0` → `claude-…-20250929`.
        if let Some(name) = super::bedrock::price_name(model) {
            return self.price(name);
        }
        // `-20250929` (Anthropic), `@20250929` (Vertex AI).
        let (stem, date) = model.rsplit_once(['-', '@'])?;
        if date.len() == 8 && date.chars().all(|c| c.is_ascii_digit()) {
            return self.models.get(stem);
        }
        None
    }

    /// The cost of `tokens` on `model` in micro-dollars, rounded half up,
    /// at the long-context rates when the call's input is above the
    /// model's threshold; `None` when the model has no price.
    pub fn cost_micros(&self, model: &str, tokens: &TokenUsage) -> Option<i64> {
        self.cost_micros_in(model, tokens, None)
    }

    /// [`Self::cost_micros`] of a call served in `service_tier` (as the
    /// answer reports it; see [`ModelPrice::rates_in`]).
    pub fn cost_micros_in(
        &self,
        model: &str,
        tokens: &TokenUsage,
        service_tier: Option<&str>,
    ) -> Option<i64> {
        self.cost_micros_kept(model, tokens, 0, service_tier)
    }

    /// [`Self::cost_micros_in`] of a call `hour_writes` of whose cache
    /// writes are kept an hour (Anthropic's `cache_control.ttl` `1h`,
    /// `usage.cache_creation.ephemeral_1h_input_tokens`): those are billed
    /// at twice the input rate, not at `cache_write` (the five-minute
    /// writes' rate).
    pub fn cost_micros_kept(
        &self,
        model: &str,
        tokens: &TokenUsage,
        hour_writes: u64,
        service_tier: Option<&str>,
    ) -> Option<i64> {
        let p = self.price(model)?.rates_in(tokens, service_tier);
        let hour = hour_writes.min(tokens.cache_write_tokens);
        let total: u128 = u128::from(tokens.input_tokens) * u128::from(p.input)
            + u128::from(tokens.cached_input_tokens) * u128::from(p.cached_input)
            + u128::from(tokens.cache_write_tokens - hour) * u128::from(p.cache_write)
            + u128::from(hour) * 2 * u128::from(p.input)
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

    /// The JSON the binary embeds is the shipped TOML, whole: parsed
    /// from the source files here, both tables equal as written and as
    /// priced.
    #[test]
    fn the_embedded_tables_are_the_shipped_toml() {
        let tables = [
            (
                VENDORED_IMPORT,
                include_str!("../../data/prices-litellm.toml"),
            ),
            (VENDORED, include_str!("../../data/prices.toml")),
        ];
        for (json, toml_text) in tables {
            let from_json: RawTable = serde_json::from_str(json).unwrap();
            let from_toml: RawTable = toml::from_str(toml_text).unwrap();
            assert!(!from_toml.models.is_empty());
            assert_eq!(from_json, from_toml);
        }
        let from_toml = {
            let mut t = PriceTable::parse(
                include_str!("../../data/prices-litellm.toml"),
                "vendored prices-litellm.toml",
            )
            .unwrap();
            t.merge(
                PriceTable::parse(
                    include_str!("../../data/prices.toml"),
                    "vendored prices.toml",
                )
                .unwrap(),
            );
            t
        };
        assert_eq!(PriceTable::vendored().unwrap(), from_toml);
    }

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

    /// A table that does not parse is one line naming the table, the field
    /// and where, as a job spec's or a host profile's error does (it was
    /// toml's several lines, the text quoted under a caret, then a line
    /// number and no field).
    #[test]
    fn a_table_that_does_not_parse_is_one_line_naming_the_field_and_where() {
        let said = [
            "version = \"x\"\nx = 1\n",
            "version = \"x\"\n[models.m]\ninput = true\noutput = \"1\"\n",
            "version = \"x\"\n[[[\n",
        ]
        .map(|text| PriceTable::parse(text, "p.toml").unwrap_err().to_string());
        assert_eq!(
            said,
            [
                "price table p.toml: field `x`: unknown field `x`, expected one of `version`, \
                 `source`, `models` (line 2, column 1)",
                "price table p.toml: field `models.m.input`: invalid type: boolean `true`, \
                 expected a price in USD per million tokens (a number, or a decimal string \
                 such as \"1.25\") (line 3, column 9)",
                "price table p.toml: invalid key (line 2, column 3)",
            ]
        );
    }

    /// Prices written as TOML numbers are read as the decimals they show
    /// (a float by its shortest text), checked as strings are: a price a
    /// user writes `1.25` or `10` is no longer refused for not being a
    /// string; one with more than six fraction digits, or below zero, is
    /// refused naming its field.
    #[test]
    fn prices_written_as_numbers_are_their_decimals() {
        let table = |prices: &str| {
            PriceTable::parse(
                &format!("version = \"x\"\n[models.m]\n{prices}\n"),
                "p.toml",
            )
        };
        let numbers = table("input = 1.25\ncached_input = 0.125\noutput = 10\n[models.m.batch]\ninput = 0.1\noutput = 3").unwrap();
        let strings = table("input = \"1.25\"\ncached_input = \"0.125\"\noutput = \"10\"\n[models.m.batch]\ninput = \"0.1\"\noutput = \"3\"").unwrap();
        assert_eq!(numbers.models, strings.models);
        assert_eq!(
            [
                table("input = 0.0000001\noutput = 1")
                    .unwrap_err()
                    .to_string(),
                table("input = -1\noutput = 1").unwrap_err().to_string(),
                table("input = 1\noutput = nan").unwrap_err().to_string(),
            ],
            [
                "price table p.toml: model `m` field `input`: `0.0000001` is not a decimal \
                 with at most 6 fraction digits",
                "price table p.toml: model `m` field `input`: `-1` is not a decimal with at \
                 most 6 fraction digits",
                "price table p.toml: field `models.m.output`: invalid value: floating point \
                 `NaN`, expected a price in USD per million tokens (a number, or a decimal \
                 string such as \"1.25\") (line 4, column 10)",
            ]
        );
    }

    /// Models the issue found refused as unpriced are priced, also by their
    /// Bedrock and Vertex ids.
    #[test]
    fn current_models_are_priced() {
        let t = PriceTable::vendored().unwrap();
        for m in [
            "gpt-5",
            "gpt-5-mini",
            "gpt-5-codex",
            "o3",
            "claude-opus-4-1",
            "claude-sonnet-4-20250514",
            "us.anthropic.claude-opus-4-1-20250805-v1:0",
            "claude-sonnet-4-5@20250929",
        ] {
            assert!(t.price(m).is_some(), "{m} is unpriced");
        }
        assert!(t.models().count() > 100);
    }

    /// Above 200 000 input tokens (uncached, cached and cache writes
    /// together) the whole call is priced at the long-context rates.
    #[test]
    fn the_long_context_tier_applies_above_its_threshold() {
        let t = PriceTable::vendored().unwrap();
        let at = |input: u64| TokenUsage {
            input_tokens: input,
            cached_input_tokens: 100_000,
            output_tokens: 1_000,
            ..TokenUsage::default()
        };
        // 100 000 + 100 000 = 200 000, not above: 100000*3 + 100000*0.3 + 1000*15.
        assert_eq!(
            t.cost_micros("claude-sonnet-4-5", &at(100_000)),
            Some(345_000)
        );
        // 200 001: 100001*6 + 100000*0.6 + 1000*22.5.
        assert_eq!(
            t.cost_micros("claude-sonnet-4-5", &at(100_001)),
            Some(682_506)
        );
        // A model without the tier keeps its prices: 100001*5 + 100000*0.5 + 1000*30.
        assert_eq!(t.cost_micros("gpt-5.5", &at(100_001)), Some(580_005));
    }

    /// Cache writes kept an hour are priced at twice the input rate of
    /// the rates that apply (standard, long-context), the rest at
    /// `cache_write`; more hour writes than writes count as the writes.
    #[test]
    fn cache_writes_kept_an_hour_cost_twice_the_input() {
        let t = PriceTable::vendored().unwrap();
        let tokens = TokenUsage {
            input_tokens: 10,
            cache_write_tokens: 1_000,
            output_tokens: 10,
            ..TokenUsage::default()
        };
        let kept = |hour: u64, tokens: &TokenUsage| {
            t.cost_micros_kept("claude-sonnet-4-5", tokens, hour, None)
        };
        // 10 × 3 + 1000 × 3.75 + 10 × 15.
        assert_eq!(kept(0, &tokens), Some(3_930));
        // 10 × 3 + 600 × 3.75 + 400 × 6 + 10 × 15.
        assert_eq!(kept(400, &tokens), Some(4_830));
        // 10 × 3 + 1000 × 6 + 10 × 15.
        assert_eq!(kept(5_000, &tokens), Some(6_180));
        // Above 200 000 input tokens: 10 × 6 + 250 000 × 12 + 10 × 22.5.
        let long = TokenUsage {
            cache_write_tokens: 250_000,
            ..tokens
        };
        assert_eq!(kept(250_000, &long), Some(3_000_285));
    }

    /// A call the answer reports served in the priority or flex tier is
    /// priced at that tier's rates where the table has them; a standard
    /// tier name, an unknown one, or a tier the model has no prices for
    /// keeps the standard (or long-context) rates.
    #[test]
    fn the_service_tier_the_answer_reports_is_priced() {
        let t = PriceTable::vendored().unwrap();
        let tokens = TokenUsage {
            input_tokens: 1_000_000,
            cached_input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            ..TokenUsage::default()
        };
        let cost = |model: &str, tier: Option<&str>| t.cost_micros_in(model, &tokens, tier);
        assert_eq!(
            [
                cost("gpt-5", None),
                cost("gpt-5", Some("default")),
                cost("gpt-5", Some("priority")),
                cost("gpt-5", Some("flex")),
                cost("gpt-5", Some("scale")),
                cost("gpt-5-2025-08-07", Some("priority")),
                // No priority prices for this model: standard.
                cost("gpt-5-nano", Some("priority")),
                // Anthropic reports `standard`; no priority prices either.
                cost("claude-sonnet-4-5", Some("standard")),
                cost("claude-sonnet-4-5", Some("priority")),
            ],
            [
                Some(11_375_000),
                Some(11_375_000),
                Some(22_750_000),
                Some(5_687_500),
                Some(11_375_000),
                Some(22_750_000),
                Some(455_000),
                // 2 000 000 input tokens: the long-context rates.
                Some(29_100_000),
                Some(29_100_000),
            ]
        );
    }

    /// A user's table merges over the shipped one: its models replace or
    /// add, the others stay; the version names both.
    #[test]
    fn a_users_table_merges_over_the_shipped_one() {
        let dir = std::env::temp_dir().join(format!("paddock-prices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mine.toml");
        std::fs::write(
            &file,
            "version = \"acme-1\"\n[models.gpt-5]\ninput = \"1\"\noutput = \"2\"\n[models.in-house]\ninput = \"0.1\"\noutput = \"0.2\"\n",
        )
        .unwrap();
        let t = PriceTable::effective(Some(&file)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(t.version, "2026-11-30+acme-1");
        let tokens = TokenUsage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            ..TokenUsage::default()
        };
        assert_eq!(t.cost_micros("gpt-5", &tokens), Some(3_000_000));
        assert_eq!(t.cost_micros("in-house", &tokens), Some(300_000));
        assert_eq!(t.cost_micros("gpt-5.5", &tokens), Some(35_000_000));
        assert_eq!(
            PriceTable::effective(None).unwrap(),
            PriceTable::vendored().unwrap()
        );
    }

    #[test]
    fn usd_formatting() {
        assert_eq!(format_usd(15_000), "$0.015000");
        assert_eq!(format_usd(2_500_001), "$2.500001");
    }
}
