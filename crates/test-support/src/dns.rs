//! A mock DNS resolver for the egress proxy (`paddock::egress::Resolver`):
//! each name answers from a list of answers, one per lookup, the last one
//! repeated (so a test plays DNS rebinding: first a permitted address, then
//! a private one), and every lookup is counted.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::Mutex;

/// One name's successive answers and how many lookups it had.
type Answers = (Vec<Vec<IpAddr>>, usize);

/// Names → successive answers.
#[derive(Debug, Default)]
pub struct MockResolver {
    answers: Mutex<HashMap<String, Answers>>,
}

impl MockResolver {
    pub fn new() -> MockResolver {
        MockResolver::default()
    }

    /// `name` answers `addresses` on every lookup.
    pub fn with(self, name: &str, addresses: &[&str]) -> MockResolver {
        self.with_answers(name, &[addresses])
    }

    /// `name` answers each of `answers` in turn, the last one repeated.
    pub fn with_answers(self, name: &str, answers: &[&[&str]]) -> MockResolver {
        let parsed = answers
            .iter()
            .map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect())
            .collect();
        self.answers
            .lock()
            .unwrap()
            .insert(name.to_string(), (parsed, 0));
        self
    }

    /// How many times `name` was looked up.
    pub fn lookups(&self, name: &str) -> usize {
        self.answers
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |(_, n)| *n)
    }
}

#[async_trait::async_trait]
impl paddock::egress::Resolver for MockResolver {
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        let mut answers = self.answers.lock().unwrap();
        let Some((list, count)) = answers.get_mut(host) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host}: no such name (mock resolver)"),
            ));
        };
        let answer = list[(*count).min(list.len() - 1)].clone();
        *count += 1;
        Ok(answer)
    }
}
