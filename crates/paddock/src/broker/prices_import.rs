//! Imports LiteLLM's model cost map (`model_prices_and_context_window.json`,
//! shipped in the `litellm` package) into Paddock's price table format:
//! every chat or responses model whose provider is `openai` or `anthropic`,
//! under its own name (Bedrock and Vertex ids reach these names through
//! [`super::PriceTable::price`]). LiteLLM gives USD per token as floats;
//! the table takes USD per million tokens as decimals, rounded to six
//! fraction digits (a micro-dollar per million tokens). `scripts/import-prices`
//! runs it; a test checks the shipped table against an excerpt.

use std::collections::BTreeMap;

use serde_json::Value;

use super::prices::{RawLongContext, RawPrice, RawTable, RawTier};

/// The providers whose models are imported.
const PROVIDERS: &[&str] = &["openai", "anthropic"];

/// The table for `map` (LiteLLM's JSON object).
pub fn from_litellm(map: &Value, version: &str, source: &str) -> RawTable {
    let mut models = BTreeMap::new();
    for (name, entry) in map.as_object().into_iter().flatten() {
        if let Some(price) = model(name, entry) {
            models.insert(name.clone(), price);
        }
    }
    RawTable {
        version: version.to_string(),
        source: Some(source.to_string()),
        models,
    }
}

fn model(name: &str, e: &Value) -> Option<RawPrice> {
    let provider = e.get("litellm_provider").and_then(Value::as_str)?;
    let mode = e.get("mode").and_then(Value::as_str)?;
    if !PROVIDERS.contains(&provider)
        || !matches!(mode, "chat" | "responses")
        || name.contains('/')
        || name.starts_with("ft:")
    {
        return None;
    }
    let per_million = |field: &str| e.get(field).and_then(Value::as_f64).and_then(decimal);
    let input = per_million("input_cost_per_token")?;
    let output = per_million("output_cost_per_token")?;
    let tier = |suffix: &str| {
        Some(RawTier {
            input: per_million(&format!("input_cost_per_token_{suffix}"))?,
            cached_input: per_million(&format!("cache_read_input_token_cost_{suffix}")),
            output: per_million(&format!("output_cost_per_token_{suffix}"))?,
        })
    };
    let long_context = long_context_threshold(e).and_then(|(above, suffix)| {
        Some(RawLongContext {
            above,
            input: per_million(&format!("input_cost_per_token_{suffix}"))?,
            cached_input: per_million(&format!("cache_read_input_token_cost_{suffix}")),
            cache_write: per_million(&format!("cache_creation_input_token_cost_{suffix}")),
            output: per_million(&format!("output_cost_per_token_{suffix}"))?,
        })
    });
    Some(RawPrice {
        input,
        cached_input: per_million("cache_read_input_token_cost"),
        cache_write: per_million("cache_creation_input_token_cost"),
        output,
        max_output: e.get("max_output_tokens").and_then(Value::as_u64),
        long_context,
        batch: tier("batches"),
        priority: tier("priority"),
        flex: tier("flex"),
    })
}

/// The smallest `input_cost_per_token_above_<N>k_tokens` threshold:
/// (N × 1000, the field suffix).
fn long_context_threshold(e: &Value) -> Option<(u64, String)> {
    e.as_object()?
        .keys()
        .filter_map(|k| {
            let n = k
                .strip_prefix("input_cost_per_token_above_")?
                .strip_suffix("k_tokens")?
                .parse::<u64>()
                .ok()?;
            Some((n * 1_000, format!("above_{n}k_tokens")))
        })
        .min()
}

/// USD per token → USD per million tokens as a decimal with at most six
/// fraction digits and no trailing zeros (`1.25e-06` → `1.25`).
fn decimal(per_token: f64) -> Option<String> {
    if !per_token.is_finite() || per_token < 0.0 {
        return None;
    }
    let text = format!("{:.6}", per_token * 1e6);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    Some(text.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::broker::PriceTable;

    const EXCERPT: &str = include_str!("../../tests/fixtures/litellm-prices-excerpt.json");
    /// LiteLLM 1.110.2's gpt-5.1 entries (newer than the shipped import).
    const GPT_5_1: &str = include_str!("../../tests/fixtures/litellm-1.110.2-gpt-5.1.json");

    #[test]
    fn decimals() {
        assert_eq!(decimal(1.25e-06).as_deref(), Some("1.25"));
        assert_eq!(decimal(1e-05).as_deref(), Some("10"));
        assert_eq!(decimal(1.875e-05).as_deref(), Some("18.75"));
        assert_eq!(decimal(2.5e-08).as_deref(), Some("0.025"));
        assert_eq!(decimal(0.0).as_deref(), Some("0"));
        assert_eq!(decimal(-1.0), None);
    }

    /// The shipped table agrees with the import of LiteLLM's entries for a
    /// handful of representative models (an excerpt of LiteLLM 1.79.3's
    /// file): OpenAI with priority and flex tiers, with batch tiers, a
    /// reasoning model, Anthropic with cache writes and with a long-context
    /// tier; non-OpenAI/Anthropic and non-chat entries are left out.
    #[test]
    fn the_shipped_table_agrees_with_the_import() {
        let map: Value = serde_json::from_str(EXCERPT).unwrap();
        let raw = from_litellm(&map, "excerpt", "LiteLLM excerpt");
        let names: Vec<&str> = raw.models.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            vec![
                "claude-opus-4-1",
                "claude-sonnet-4-20250514",
                "gpt-4.1",
                "gpt-5",
                "gpt-5-codex",
                "gpt-5-mini",
                "o3"
            ]
        );
        let imported = PriceTable::from_raw(raw, "excerpt").unwrap();
        let shipped = PriceTable::vendored().unwrap();
        for (name, price) in imported.entries() {
            assert_eq!(shipped.price(name), Some(price), "{name}");
        }
        // The Sonnet 4 long-context tier, whole.
        let sonnet = imported.price("claude-sonnet-4-20250514").unwrap();
        assert_eq!(
            sonnet.long_context,
            Some((
                200_000,
                super::super::prices::Rates {
                    input: 6_000_000,
                    cached_input: 600_000,
                    cache_write: 7_500_000,
                    output: 22_500_000
                }
            ))
        );
    }

    /// The shipped gpt-5.1 models are the import of LiteLLM 1.110.2's
    /// entries, tiers included (the hand table holds them because the
    /// shipped import is of an older LiteLLM).
    #[test]
    fn the_shipped_gpt_5_1_models_are_litellm_1_110_2s() {
        let map: Value = serde_json::from_str(GPT_5_1).unwrap();
        let raw = from_litellm(&map, "excerpt", "LiteLLM 1.110.2 excerpt");
        let imported = PriceTable::from_raw(raw, "excerpt").unwrap();
        let shipped = PriceTable::vendored().unwrap();
        let names: Vec<&str> = imported.models().collect();
        assert_eq!(
            names,
            [
                "gpt-5.1",
                "gpt-5.1-2025-11-13",
                "gpt-5.1-chat-latest",
                "gpt-5.1-codex",
                "gpt-5.1-codex-max",
                "gpt-5.1-codex-mini"
            ]
        );
        for (name, price) in imported.entries() {
            assert_eq!(shipped.price(name), Some(price), "{name}");
        }
        let shipped_5_1: Vec<&str> = shipped
            .models()
            .filter(|m| m.starts_with("gpt-5.1"))
            .collect();
        assert_eq!(shipped_5_1, names);
    }
}
