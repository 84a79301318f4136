//! The models a job may use: the job's own list and its HostProfile's,
//! both of which must allow a model. A pattern is a model name, or a prefix
//! ending in `*`; a name also matches the same name with a date suffix
//! (`-20250929`, `-2026-03-05`), as providers report the served model, and
//! a Bedrock model id (`us.anthropic.claude-sonnet-4-5-20250929-v1:0`)
//! also matches by the Anthropic name it stands for, as prices do. An
//! empty list allows every model. The broker checks the requested model
//! before forwarding and the served model as soon as the upstream names it,
//! and answers `GET /v1/models` with the allowed list.

use super::prices::PriceTable;

/// One list of patterns (a job's or a HostProfile's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelAllowlist {
    /// Every list must allow the model; an empty list allows all.
    lists: Vec<(String, Vec<String>)>,
}

impl ModelAllowlist {
    /// No restriction.
    pub fn any() -> ModelAllowlist {
        ModelAllowlist::default()
    }

    /// Adds a list, named for messages (`job`, `host profile constrained-local`).
    /// An empty list adds no restriction.
    pub fn with(mut self, name: &str, patterns: &[String]) -> ModelAllowlist {
        if !patterns.is_empty() {
            self.lists.push((name.to_string(), patterns.to_vec()));
        }
        self
    }

    /// `Err(list name)` naming the first list that does not allow `model`.
    pub fn check(&self, model: &str) -> Result<(), String> {
        for (name, patterns) in &self.lists {
            if !patterns.iter().any(|p| matches(p, model)) {
                return Err(name.clone());
            }
        }
        Ok(())
    }

    pub fn allows(&self, model: &str) -> bool {
        self.check(model).is_ok()
    }

    /// The models to list on `/v1/models`: every priced model the lists
    /// allow, plus the exact names the lists give (sorted, deduplicated).
    pub fn listed(&self, prices: &PriceTable) -> Vec<String> {
        let mut out: Vec<String> = prices
            .models()
            .filter(|m| self.allows(m))
            .map(str::to_string)
            .collect();
        for (_, patterns) in &self.lists {
            for p in patterns {
                if !p.ends_with('*') && self.allows(p) {
                    out.push(p.clone());
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

fn matches(pattern: &str, model: &str) -> bool {
    matches_name(pattern, model)
        || super::bedrock::price_name(model)
            .is_some_and(|name| name != model && matches_name(pattern, name))
}

fn matches_name(pattern: &str, model: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix('*') {
        return model.starts_with(prefix);
    }
    model == pattern || without_date(model) == Some(pattern)
}

/// `name-20250929` or `name-2025-09-29` → `name`.
fn without_date(model: &str) -> Option<&str> {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if let Some((stem, date)) = model.rsplit_once(['-', '@']) {
        if date.len() == 8 && digits(date) {
            return Some(stem);
        }
    }
    // -YYYY-MM-DD: the last 11 characters.
    let cut = model.len().checked_sub(11)?;
    let (stem, date) = (model.get(..cut)?, model.get(cut..)?);
    let parts: Vec<&str> = date.split('-').collect();
    match parts.as_slice() {
        ["", y, m, d] if y.len() == 4 && m.len() == 2 && d.len() == 2 => {
            (digits(y) && digits(m) && digits(d)).then_some(stem)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_list_must_allow_the_model() {
        let a = ModelAllowlist::any()
            .with("job", &["gpt-5.5".into(), "claude-sonnet-4*".into()])
            .with("host profile small", &["claude-*".into(), "gpt-5.5".into()])
            .with("empty", &[]);
        assert_eq!(a.check("gpt-5.5"), Ok(()));
        assert_eq!(a.check("gpt-5.5-2026-03-05"), Ok(()));
        assert_eq!(a.check("claude-sonnet-4-5-20250929"), Ok(()));
        assert_eq!(a.check("gpt-5.4"), Err("job".into()));
        assert_eq!(a.check("gpt-5.5x"), Err("job".into()));
        assert_eq!(
            ModelAllowlist::any()
                .with("job", &["gpt-*".into()])
                .with("host profile small", &["claude-*".into()])
                .check("gpt-5.5"),
            Err("host profile small".into())
        );
        assert_eq!(ModelAllowlist::any().check("anything"), Ok(()));
    }

    #[test]
    fn bedrock_ids_match_by_their_anthropic_name_too() {
        let a = ModelAllowlist::any().with("job", &["claude-sonnet-4-5".into()]);
        assert_eq!(
            (
                a.check("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
                a.check("anthropic.claude-sonnet-4-5-v2"),
                a.check("us.anthropic.claude-opus-4-1-20250805-v1:0"),
            ),
            (Ok(()), Ok(()), Err("job".into()))
        );
        let exact = ModelAllowlist::any().with(
            "job",
            &["us.anthropic.claude-sonnet-4-5-20250929-v1:0".into()],
        );
        assert_eq!(
            exact.check("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            Ok(())
        );
    }

    #[test]
    fn the_listed_models_are_the_allowed_priced_ones_and_exact_names() {
        let prices = PriceTable::vendored().unwrap();
        let a = ModelAllowlist::any().with("job", &["gpt-5.5".into(), "claude-opus-4-8*".into()]);
        assert_eq!(
            a.listed(&prices),
            vec!["claude-opus-4-8".to_string(), "gpt-5.5".to_string()]
        );
        let unpriced = ModelAllowlist::any().with("job", &["local-model".into()]);
        assert_eq!(unpriced.listed(&prices), vec!["local-model".to_string()]);
    }
}
